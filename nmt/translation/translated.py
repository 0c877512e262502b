"""`Translation`: one text's translation, as every door answers it."""

from __future__ import annotations

from dataclasses import dataclass, field

from nmt.inference.scores import Scores


@dataclass
class Translation:
    """One text's translation. alternatives: (text, score), best first ([] for a text with
    nothing to translate, whose translation is then `empty`: "" for a blank text, the text
    itself for Markdown markers or rules alone); alignments: per alternative, (source word,
    target word) pairs; scores: the best alternative's."""

    source: str
    empty: str = ""
    alternatives: list[tuple[str, float]] = field(default_factory=list)
    alignments: list[list[tuple[int, int]]] | None = None
    scores: Scores | None = None
    # what the output checks found in its sentences (missing numbers, URLs, addresses; a
    # loop) and the numbers they fixed (nmt.inference.output_checks)
    warnings: list[str] = field(default_factory=list)
    # the glossary entries its sentences hold: {"source", "target", "used"} (nmt.terms)
    terms: list[dict] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.alternatives[0][0] if self.alternatives else self.empty
