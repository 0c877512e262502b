"""`check(job, limits)`: a job read and counted before any costly work, or refused.

A file is bounded by its bytes; a Word file by what it would inflate to, before it is unzipped
(nmt.documents.docx_file.check_archive); an HTML page by its `<`s and a Word file by its runs
(`max_file_tags`), counted before either is parsed; then either is parsed once, in linear
time, into the segments that will be translated (nmt.documents.markup.Pages), and each
segment's characters, words and inline tags are counted before alignment and tag projection
ever see them. Then the search's worst case is priced: per segment, the rows the search keeps
(beams, or one) x the n-best x the longest output it allows (a * (characters + 1) + b
tokens, at least min_len, at most the model's positions: a token holds at least a
character), summed over the segments. The `Plan` keeps what was parsed, so running the job
parses nothing again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from nmt.decoding.penalties import output_length
from nmt.documents.docx_file import DocxError, WordFile, check_archive, count_runs
from nmt.documents.html_tree import MarkupError
from nmt.documents.markup import Pages
from nmt.jobs.job import LINE_BREAKS, Job, JobError, Limits, decode_utf8
from nmt.terms.placing import MAX_ROUNDS
from nmt.terms.spans import SpanError


@dataclass
class Plan:
    """A checked job: `segments`, the texts the translator gets; `pages`, the parsed documents
    they came from (format html or docx); `word_file`, the Word file to write them back into;
    `lines`, a text file's lines with their breaks; `characters`, the text to translate."""

    job: Job
    segments: list[str]
    pages: Pages | None = None
    word_file: WordFile | None = None
    lines: list[str] | None = None

    @property
    def characters(self) -> int:
        return sum(len(s) for s in self.segments)


def check(job: Job, limits: Limits) -> Plan:
    """The job's Plan, or JobError naming the first limit or rule it breaks."""
    job.check_options()
    plan = read(job, limits)
    count(plan, limits)
    if limits.max_pattern_seconds < sys.maxsize:
        try:
            job.protect.check_texts(plan.segments, limits.max_pattern_seconds)
        except SpanError as error:
            raise JobError(422, str(error)) from None
    return plan


def read(job: Job, limits: Limits) -> Plan:
    """Parse what the job holds into segments (bounded before each step)."""
    if job.texts is not None:
        if len(job.texts) > limits.max_lines:
            raise JobError(
                413, f"{len(job.texts)} lines: the limit is max_lines={limits.max_lines}"
            )
        check_characters("line", job.texts, limits.max_line_chars)
        check_characters("prefix", job.prefixes or [], limits.max_line_chars)
        if job.format == "html":
            return with_pages(job, job.texts, limits)
        return Plan(job, list(job.texts))
    data = job.data or b""
    if len(data) > limits.max_file_bytes:
        raise JobError(
            413,
            f"the file has {len(data)} bytes: the limit is max_file_bytes={limits.max_file_bytes}",
        )
    if job.format == "docx":
        where = f"{job.name}: " if job.name else ""
        try:
            check_archive(data, limits.max_inflated_bytes, limits.max_zip_ratio)
        except DocxError as error:  # a zip bomb, or no zip at all
            raise JobError(413 if "max_" in str(error) else 422, where + str(error)) from None
        runs = count_runs(data, limits.max_file_tags)
        if runs > limits.max_file_tags:
            raise JobError(413, f"{where}over {runs} runs: the limit is {file_tags(limits)}")
        try:
            word_file = WordFile(data)
        except DocxError as error:
            raise JobError(422, where + str(error)) from None
        plan = with_pages(job, word_file.fragments, Limits.unbounded())
        plan.word_file = word_file
        return plan
    text = decode_utf8(data, job.name)
    if job.format == "html":
        return with_pages(job, [text], limits)
    lines = text.splitlines(keepends=True)
    bodies = [line.rstrip(LINE_BREAKS) for line in lines]  # each line's break kept apart
    return Plan(job, [b for b in bodies if b.strip()], lines=lines)


def with_pages(job: Job, documents: list[str], limits: Limits) -> Plan:
    tags = sum(document.count("<") for document in documents)  # at most, before parsing
    if tags > limits.max_file_tags:
        raise JobError(413, f"{tags} tags: the limit is {file_tags(limits)}")
    try:
        pages = Pages.plan(documents)
    except MarkupError as error:
        raise JobError(422, f"{job.name or 'the HTML'}: {error}") from None
    return Plan(job, [s.text for s in pages.segments], pages=pages)


def count(plan: Plan, limits: Limits) -> None:
    """Refuse a plan over the segment limits or the search's cost budget."""
    job, segments = plan.job, plan.segments
    if job.data is not None and len(segments) > limits.max_file_segments:
        raise JobError(
            413,
            f"{len(segments)} segments: the limit is max_file_segments={limits.max_file_segments}",
        )
    if job.data is not None or job.format == "html":
        check_characters("segment", segments, limits.max_line_chars)
    for i, segment in enumerate(plan.pages.segments if plan.pages else []):
        for name, found, limit in (
            ("words", segment.word_count, limits.max_segment_words),
            ("inline tags", segment.tag_count, limits.max_segment_tags),
        ):
            if found > limit:
                setting = "max_segment_words" if name == "words" else "max_segment_tags"
                raise JobError(
                    413, f"segment {i + 1} has {found} {name}: the limit is {setting}={limit}"
                )
    cost = search_cost(job, segments, limits.max_output_tokens)
    if cost > limits.max_search_cost:
        raise JobError(
            413,
            f"the search could cost {cost:,} tokens (segments x beams x n-best x longest output): "
            f"the limit is max_search_cost={limits.max_search_cost}",
        )


def file_tags(limits: Limits) -> str:
    return f"max_file_tags={limits.max_file_tags}"


def check_characters(name: str, texts: list[str], limit: int) -> None:
    for i, text in enumerate(texts):
        if len(text) > limit:
            raise JobError(
                413,
                f"{name} {i + 1} has {len(text)} characters: the limit is max_line_chars={limit}",
            )


def search_cost(job: Job, segments: list[str], max_output: int) -> int:
    """The most tokens the search may generate for these segments (the module docstring);
    with a glossary, a segment holding terms may be decoded again from each, up to MAX_ROUNDS
    times (nmt.terms.placing), unless the terms are hard constraints of one search
    (glossary_exact, nmt.decoding.constrained: its rows and lengths are the same)."""
    search = job.search
    rows = (search.beam_size if search.strategy == "beam" else 1) * search.nbest
    placed = job.glossary is not None and len(job.glossary) and not job.glossary.exact
    glossary = job.glossary if placed else None
    total = 0
    for text in segments:
        longest = output_length(search.max_len_a, len(text) + 1, search.max_len_b)
        decodes = 1 + min(len(glossary.find(text)), MAX_ROUNDS) if glossary else 1
        total += decodes * rows * min(max_output, max(longest, search.min_len, 1))
    return total
