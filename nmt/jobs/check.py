"""`check(job, limits)`: a job read and counted before any costly work, or refused.

A file is bounded by its bytes; then its format's reader (nmt.documents.formats) bounds what
only that format has before parsing (a Word file's inflated size and runs, an HTML page's
`<`s: `max_file_tags`) and parses it once, in linear time, into the segments that will be
translated; each segment's characters, words and inline tags are counted before alignment
and tag projection ever see them. Then the search's worst case is priced: per sentence, as
the translator cuts the segments (or per segment with segment=lines), the times it may be
searched (its glossary terms and protected spans: `sentence_searches`) x the rows the search
keeps (beams, or one) x the n-best x the longest output it allows (a * (characters + 1) + b
tokens, at least min_len, at most the model's positions: a token holds at least a
character), summed over the sentences. The `Plan` keeps what was parsed, so
running the job parses nothing again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from nmt.decoding.penalties import output_length
from nmt.documents.formats import named
from nmt.documents.parsed import Parsed
from nmt.errors import JobError
from nmt.inference.planner import rows_per_sentence
from nmt.jobs.job import Job, Limits
from nmt.terms import spans
from nmt.terms.placing import MAX_ROUNDS
from nmt.terms.spans import SpanError
from nmt.translation.sentences import SentenceSplitter


@dataclass
class Plan:
    """A checked job: `segments`, the texts the translator gets; `parsed`, the document they
    came from (a file, or texts in a document format: nmt.documents.formats), None for plain
    texts, whose Translations are the answer."""

    job: Job
    segments: list[str]
    parsed: Parsed | None = None

    @property
    def characters(self) -> int:
        return sum(len(s) for s in self.segments)


def check(job: Job, limits: Limits, splitter: SentenceSplitter | None = None) -> Plan:
    """The job's Plan, or JobError naming the first limit or rule it breaks. `splitter`: how
    the translator cuts sentences (its max_words), so the search is priced per sentence."""
    job.check_options()
    plan = read(job, limits)
    count(plan, limits, splitter)
    return plan


def read(job: Job, limits: Limits) -> Plan:
    """Parse what the job holds into segments (bounded before each step), by its format's
    reader (nmt.documents.formats)."""
    form = named(job.format)
    if job.texts is not None:
        if len(job.texts) > limits.max_lines:
            raise JobError(
                413, f"{len(job.texts)} lines: the limit is max_lines={limits.max_lines}"
            )
        check_characters("line", job.texts, limits.max_line_chars)
        check_characters("prefix", job.prefixes or [], limits.max_line_chars)
        if form.texts_reader is None:
            return Plan(job, list(job.texts))
        parsed = form.read_texts(job.texts, job.name, limits)
        return Plan(job, parsed.segments, parsed)
    data = job.data or b""
    if len(data) > limits.max_file_bytes:
        raise JobError(
            413,
            f"the file has {len(data)} bytes: the limit is max_file_bytes={limits.max_file_bytes}",
        )
    again = {"retranslate": job.retranslate} if form.holds_translations else {}
    parsed = form.read_file(data, job.name, limits, **again)
    return Plan(job, parsed.segments, parsed)


def count(plan: Plan, limits: Limits, splitter: SentenceSplitter | None = None) -> None:
    """Refuse a plan over the segment limits or the search's cost budget."""
    job, segments = plan.job, plan.segments
    if job.data is not None and len(segments) > limits.max_file_segments:
        raise JobError(
            413,
            f"{len(segments)} segments: the limit is max_file_segments={limits.max_file_segments}",
        )
    if job.data is not None or job.format == "html":
        check_characters("segment", segments, limits.max_line_chars)
    counted = plan.parsed.counted if plan.parsed else None
    for i, (words, tags) in enumerate(counted or []):
        for name, found, limit in (
            ("words", words, limits.max_segment_words),
            ("inline tags", tags, limits.max_segment_tags),
        ):
            if found > limit:
                setting = "max_segment_words" if name == "words" else "max_segment_tags"
                raise JobError(
                    413, f"segment {i + 1} has {found} {name}: the limit is {setting}={limit}"
                )
    if limits.max_pattern_seconds < sys.maxsize:  # before the pricing runs them again
        try:
            job.protect.check_texts(segments, limits.max_pattern_seconds)
        except SpanError as error:
            raise JobError(422, str(error)) from None
    if limits.max_search_cost == sys.maxsize and limits.max_decoder_bytes == sys.maxsize:
        return  # unbounded: nothing to price
    searches = sentence_searches(job, segments, limits.max_output_tokens, splitter)
    cost = search_cost(job, segments, limits.max_output_tokens, splitter, searches)
    if cost > limits.max_search_cost:
        raise JobError(
            413,
            f"the search could cost {cost:,} tokens (segments x beams x n-best x longest output): "
            f"the limit is max_search_cost={limits.max_search_cost}",
        )
    longest = max((most for _, most in searches), default=0)
    state = rows_per_sentence(job.search) * (longest + 1) * limits.state_bytes_per_token
    if state > limits.max_decoder_bytes:
        raise JobError(
            413,
            f"a sentence's search could hold {state:,} bytes of decoder state (rows x longest "
            f"output x layers x width, keys and values): the limit is "
            f"max_decoder_bytes={limits.max_decoder_bytes}",
        )


def check_characters(name: str, texts: list[str], limit: int) -> None:
    for i, text in enumerate(texts):
        if len(text) > limit:
            raise JobError(
                413,
                f"{name} {i + 1} has {len(text)} characters: the limit is max_line_chars={limit}",
            )


def sentence_searches(
    job: Job, segments: list[str], max_output: int, splitter: SentenceSplitter | None = None
) -> list[tuple[int, int]]:
    """Per sentence, as the translator cuts the segments (segment=sentences; else each
    segment whole): how many times it may be searched (with a glossary, a sentence holding
    terms may be decoded again from each, up to MAX_ROUNDS times: nmt.terms.placing, unless
    they are hard constraints of one search, glossary_exact: nmt.decoding.constrained; one
    holding protected spans twice: read whole, then again with its spans taken out where its
    translation lost one, nmt.translation.carried), and the longest output its search allows
    (at least min_len, at most `max_output`)."""
    search = job.search
    placed = job.glossary is not None and len(job.glossary) and not job.glossary.exact
    glossary = job.glossary if placed else None
    rules = job.protect.compiled() if job.protect.active else []
    cut = splitter or SentenceSplitter()
    found = []
    for text in segments:
        if job.segment == "sentences":
            sentences = [text[start:end] for start, end in cut.spans(text)]
        else:
            sentences = [text] if text.strip() else []
        decodes = 1 + min(len(glossary.find(text)), MAX_ROUNDS) if glossary else 1
        for sentence in sentences:
            longest = output_length(search.max_len_a, len(sentence) + 1, search.max_len_b)
            again = 1 if rules and spans.find(sentence, rules) else 0
            found.append((decodes + again, min(max_output, max(longest, search.min_len, 1))))
    return found


def search_cost(
    job: Job,
    segments: list[str],
    max_output: int,
    splitter: SentenceSplitter | None = None,
    searches: list[tuple[int, int]] | None = None,
) -> int:
    """The most tokens the search may generate for these segments (the module docstring):
    over their sentences (`sentence_searches`, or those given), the times each is searched x
    the rows the search keeps x the n-best x its longest output."""
    search = job.search
    rows = (search.beam_size if search.strategy == "beam" else 1) * search.nbest
    if searches is None:
        searches = sentence_searches(job, segments, max_output, splitter)
    return sum(decodes * rows * longest for decodes, longest in searches)
