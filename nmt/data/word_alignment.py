"""Word alignments of a parallel corpus from an existing aligner: eflomal (Östling & Tiedemann
2016, Bayesian IBM models with Markov chain Monte Carlo), run in both directions and
symmetrised with grow-diag-final-and (Koehn et al. 2005). Links index whitespace words,
source first, as in Pharaoh files.

eflomal is an optional dependency (`pip install eflomal`, it compiles a small C program):
imported only when alignments are built.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

Links = set[tuple[int, int]]
NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def read_pharaoh(line: str) -> Links:
    return {(int(s), int(t)) for s, t in (pair.split("-") for pair in line.split())}


def grow_diag_final_and(forward: Links, reverse: Links) -> Links:
    """The symmetrisation of two directional alignments (both as (source, target) links):
    their intersection, grown by neighbouring (also diagonal) links of the union that align a
    so-far unaligned word, then links of either direction whose two words are both unaligned."""
    union = forward | reverse
    links = forward & reverse
    aligned_src = {s for s, _ in links}
    aligned_tgt = {t for _, t in links}
    grown = True
    while grown:
        grown = False
        for s, t in sorted(links):
            for ds, dt in NEIGHBOURS:
                new = (s + ds, t + dt)
                if (
                    new in union
                    and new not in links
                    and (new[0] not in aligned_src or new[1] not in aligned_tgt)
                ):
                    links.add(new)
                    aligned_src.add(new[0])
                    aligned_tgt.add(new[1])
                    grown = True
    for direction in (forward, reverse):  # final-and
        for s, t in sorted(direction):
            if s not in aligned_src and t not in aligned_tgt:
                links.add((s, t))
                aligned_src.add(s)
                aligned_tgt.add(t)
    return links


def align_corpus(sources: list[str], targets: list[str]) -> list[Links]:
    """Symmetrised eflomal links for each pair (an empty side: no links). Lowercased, as
    aligners are usually run."""
    try:
        from eflomal import Aligner
    except ImportError:
        raise ImportError(
            "building word alignments needs eflomal: pip install eflomal (or pip install -e "
            "'.[align]')"
        ) from None
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} source lines but {len(targets)} target lines")
    with tempfile.TemporaryDirectory() as folder:
        forward, reverse = Path(folder) / "fwd", Path(folder) / "rev"
        aligner = Aligner()
        src = [line.lower().strip() + "\n" for line in sources]
        tgt = [line.lower().strip() + "\n" for line in targets]
        aligner.align(src, tgt, links_filename_fwd=str(forward), links_filename_rev=str(reverse))
        fwd = forward.read_text(encoding="utf-8").split("\n")[: len(sources)]
        rev = reverse.read_text(encoding="utf-8").split("\n")[: len(sources)]
    return [
        grow_diag_final_and(read_pharaoh(f), read_pharaoh(r)) for f, r in zip(fwd, rev, strict=True)
    ]
