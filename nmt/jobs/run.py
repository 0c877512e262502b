"""`run(plan, translate)`: a checked job (check.py) done by a translator of texts.

A translator takes texts (plain: the job's lines, a text file's lines, or an HTML or Word
file's segments) and gives one Translation each, with its alignment when asked (documents
always ask: the alignment places their tags and runs). `engine_translator` is the one that
decodes in this process; the server's routes use the server's own, which shares its batches
(nmt.serving.submit). The documents are put back together here, for every door alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nmt.documents.sentences import SentenceSplitter
from nmt.documents.translation import Translation, translate_texts
from nmt.inference.engine import Engine
from nmt.jobs.check import Plan
from nmt.jobs.job import LINE_BREAKS, Job

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
    if plan.pages is None and plan.lines is None:  # texts
        found = translate(plan.segments, numbers, job.prefixes, job.alignments, job.scores)
        return Result(translations=found)
    found = translate(plan.segments, numbers, None, plan.pages is not None, False)
    if plan.lines is not None:
        return Result(data=text_file(plan.lines, found))
    pages = plan.pages.render(found)
    if plan.word_file is not None:
        return Result(data=plan.word_file.translated([page.text for page in pages]))
    if job.data is not None:
        return Result(data=pages[0].text.encode())
    return Result(translations=pages)


def text_file(lines: list[str], found: list[Translation]) -> bytes:
    """A text file's lines, each translated but a blank one, each keeping its line break."""
    answers = iter(found)
    out = []
    for line in lines:
        body = line.rstrip(LINE_BREAKS)
        out.append((next(answers).text if body.strip() else body) + line[len(body) :])
    return "".join(out).encode()
