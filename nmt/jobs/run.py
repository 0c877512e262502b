"""`run(plan, translate)`: a checked job (check.py) done by a translator of texts.

A translator takes texts (plain: the job's lines, a text file's lines, or an HTML or Word
file's segments) and gives one Translation each, with its alignment when asked (documents
always ask: the alignment places their tags and runs). `engine_translator` is the one that
decodes in this process; the server's routes use the server's own, which shares its batches
(nmt.serving.submit). Each document is put back together by its format's reader
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
    batches, ends the decoding early (nmt.inference.engine.Stopped)."""

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


def run(plan: Plan, translate: Translator, first_line_number: int = 1) -> Result:
    """The job of `plan`, translated (see the module docstring)."""
    job = plan.job
    numbers = list(range(first_line_number, first_line_number + len(plan.segments)))
    if plan.parsed is None:  # plain texts
        found = translate(plan.segments, numbers, job.prefixes, job.alignments, job.scores)
        return Result(translations=found)
    found = translate(plan.segments, numbers, None, plan.parsed.aligned, False)
    out = plan.parsed.render(found)
    return Result(data=out) if isinstance(out, bytes) else Result(translations=out)
