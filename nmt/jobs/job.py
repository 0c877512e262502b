"""What a request asks for, whoever sends it, and the limits it is held to.

A `Job` holds texts (each a line, or with format=html an HTML document) or a file's bytes
(a format of nmt.documents.formats), how to cut them (`segment`), the spans to carry unchanged
(`protect`), the terms to use (`glossary`), whether a file's own translations are done again
(`retranslate`),
optional forced prefixes, the search to run and the extras wanted (scores, alignments).
`JobError` is a refusal: an HTTP status (413 over a limit, 415 a file type we do not read, 422
anything malformed) and one line, which the CLI prints as its error and the server sends in
the route's shape.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields

from nmt.config import SEGMENTS, ModelConfig, RequestLimits
from nmt.decoding.settings import DecodeConfig
from nmt.documents.formats import named
from nmt.errors import JobError, SpanError
from nmt.terms.glossary import Glossary
from nmt.terms.spans import Rules


@dataclass
class Limits(RequestLimits):
    """How much one job may ask: the server's RequestLimits (nmt.config, the one table), and
    the model's longest output. Texts, segments and their characters, and a file's tags (or
    Word runs), bound the parsing; words and inline tags per segment bound alignment and tag
    projection; a search's cost (segments x beams x n-best x the longest output it allows, in
    tokens) bounds the decoding; the time a request's own span patterns take on its texts
    bounds the protection. A .docx is refused before it is unzipped past
    `max_inflated_bytes` or `max_zip_ratio`."""

    max_output_tokens: int = sys.maxsize  # the model's positions less one: no output is longer
    # the decoder state of one output token of one row: keys and values of every layer
    state_bytes_per_token: int = 0

    @classmethod
    def of(cls, cfg: RequestLimits, shape: ModelConfig) -> Limits:
        """The limits a config sets (a ServeConfig's RequestLimits fields) for a model."""
        names = [f.name for f in fields(RequestLimits)]
        return cls(
            **{n: getattr(cfg, n) for n in names},
            max_output_tokens=shape.max_positions - 1,
            state_bytes_per_token=state_bytes_per_token(shape),
        )

    @classmethod
    def unbounded(cls, **given) -> Limits:
        """No limit but the `given` ones: a command's (any number of lines, of any length;
        a file bounded by its settings), or a model worker's, whose jobs were checked as the
        server took them."""
        return cls(**{f.name: sys.maxsize for f in fields(cls)} | given)


def state_bytes_per_token(shape: ModelConfig) -> int:
    """The self-attention cache of one row, per output token: keys and values of every
    decoder layer, in float32 (the widest an engine keeps them)."""
    return 2 * shape.decoder_layers * shape.d_model * 4


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
    retranslate: bool = False  # a .po or XLIFF file's translated messages translated again

    def check_options(self) -> None:
        """Refuse (JobError 422) settings that cannot go together, before reading anything."""
        try:
            self.protect.check()
        except SpanError as error:
            raise JobError(422, str(error)) from None
        form = named(self.format)
        if self.segment not in SEGMENTS:
            raise JobError(422, f"segment must be {' or '.join(SEGMENTS)}, not {self.segment!r}")
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
        if self.texts is not None and self.format != "text" and form.texts_reader is None:
            raise JobError(422, f"format {self.format} is a file's: send the file")
        if self.prefixes is not None and self.texts is not None:
            if len(self.prefixes) != len(self.texts):
                raise JobError(422, "prefix must have the shape of text: one prefix per line")
