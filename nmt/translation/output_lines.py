"""`translate`'s output: one line per input line, whatever the texts hold."""

from __future__ import annotations

from nmt.inference.alignment import pharaoh
from nmt.inference.output_text import one_line, score_columns
from nmt.translation.translated import Translation


def output_lines(
    found: list[Translation],
    nbest: int,
    scores: bool = False,
    alignments: bool = False,
    terms: bool = False,
) -> list[str]:
    """Per text: its best translation, or with nbest > 1 its alternatives as
    "translation<TAB>score" pairs joined by tabs, best first (where there are none, what the
    text keeps as it is: "" for a blank line, "---" for a rule).
    `alignments` adds each alternative's Pharaoh word alignment after its score; for the best
    translation alone, after the scores' columns (`scores`, output_text.score_columns) and
    the output checks' warnings, "; "-separated (nmt.inference.output_checks), and with
    `terms` (a glossary's) the terms the translation uses, "source -> target", "; "-separated."""
    lines = []
    for t in found:
        if nbest > 1:
            fields = [] if t.alternatives else [one_line(t.empty)]
            for k, (text, score) in enumerate(t.alternatives):
                fields += [one_line(text), f"{score:.4f}"]
                fields += [pharaoh(t.alignments[k])] if alignments else []
            lines.append("\t".join(fields))
            continue
        fields = [one_line(t.text)]
        if scores:
            fields += [score_columns(t.scores), "; ".join(t.warnings)]
            if terms:
                fields.append(
                    "; ".join(f"{u['source']} -> {u['target']}" for u in t.terms if u["used"])
                )
        if alignments:
            fields.append(pharaoh(t.alignments[0]) if t.alignments else "")
        lines.append("\t".join(fields))
    return lines
