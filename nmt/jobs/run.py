"""`run(plan, translate)`: a checked job (check.py) done by a translator of texts.

A translator takes texts (plain: the job's lines, a text file's lines, or an HTML or Word
file's segments) and gives one Translation each, with its alignment when asked (documents
always ask: the alignment places their tags and runs). `engine_translator` is the one that
decodes in this process; the server's routes use the server's own, which shares its batches
(nmt.serving.dispatch). Each document is put back together by its format's reader
(nmt.documents.formats), for every door alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nmt.inference.engine import Engine
from nmt.jobs.check import Plan
from nmt.jobs.job import Job
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.texts import translate_texts
from nmt.translation.translated import Translation

# texts, their line numbers (for warnings), forced prefixes or None, alignments?, scores?
Translator = Callable[[list[str], list[int], list[str] | None, bool, bool], list[Translation]]


@dataclass
class Result:
    """Texts in: one Translation per text (`translations`). A file in: its bytes (`data`)."""

    translations: list[Translation] | None = None
    data: bytes | None = None


def engine_translator(
    engine: Engine,
    job: Job,
    splitter: SentenceSplitter,
    stop: Callable[[], bool] | None = None,
) -> Translator:
    """Decode on `engine` with the job's search and segmenting; `stop()`, asked between
    batches (and within one every few decoder steps, on our engine), ends the decoding early
    (nmt.decoding.state.Stopped)."""

    def translate(texts, numbers, prefixes, alignments, scores) -> list[Translation]:
        return translate_texts(
            engine,
            texts,
            job.search,
            job.segment,
            splitter,
            numbers,
            prefixes,
            alignments=alignments,
            scores=scores,
            stop=stop,
            protect=job.protect,
            glossary=job.glossary,
        )

    return translate


def wanted(plan: Plan) -> tuple[list[str], list[str] | None, bool, bool]:
    """What a translator is asked for a plan: its segments, their forced prefixes, and
    whether alignments and scores come with them (a document's: the alignments where its
    format places tags or runs by them, and no scores)."""
    job = plan.job
    if plan.parsed is None:  # plain texts
        return plan.segments, job.prefixes, job.alignments, job.scores
    return plan.segments, None, plan.parsed.aligned, False


def finished(plan: Plan, found: list[Translation]) -> Result:
    """The plan's Result from its segments' translations: a document rendered back."""
    if plan.parsed is None:
        return Result(translations=found)
    out = plan.parsed.render(found)
    return Result(data=out) if isinstance(out, bytes) else Result(translations=out)


def run(plan: Plan, translate: Translator, first_line_number: int = 1) -> Result:
    """The job of `plan`, translated (see the module docstring)."""
    texts, prefixes, alignments, scores = wanted(plan)
    numbers = list(range(first_line_number, first_line_number + len(texts)))
    return finished(plan, translate(texts, numbers, prefixes, alignments, scores))
