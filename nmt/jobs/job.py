"""What a request asks for, whoever sends it, and the limits it is held to.

A `Job` holds texts (each a line, or with format=html an HTML document) or a file's bytes
(text, html or docx), how to cut them (`segment`), the spans to carry unchanged (`protect`)
and the terms to use (`glossary`),
optional forced prefixes, the search to run and the extras wanted (scores, alignments).
`JobError` is a refusal: an HTTP status (413 over a limit, 415 a file type we do not read, 422
anything malformed) and one line, which the CLI prints as its error and the server sends in
the route's shape.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

from nmt.decoding.settings import DecodeConfig
from nmt.terms.glossary import Glossary
from nmt.terms.spans import Rules, SpanError

TEXT_FORMATS = ("text", "html")  # what a text may be (docx is a file's alone)
FORMATS = (*TEXT_FORMATS, "docx")
SEGMENTS = ("sentences", "lines")
# A file's format by its suffix: translate's format=auto and POST /translate_file.
FILE_FORMATS = {".txt": "text", ".md": "text", ".html": "html", ".htm": "html", ".docx": "docx"}
# Where str.splitlines breaks a line: a text file's lines end at any of these, kept as they are.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


class JobError(ValueError):
    """A job we refuse: `status` (413, 415 or 422) and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message.splitlines()[0] if message else message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """How much one job may ask (the server's settings: ServeConfig). Texts, segments and
    their characters, and a file's tags (or Word runs), bound the parsing; words and inline
    tags per segment bound alignment and tag projection; a search's cost (segments x beams x
    n-best x the longest output it allows, in tokens) bounds the decoding; the time a
    request's own span patterns take on its texts bounds the protection. A .docx is refused
    before it is unzipped past `max_inflated_bytes` or `max_zip_ratio`."""

    max_lines: int
    max_line_chars: int
    max_file_bytes: int
    max_file_segments: int
    max_file_tags: int
    max_segment_words: int
    max_segment_tags: int
    max_inflated_bytes: int
    max_zip_ratio: float
    max_search_cost: int
    max_pattern_seconds: float  # a request's own protect_patterns, on all its texts
    max_output_tokens: int  # the model's positions less one: no output is longer

    @classmethod
    def of(cls, cfg, max_positions: int) -> Limits:
        """The limits a config sets (ServeConfig's fields of the same names)."""
        names = [f.name for f in fields(cls) if f.name != "max_output_tokens"]
        return cls(**{n: getattr(cfg, n) for n in names}, max_output_tokens=max_positions - 1)

    @classmethod
    def unbounded(cls, **given) -> Limits:
        """No limit but the `given` ones: a command's (any number of lines, of any length;
        a file bounded by its settings), or a model worker's, whose jobs were checked as the
        server took them."""
        return cls(**{f.name: sys.maxsize for f in fields(cls)} | given)


@dataclass
class Job:
    """One request (see the module docstring): `texts` or `data`, never both."""

    search: DecodeConfig = field(default_factory=DecodeConfig)
    texts: list[str] | None = None
    data: bytes | None = None
    name: str = ""  # the file's name (its suffix decided its format), for messages
    format: str = "text"
    segment: str = "sentences"
    prefixes: list[str] | None = None
    scores: bool = False
    alignments: bool = False
    protect: Rules = field(default_factory=Rules)  # spans carried unchanged (nmt.terms.spans)
    glossary: Glossary | None = None  # terms to use (nmt.terms.glossary)

    def check_options(self) -> None:
        """Refuse (JobError 422) settings that cannot go together, before reading anything."""
        try:
            self.protect.check()
        except SpanError as error:
            raise JobError(422, str(error)) from None
        if self.format not in FORMATS:
            raise JobError(422, f"format must be one of {', '.join(FORMATS)}, not {self.format!r}")
        if self.segment not in SEGMENTS:
            raise JobError(422, f"segment must be sentences or lines, not {self.segment!r}")
        if self.format != "text":
            for name, asked in (
                ("prefix", self.prefixes is not None),
                ("scores", self.scores),
                ("alignments", self.alignments),
                ("nbest", self.search.nbest > 1),
            ):
                if asked:
                    raise JobError(
                        422, f"format {self.format} answers with documents alone: drop {name}"
                    )
        if self.texts is not None and self.format == "docx":
            raise JobError(422, "format docx is a file's: send the file")
        if self.prefixes is not None and self.texts is not None:
            if len(self.prefixes) != len(self.texts):
                raise JobError(422, "prefix must have the shape of text: one prefix per line")


def file_format(name: str) -> str:
    """text, html or docx for a file `name`; JobError 415 for a suffix we do not read."""
    suffix = Path(name).suffix.lower()
    if suffix not in FILE_FORMATS:
        raise JobError(
            415, f"unsupported file type {suffix or '(none)'!r}: send {', '.join(FILE_FORMATS)}"
        )
    return FILE_FORMATS[suffix]


def decode_utf8(data: bytes, name: str) -> str:
    """A text or HTML file's text: UTF-8 (a byte-order mark dropped), else JobError 422."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise JobError(422, f"{name or 'the file'} is not UTF-8 (byte {error.start})") from None
