"""Glossary terms put into translations, on either engine: written in, or the search continued
from them.

For each sentence, the glossary's entries it holds (`Glossary.find`) are checked against its
best translation (`Glossary.uses`: any inflection). The terms it lacks are placed where the
word alignment puts the words that translate their source terms, each in place of those words
(`terms_written`: two on one word both go in, and none over a term the translation uses).
search.term_place says how:
- "edit" (the default): the terms are written into each of the sentence's translations, the
  words after the last kept as they were, with no search: each edited text is forced through
  the model once for its scores where an output shows them (nbest > 1, scores asked for),
  and for its alignment where asked for (`write_terms`, Engine.force). A
  search after the term may suit the words after it to the term (an article's case), but
  CTranslate2, which cannot steer its search, decodes a forced prefix as dearly as free text:
  editing costs a line one or two forced passes, not a second search (docs/benchmarks.md).
- "decode": the translation up to the last term is forced as a prefix and the search writes
  the rest (Engine.translate's prefixes), so the words after the last term fit it, and the
  model may still inflect its last word ("Vertrag" + "s"). Of the hypotheses the beam
  finished from the prefix, the best that uses the most of the sentence's terms is kept. A
  term the search glued into a longer word ("Reh" + "a", no use of "Reh") is placed once
  more, its word ended (a prefix ending in a space: the next token starts a word).
A sentence is placed once a round, for at most MAX_ROUNDS rounds, each term placed at most
twice: a term still lacking is reported as not used. Sentences that hold no term, or use all
theirs, are decoded once. A model that reads its terms annotated (nmt.terms.annotation) reads
them so again: placing holds it to a term it read and did not write, where its engine cannot
steer the search to it (CTranslate2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from nmt.decoding.results import Hypothesis
from nmt.decoding.settings import DecodeConfig
from nmt.inference.engine import Engine
from nmt.inference.output_text import best_text, one_line
from nmt.terms.annotation import Annotated
from nmt.terms.glossary import EDGE, Entry, Glossary, Match, core
from nmt.terms.spans import PLACEHOLDER

MAX_ROUNDS = 8


@dataclass
class TermUse:
    """A glossary entry a sentence holds, and whether its translation uses the target term."""

    entry: Entry
    used: bool

    def as_dict(self) -> dict:
        return {"source": self.entry.source, "target": self.entry.target, "used": self.used}


def term_tally(terms: list[list[dict]]) -> str:
    """One log line for a run's texts' terms (Translation.terms)."""
    held = [u for per_text in terms for u in per_text]
    used = sum(1 for u in held if u["used"])
    return f"glossary: {used:,} of {len(held):,} terms in {sum(1 for t in terms if t):,} lines used"


def prefix_for(
    translation: str,
    placed: list[Match],
    links: list[tuple[int, int]],
    held: Collection[int] = (),
) -> tuple[str, list[Match]]:
    """The translation with the terms of `placed` (each sentence's lacking ones) written in, up
    to the last (`terms_written`): the prefix, and the matches in the order it places them."""
    words, _, order = terms_written(translation, placed, links, held)
    return " ".join(words), order


def written_in(
    translation: str,
    placed: list[Match],
    links: list[tuple[int, int]],
    held: Collection[int] = (),
) -> str:
    """The whole translation with the terms of `placed` written in (`terms_written`), the
    words after the last kept as they were."""
    words, taken, _ = terms_written(translation, placed, links, held)
    return " ".join(words + translation.split()[taken:])


def terms_written(
    translation: str,
    placed: list[Match],
    links: list[tuple[int, int]],
    held: Collection[int] = (),
) -> tuple[list[str], int, list[Match]]:
    """The translation's words up to the last of the terms of `placed`, the terms written in.
    Each replaces the words aligned to its source words: the first run of them, keeping the
    punctuation around the run ("Hund," -> "Katze,"). With none aligned, it goes in past the
    words aligned to the nearest aligned source word before it, else at the start; never past
    the last word. It replaces no word of `held` (the words of the terms the translation
    uses: two terms aligned to one word are both written, "Rennen Auto"): it goes in
    before the first; and one whose place an earlier term took goes in after that term.
    Those words, the number of the translation's words they stand for, and the matches in
    the order they are written."""
    words = translation.split()
    aligned: dict[int, list[int]] = {}
    for s, t in links:
        if t < len(words):
            aligned.setdefault(s, []).append(t)
    spots = []
    for match in placed:
        mine = sorted({t for s in match.words for t in aligned.get(s, [])})
        if mine:
            at, end = mine[0], mine[0] + 1
            while end in mine:
                end += 1
        else:
            before = [
                max(aligned[s]) + 1 for s in range(match.words.start - 1, -1, -1) if s in aligned
            ]
            at = end = before[0] if before else 0
        at = min(at, max(len(words) - 1, 0))  # the last word (its final stop) is written again
        end = next((i for i in range(at, end) if i in held), max(end, at))
        spots.append((at, end, match))
    out: list[str] = []
    taken, order, tail = 0, [], ""  # tail: the punctuation after the last term written
    for at, end, match in sorted(spots, key=lambda spot: spot[0]):
        shared = at < taken  # an earlier term took its place: it goes in after that term
        at, end = max(at, taken), max(end, taken)
        target = match.entry.target
        if not out and at == 0:
            target = target[:1].upper() + target[1:]
        if end > at:  # the punctuation around the words it replaces stays
            first, final = words[at], words[end - 1]
            lead = first[: len(first) - len(first.lstrip(EDGE))]
            tail = final[len(final.rstrip(EDGE)) :] if core(first) and core(final) else ""
            target = (lead if core(first) and core(final) else "") + target
        elif shared and tail:  # after the term before it, and the punctuation after both
            out[-1] = out[-1][: -len(tail)]
        else:
            tail = ""
        out += [*words[taken:at], target + tail]
        taken = end
        order.append(match)
    return out, taken, order


def place_terms(
    engine: Engine,
    search: DecodeConfig,
    sources: list[str],
    annotated: list[Annotated | None],
    matches: list[list[Match]],
    found: list[list],
    numbers: list[int],
    glossary: Glossary,
    alignments: bool,
    scores: bool,
    stop=None,
    glued_only: bool = False,
) -> None:
    """Each sentence's terms placed (see the module docstring): `matches`, per sentence the
    glossary's entries it holds (their words those of `sources`, the sentences aligned to the
    translations); `annotated`, per sentence its terms annotated as a model trained to read
    them reads them (nmt.terms.annotation), None where it reads the sentence; `found` (per sentence
    its n-best list) is replaced in place where a term was placed. `stop` as
    Engine.translate's. `glued_only`: only terms the translation glued into a longer word
    are placed, their word ended at once (after a search steered to the terms)."""
    # a beam from a forced prefix stops by first_k: under a length penalty that rewards
    # length (GNMT alpha > 1) the exact stop runs it to its maximum length, where it finds
    # long, worse translations (val BLEU 39.9 placed so, 42.9 by first_k: docs/benchmarks.md)
    redo = replace(search, stop="first_k") if search.strategy == "beam" else search
    held = [j for j, m in enumerate(matches) if m]  # their bests decoded in one call
    texts = dict(zip(held, best_text(engine.tokenizer, [found[j] for j in held]), strict=True))
    read = [a.text if a else line for a, line in zip(annotated, sources, strict=True)]
    state = TermRound(engine, glossary, sources, read, annotated, matches, found, numbers, texts)
    if glued_only:  # the others count as placed twice: never placed
        for j, text in texts.items():
            for m in matches[j]:
                state.tried[j][m.entry] = 1 if glossary.glued(text, m.entry.target) else 2
    for _ in range(MAX_ROUNDS):
        todo = state.lacking()
        if not todo:
            break
        links = state.links(todo)
        if search.term_place != "edit":
            decode_from_terms(state, redo, todo, links, alignments, scores, stop)
            continue
        rate = scores or search.nbest > 1
        write_terms(
            engine, redo, sources, read, found, todo, links, numbers, alignments, glossary,
            matches, rate=rate,
        )  # fmt: skip
        for j, lacking in todo:
            state.tried[j].update(m.entry for m in lacking)
            texts[j] = state.best(j)


@dataclass
class TermRound:
    """What place_terms' rounds share: the sentences (`sources`; `read`, as the model reads
    them), their terms (`matches`), their n-best lists (`found`, replaced in place), the
    best texts of those holding terms (`texts`) and how often each term was placed
    (`tried`)."""

    engine: Engine
    glossary: Glossary
    sources: list[str]
    read: list[str]
    annotated: list[Annotated | None]
    matches: list[list[Match]]
    found: list[list]
    numbers: list[int]
    texts: dict[int, str]
    tried: dict[int, Counter[Entry]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tried = {j: Counter() for j in self.texts}

    def best(self, j: int) -> str:
        return best_text(self.engine.tokenizer, [self.found[j]])[0]

    def lacking(self) -> list[tuple[int, list[Match]]]:
        """The sentences still lacking terms that may be placed again, with those terms."""
        todo = []
        for j, text in self.texts.items():
            used = self.glossary.used(text, targets(self.matches[j]))
            lacking = [
                m
                for m, is_used in zip(self.matches[j], used, strict=True)
                if self.tried[j][m.entry] < 2 and not is_used
            ]
            if lacking and text:
                todo.append((j, lacking))
        return todo

    def links(self, todo: list[tuple[int, list[Match]]]) -> list[list[tuple[int, int]]]:
        """Each best's word alignment: the one the search gave with it (alignments asked
        for), else the translation forced through the model (the search's attention costs
        CTranslate2 its sources encoded again, for lines most of which need no other round)."""
        links = [links_of(self.found[j][0], self.annotated[j]) for j, _ in todo]
        unaligned = [i for i, pairs in enumerate(links) if pairs is None]
        forced = self.engine.align(
            [self.sources[todo[i][0]] for i in unaligned],
            [self.texts[todo[i][0]] for i in unaligned],
            [self.numbers[todo[i][0]] for i in unaligned],
        )
        for i, pairs in zip(unaligned, forced, strict=True):
            links[i] = pairs
        return links


def decode_from_terms(
    state: TermRound,
    search: DecodeConfig,
    todo: list[tuple[int, list[Match]]],
    links: list[list[tuple[int, int]]],
    alignments: bool,
    scores: bool,
    stop,
) -> None:
    """decode.term_place=decode, one round: each best up to its last lacking term forced as
    a prefix, the search writing the rest."""
    texts, tried, glossary = state.texts, state.tried, state.glossary
    # of the hypotheses the beam finished from the prefix, the best that uses the most terms:
    # the beam's own best may have glued the term into a longer word ("Reh" + "a")
    choosing = search.strategy == "beam" and search.beam_size > search.nbest and search.term_choice
    placing = [
        prefix_for(texts[j], lacking, pairs or [], held_words(glossary, texts[j], state.matches[j]))
        for (j, lacking), pairs in zip(todo, links, strict=True)
    ]
    # placed again, a term glued into a longer word ("Reh" + "a") ends its word: a prefix
    # ending in a space (one before the last ends its word in the prefix)
    prefixes = [
        prefix + " " * (placed[-1].entry in tried[j])
        for (j, _), (prefix, placed) in zip(todo, placing, strict=True)
    ]
    redone = state.engine.translate(
        [state.read[j] for j, _ in todo],
        search,
        [state.numbers[j] for j, _ in todo],
        prefixes,
        alignments=alignments,
        scores=scores,
        stop=stop,
        sized_as=[state.sources[j] for j, _ in todo],  # an annotated line as its sentence
        hypotheses=search.beam_size if choosing else 0,
    )
    matches = [state.matches[j] for j, _ in todo]
    redone = terms_first(state.engine, redone, matches, glossary, search.nbest)
    for (j, _), (_, placed), nbest in zip(todo, placing, redone, strict=True):
        tried[j].update(m.entry for m in placed)
        if nbest:
            state.found[j] = nbest
            texts[j] = state.best(j)


def write_terms(
    engine: Engine,
    search: DecodeConfig,
    sources: list[str],
    read: list[str],
    found: list[list[Hypothesis]],
    todo: list[tuple[int, list[Match]]],
    links: list[list[tuple[int, int]] | None],
    numbers: list[int],
    alignments: bool,
    glossary: Glossary,
    matches: list[list[Match]],
    rate: bool = True,
) -> None:
    """decode.term_place=edit: the lacking terms of each sentence of `todo` written into each
    of its hypotheses (those it lacks; not over the words of the sentence's terms it uses:
    `matches`) where the alignment puts them (`written_in`; `links`, its best's), the words
    after the last kept, with no search: each edited text is forced through the model with
    its line as the model reads it (`read`: annotated, for a model that reads terms so;
    `Engine.force`) for its tokens, scores and, if asked for, alignment; with `rate` False
    (no score is shown: one best, no scores asked for), for its tokens and alignment alone, a
    forced pass spared. `found` is replaced in place."""
    decode = engine.tokenizer.decode
    rows = [(i, k) for i, (j, _) in enumerate(todo) for k in range(len(found[j]))]
    texts = [one_line(text) for text in decode([found[todo[i][0]][k].tokens for i, k in rows])]
    row_links = [links[i] if k == 0 else None for i, k in rows]
    others = [r for r, pairs in enumerate(row_links) if pairs is None]
    aligned = engine.align(
        [sources[todo[rows[r][0]][0]] for r in others],
        [texts[r] for r in others],
        [numbers[todo[rows[r][0]][0]] for r in others],
    )
    for r, pairs in zip(others, aligned, strict=True):
        row_links[r] = pairs
    written = []
    for (i, _), text, pairs in zip(rows, texts, row_links, strict=True):
        j, placing = todo[i]
        used = glossary.used(text, targets(placing))
        lacking = [m for m, is_used in zip(placing, used, strict=True) if not is_used]
        written.append(
            written_in(text, lacking, pairs or [], held_words(glossary, text, matches[j]))
        )
    owners = [todo[i][0] for i, _ in rows]
    forced = engine.force(
        [read[j] for j in owners],
        written,
        search,
        [numbers[j] for j in owners],
        alignments=alignments,
        rate=rate,
    )
    for (i, k), hyp in zip(rows, forced, strict=True):
        if hyp is not None:
            found[todo[i][0]][k] = hyp


def held_words(glossary: Glossary, text: str, matches: list[Match]) -> set[int]:
    """The places of the words of `text` that write the sentence's terms (those it uses) or
    hold a protected span's placeholder (`#1`, nmt.terms.spans): placing writes no term over
    them."""
    spans = {i for i, word in enumerate(text.split()) if PLACEHOLDER.search(word)}
    return glossary.written_at(text, targets(matches)) | spans


def targets(matches: list[Match]) -> list[str]:
    """The matches' target terms."""
    return [m.entry.target for m in matches]


def links_of(hyp: Hypothesis, annotated: Annotated | None) -> list[tuple[int, int]] | None:
    """A hypothesis's word alignment from the sentence's words (None if it has none)."""
    return annotated.source_links(hyp.alignment) if annotated else hyp.alignment


def terms_first(
    engine: Engine,
    found: list[list[Hypothesis]],
    matches: list[list[Match]],
    glossary: Glossary,
    nbest: int,
) -> list[list[Hypothesis]]:
    """Each sentence's hypotheses cut to `nbest`; those of a sentence that holds terms first
    ranked by how many of them they use (`Glossary.rank`: the best that uses the most first,
    the rest in the search's order). A sentence whose best uses all its terms keeps its
    order, the others unread."""
    decode = engine.tokenizer.decode
    held = [
        j
        for j, (hyps, mine) in enumerate(zip(found, matches, strict=True))
        if mine and len(hyps) > 1
    ]
    bests = dict(zip(held, best_text(engine.tokenizer, [found[j] for j in held]), strict=True))
    todo = [j for j in held if not glossary.uses_all(bests[j], targets(matches[j]))]
    decoded = iter(decode([h.tokens for j in todo for h in found[j][1:]]))
    ranked = [hyps[:nbest] for hyps in found]
    for j in todo:
        texts = [bests[j]] + [one_line(next(decoded)) for _ in found[j][1:]]
        order = glossary.rank(texts, targets(matches[j]))
        ranked[j] = [found[j][h] for h in order][:nbest]
    return ranked
