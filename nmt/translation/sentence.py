"""One sentence on its way through the translation wing: what it was, what the model read,
what the search found and what the finishing steps made of it, in one record.

Each step of nmt.translation.texts fills its part, in the order the data flows: prepare
(`text` to `read`), search (`hypotheses`; those of a sentence read whole first kept where
they carry its spans, nmt.translation.carried), terms (`hypotheses` chosen or placed), finish
(`texts`, `links`, `rated`, `findings`, `warnings`) and join (the text's Translation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nmt.decoding.results import Hypothesis
from nmt.inference.output_checks import Findings
from nmt.inference.scores import Scores
from nmt.terms.annotation import Annotated
from nmt.terms.glossary import Match
from nmt.terms.placing import TermUse
from nmt.terms.spans import Protected


@dataclass
class Sentence:
    """A sentence of text `owner` (its `number` for warnings), as the layout cut it."""

    text: str
    owner: int
    number: int
    prefix: str | None = None  # a forced prefix: its text's whole translation starts so
    # prepare: its spans as placeholders (None: no rules), whether it is spans alone (then
    # it is given back as it came), its casing ("" or nmt.translation.casing's kind), the
    # line the model reads, the glossary entries it holds and their annotation
    guarded: Protected | None = None
    spare: Protected | None = None  # its spans taken out, while it is read whole first
    bare: bool = False
    casing: str = ""
    read: str = ""
    matches: list[Match] = field(default_factory=list)
    annotated: Annotated | None = None
    # search and terms: its n-best list, best first
    hypotheses: list[Hypothesis] = field(default_factory=list)
    # finish: per hypothesis its text and word alignment (to the sentence's own words); the
    # best's scores, checks, term uses and the warnings of its spans
    texts: list[str] = field(default_factory=list)
    links: list[list[tuple[int, int]] | None] = field(default_factory=list)
    rated: Scores | None = None
    findings: Findings | None = None
    uses: list[TermUse] = field(default_factory=list)
    span_warnings: list[str] = field(default_factory=list)

    @property
    def model_text(self) -> str:
        """What the engine translates: the read line, its terms annotated where the model
        learnt to read them."""
        return self.annotated.text if self.annotated else self.read

    @property
    def checked(self) -> str:
        """The read line as the output checks see it: placeholders are no numbers."""
        return self.guarded.masked(self.read) if self.guarded else self.read

    @property
    def warnings(self) -> list[str]:
        return (self.findings.warnings if self.findings else []) + self.span_warnings
