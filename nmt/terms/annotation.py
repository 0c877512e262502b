"""Glossary terms written into the source, as a model trained with the `terms` view reads
them: a source term's last word is followed by its target term between marks,
`the contract %% Vertrag %% was signed` (the inline annotation of Dinu et al. 2019). With
form "lemma" the mark carries the target's lemma, and the model learns to inflect it
(Bergmanis & Pinnis 2021); with "exact", the form to copy.

One writer serves training (nmt.data.augmentation, at a linked word pair) and translation
(nmt.translation.texts, at a glossary match), so both write the same text. The punctuation
after the word stays after the annotation: `contract, ` becomes `contract %% Vertrag %%,`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from nmt.terms.glossary import EDGE, Match
from nmt.terms.lemmas import lemmatize

MARK = "%%"
TERM_FORMS = ("lemma", "exact")
# English words no glossary term is made of (training annotates content words alone)
FUNCTION_WORDS = frozenset(
    "a an the and or but of in on at to for with from by as is are was were be been being "
    "has have had do does did this that these those it its his her their our your my some any "
    "one two three four five while who which what where when there here out up down into onto "
    "over under near not no very also other".split()
)
# German ones, for the target side: an aligner's stray link to an article is no term
TARGET_FUNCTION_WORDS = frozenset(
    "der die das den dem des deren dessen denen ein eine einen einem einer eines kein keine und "
    "oder aber sich mit in im ins auf am an ans zu zum zur von vom bei beim für ist sind war waren "
    "wird werden hat haben sein seine seinem seinen seiner ihr ihre ihrem ihren ihrer er sie es "
    "wir man nicht auch noch aus nach über unter vor hinter neben zwischen durch gegen um als wie "
    "was wer wo dort hier diese dieser dieses diesem diesen jeder jede jedes jedem jeden einige "
    "einigen viele vielen andere anderen anderer anderes etwas sehr dabei daran davor während zwei "
    "drei vier fünf sechs".split()
)


@lru_cache(maxsize=1 << 16)
def target_lemma(word: str) -> str:
    """A German word's lemma (simplemma), its first letter's case kept ("Verträge" ->
    "Vertrag"); the word itself where simplemma knows none."""
    if word.isupper() and len(word) > 1:  # as a noun would be written, then in capitals again
        return target_lemma(word[0] + word[1:].lower()).upper()
    found = lemmatize(word, "de") if word else word
    if not found:
        return word
    first = found[:1].upper() if word[:1].isupper() else found[:1].lower()
    return first + found[1:]


def term_text(target: str, form: str) -> str:
    """What the mark carries for a target term: its words' lemmas, or the term as given."""
    if form == "exact":
        return target
    return " ".join(
        w[: len(w) - len(w.lstrip(EDGE))] + target_lemma(w.strip(EDGE)) + w[len(w.rstrip(EDGE)) :]
        if w.strip(EDGE)
        else w
        for w in target.split()
    )


def annotated_word(word: str, term: str, in_place: bool = False, first: str = "") -> list[str]:
    """`word` followed by the marked `term`, the word's trailing punctuation after the mark;
    `in_place`, the marked term alone, after the leading punctuation of `first` (the source
    term's first word; `word` itself by default)."""
    body = word.rstrip(EDGE) or word
    tail = word[len(body) :]
    if not in_place:
        return [body, MARK, *term.split(), MARK + tail]
    first = first or word
    lead = first[: len(first) - len(first.lstrip(EDGE))]
    return ([lead] if lead else []) + [MARK, *term.split(), MARK + tail]


@dataclass
class Annotated:
    """A sentence with its terms annotated: `text`, and for each of its words the word of the
    sentence it stands for (an annotation's words stand for its term's first word)."""

    text: str
    source_of: list[int]

    def source_links(self, links: list[tuple[int, int]] | None) -> list[tuple[int, int]] | None:
        """Links from the annotated text's words, made links from the sentence's words."""
        if links is None:
            return None
        return sorted({(self.source_of[s], t) for s, t in links if s < len(self.source_of)})


def annotate(sentence: str, matches: list[Match], form: str, in_place: bool = False) -> Annotated:
    """`sentence` (whitespace words) with each match's target term after its last word, or,
    `in_place`, instead of its words (as a model trained with data.augment.term_mask saw
    terms: `%% Vertrag %%` where the contract was; a leading quote or bracket stays)."""
    words = sentence.split()
    after = {m.words.stop - 1: m for m in matches}
    inside = {i for m in matches for i in m.words} if in_place else set()
    out: list[str] = []
    source_of: list[int] = []
    for i, word in enumerate(words):
        if i in after:
            match = after[i]
            start = match.words.start
            term = term_text(match.entry.target, form)
            added = annotated_word(word, term, in_place, words[start])
            own = [] if in_place else [i]  # the word itself, where it stays
            source_of += own + [start] * (len(added) - len(own))
            out += added
        elif i not in inside:
            out.append(word)
            source_of.append(i)
    return Annotated(" ".join(out), source_of)
