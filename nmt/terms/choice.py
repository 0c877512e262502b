"""How a search uses a glossary's terms: the choice among constrained, steered, chosen and
placed terms, made once per call from the engine, the search and the terms found.

- exact (glossary_exact): each term's form is a hard constraint of the beam search
  (nmt.decoding.constrained); nothing is chosen or placed after.
- steered: on an engine that can (Engine.constraints_refusal), a search with
  search.term_bonus > 0 is steered to the terms (nmt.decoding.steering).
- chosen: of the hypotheses a beam finished, the one that uses the most terms comes first
  (search.term_choice, `terms_first`).
- placed: a sentence whose best translation still lacks a term has it placed
  (search.term_place, nmt.terms.placing); after a steered search of a model that read its
  terms, only a term glued into a longer word is (where steering took 97% of the terms,
  placing all the rest doubled the time for 1.5 points).
"""

from __future__ import annotations

from dataclasses import dataclass

from nmt.decoding.settings import DecodeConfig
from nmt.inference.engine import Engine
from nmt.terms.glossary import Glossary, Match
from nmt.terms.placing import MAX_ROUNDS


@dataclass(frozen=True)
class TermChoice:
    exact: bool = False
    steer: bool = False
    choose: bool = False
    place: bool = False
    glued_only: bool = False

    @classmethod
    def of(
        cls,
        engine: Engine,
        search: DecodeConfig,
        glossary: Glossary | None,
        matches: list[list[Match]],
    ) -> TermChoice:
        """The choice for sentences holding `matches` (per sentence, its entries)."""
        exact = glossary is not None and glossary.exact
        held = any(matches)
        steer = (
            not exact
            and held
            and search.term_bonus > 0
            and engine.constraints_refusal(search) is None
        )
        return cls(
            exact=exact,
            steer=steer,
            choose=not exact
            and held
            and search.term_choice
            and search.strategy == "beam"
            and search.beam_size > search.nbest,
            place=held and not exact and search.term_place != "off",
            glued_only=bool(engine.info.get("terms")) and steer,
        )

    def constraints(self, matches: list[list[Match]]) -> list[list[str]] | None:
        """Per sentence the target terms its search is held or steered to (at most
        MAX_ROUNDS a sentence, as placing tries: a search's candidates grow with them)."""
        if not (self.exact or self.steer):
            return None
        return [[m.entry.target for m in mine[:MAX_ROUNDS]] for mine in matches]

    def hypotheses(self, search: DecodeConfig) -> int:
        """How many finished hypotheses a sentence's beam gives, to rank by their terms."""
        return search.beam_size if self.choose else 0
