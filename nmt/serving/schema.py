"""The JSON of `POST /translate`, and how a request's search is made from the model's own.

A request: {"text": "A text." | ["text", ...], "prefix": same shape (optional),
"search": {field of DecodeConfig: value, ...} (optional), "scores", "alignments": true
(optional), "segment": "sentences" | "lines" (optional), "format": "text" | "html"
(optional), "api_key" (optional)}: a Job (nmt.jobs, `request_job`). The answer has
`translation` in the shape of `text` (one translation per text: nmt.translation.texts),
`nbest` (the same shape, each a list of {"text", "score"}, when search.nbest > 1), `scores`
(the same shape, each {"confidence", "log_prob_per_token", "words": [{"word",
"probability"}]} or null for an empty line, when asked), `alignments` (the same shape, each
the best translation's Pharaoh word alignment, when asked), and names the model and search.
Types are strict: "5" is not a beam size, 1.5 is not a line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from nmt.config import CHOICES, SEGMENTS, DecodeConfig
from nmt.decoding.settings import READ_BY, describe_search, unread, without_unread
from nmt.documents.formats import TEXT_FORMATS
from nmt.inference.alignment import pharaoh
from nmt.inference.loading import engine_class
from nmt.jobs.job import Job, JobError
from nmt.terms.glossary import MAX_ENTRIES, Glossary, GlossaryError, read_glossary
from nmt.terms.spans import KIND_NAMES, MAX_PATTERNS, Rules
from nmt.written_numbers import MODES as NUMBER_MODES

if TYPE_CHECKING:
    from nmt.translation.translated import Translation

# How far a request may take each search field: one request must not take the machine (a
# beam of 10,000, say). The fields and their types are DecodeConfig's (settings.py).
BOUNDS = {
    "beam_size": dict(ge=1, le=64),
    "len_penalty": dict(ge=0, le=10),
    "nbest": dict(ge=1, le=64),
    "temperature": dict(ge=0, le=100),
    "top_k": dict(ge=0, le=1_000_000),
    "top_p": dict(gt=0, le=1),
    "seed": dict(ge=0, le=2**32 - 1),
    "max_len_a": dict(ge=0, le=10),
    "max_len_b": dict(ge=0, le=1024),
    "min_len": dict(ge=0, le=1024),
    "no_repeat_ngram_size": dict(ge=0, le=16),
    "term_bonus": dict(ge=0, le=100),
}


def search_settings_model() -> type[BaseModel]:
    """The request's `search`: every DecodeConfig field, optional, with its type (a choice of
    settings.CHOICES as a Literal) and BOUNDS."""
    hints = get_type_hints(DecodeConfig)
    fields = {}
    for field in dataclasses.fields(DecodeConfig):
        kind = Literal[CHOICES[field.name]] if field.name in CHOICES else hints[field.name]
        fields[field.name] = (kind | None, Field(default=None, **BOUNDS.get(field.name, {})))
    config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    model = create_model("SearchSettings", __config__=config, **fields)
    model.__doc__ = "Fields of the search to change for this request (DecodeConfig's)."
    return model


SearchSettings = search_settings_model()


class TranslateRequest(BaseModel):
    """One line or a list of lines to translate, optional prefixes, optional search fields."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] = Field(examples=["A man rides a bike.", ["Two dogs play.", ""]])
    prefix: str | list[str] | None = Field(
        default=None, description="The start of each translation, in the shape of text"
    )
    search: SearchSettings | None = Field(default=None, examples=[{"beam_size": 8}])
    scores: bool = Field(
        default=False,
        description="Also give each line's confidence and its words' probabilities",
    )
    alignments: bool = Field(
        default=False,
        description="Also give each line's word alignment, Pharaoh 'source-target' pairs",
    )
    segment: Literal[SEGMENTS] | None = Field(
        default=None,
        description="sentences: each text is cut into sentences and joined back with its own "
        "whitespace; lines: each text is one segment; default: the server's (segment=)",
    )

    format: Literal[TEXT_FORMATS] | None = Field(
        default=None,
        description="text: plain text; html: each text is an HTML document or fragment, "
        "translated with its tags kept (no prefix, scores, alignments or nbest); default: the "
        "server's (format=)",
    )

    protect: list[Literal[KIND_NAMES]] | None = Field(
        default=None,
        max_length=len(KIND_NAMES),
        description="The kinds of span carried byte for byte (urls, emails, code, variables, "
        "numbers); default: the server's (protect=)",
    )
    protect_patterns: list[str] | None = Field(
        default=None,
        max_length=MAX_PATTERNS,
        description="Regular expressions whose matches are carried byte for byte; default: "
        "the server's (protect_patterns=)",
    )
    numbers: Literal[NUMBER_MODES] | None = Field(
        default=None,
        description="How protected numbers come back: keep (byte for byte) or localize (an "
        "amount with German separators: 3.5 kg -> 3,5 kg); default: the server's (numbers=)",
    )
    glossary: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_ENTRIES,
        examples=[{"bike": "Fahrrad"}],
        description="Terms to use, {source term: target term}, beside the server's (glossary=); "
        "each text's answer lists its terms and whether they were used",
    )
    glossary_exact: bool | None = Field(
        default=None,
        description="Each term in the exact form given, a hard constraint of the beam search "
        "(the torch engine, a beam of 2 or more; slower); default: the server's "
        "(glossary_exact=)",
    )
    api_key: str | None = Field(
        default=None, description="The API key, where the server asks for one (or Authorization)"
    )

    @property
    def lines(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else self.text

    @property
    def prefixes(self) -> list[str] | None:
        if self.prefix is None:
            return None
        return [self.prefix] if isinstance(self.prefix, str) else self.prefix


class TermUsed(BaseModel):
    source: str
    target: str
    used: bool


class Alternative(BaseModel):
    text: str
    score: float


class WordScore(BaseModel):
    word: str
    probability: float  # the model's, of the word's pieces together (uncalibrated)


class LineScores(BaseModel):
    """How far to trust one translated line (nmt.inference.scores)."""

    confidence: float | None  # calibrated: the expected sentence chrF / 100; None if the model
    # was not calibrated (python -m nmt.calibrate)
    log_prob_per_token: float
    words: list[WordScore]  # the translation's text.split(), in order


class TranslateResponse(BaseModel):
    """The translation in the shape of the request's text, and what made it."""

    translation: str | list[str]
    nbest: list[Alternative] | list[list[Alternative]] | None = None
    model: str
    backend: str
    search: dict
    search_text: str
    scores: LineScores | None | list[LineScores | None] = None
    alignments: str | list[str] | None = None
    # per text, what the output checks found: a missing number, URL or address, a loop, a
    # number fixed (nmt.inference.output_checks); [] for a clean translation
    warnings: list[str] | list[list[str]]
    # per text, the glossary's entries its sentences hold and whether the translation uses
    # each (any inflection): {"source", "target", "used"}; [] without a glossary
    terms: list[TermUsed] | list[list[TermUsed]]


def parse_request(body: bytes) -> TranslateRequest:
    """The request in `body`, or a 422 JobError naming the first problem in one line."""
    try:
        return TranslateRequest.model_validate_json(body)
    except ValidationError as error:
        raise JobError(422, validation_message(error)) from None


def request_job(request: TranslateRequest, default: DecodeConfig, server) -> Job:
    """The job a request asks for: its texts, the `server`'s format, segmenting and protected
    spans (a ServeConfig's) unless it names its own, and its search (`request_search`);
    JobError 422 for a search field its strategy ignores."""
    refused = refused_fields(request, default)
    if refused:
        raise JobError(422, refused)
    if request.prefix is not None and isinstance(request.prefix, str) != isinstance(
        request.text, str
    ):
        raise JobError(422, "prefix must have the shape of text: one prefix per line")
    exact = server.glossary_exact if request.glossary_exact is None else request.glossary_exact
    shared = read_glossary(server.glossary, exact) if server.glossary else None
    try:
        own = Glossary.of_request(request.glossary, exact) if request.glossary else None
        glossary = shared.under(own) if shared is not None else own
    except GlossaryError as error:
        raise JobError(422, str(error)) from None
    search = request_search(default, request)
    refusal = engine_class(server.backend).constraints_refusal(search)
    if exact and glossary is not None and refusal:  # the engine's own, before any work
        raise JobError(422, refusal)
    return Job(
        search=search,
        texts=request.lines,
        format=request.format or ("text" if server.format == "auto" else server.format),
        segment=request.segment or server.segment,
        prefixes=request.prefixes,
        scores=request.scores,
        alignments=request.alignments,
        protect=Rules(
            server.protect if request.protect is None else request.protect,
            server.protect_patterns
            if request.protect_patterns is None
            else request.protect_patterns,
            request.numbers or server.numbers,
        ),
        glossary=glossary,
    )


def translate_reader(default: DecodeConfig, server):
    """The door's reader of POST /translate (nmt.serving.door.Reader); `server`: its
    ServeConfig."""
    from nmt.serving.door import Asked

    async def read(body: bytes, content_type: str) -> Asked:
        request = parse_request(body)
        return Asked(request, lambda: request_job(request, default, server), request.api_key)

    return read


def validation_message(error: ValidationError) -> str:
    """Pydantic's first error as one line: `where: what`."""
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "extra_forbidden" and where.startswith("search."):
        known = ", ".join(SearchSettings.model_fields)
        return f"unknown search setting {where.removeprefix('search.')!r}; the settings: {known}"
    message = first["msg"].splitlines()[0]
    return f"{where}: {message}" if where else message


def refused_fields(request: TranslateRequest, default: DecodeConfig) -> str | None:
    """Why the request's search sets a field its strategy ignores (one line), or None."""
    given = request.search.model_dump(exclude_none=True) if request.search else {}
    strategy = given.get("strategy", default.strategy)
    for name in unread(strategy, given):
        return (
            f"search.{name} does nothing with strategy {strategy}: "
            f"it applies to {' or '.join(READ_BY[name])}"
        )
    return None


def request_search(default: DecodeConfig, request: TranslateRequest) -> DecodeConfig:
    """The search this request runs: the server's `default` with the request's fields, and the
    fields its strategy ignores at their defaults (so requests that search alike are batched
    together). Whether it is a search as a whole, the engine checks."""
    given = request.search.model_dump(exclude_none=True) if request.search else {}
    return without_unread(replace(default, **given))


def response(
    request: TranslateRequest,
    found: list[Translation],
    model: str,
    backend: str,
    search: DecodeConfig,
) -> dict:
    """The answer to `request`: lists for a list of texts, one value for one text. "nbest"
    with search.nbest > 1, "scores" (None for an empty text) and "alignments" (Pharaoh, ""
    for an empty text) when the request asked for them."""
    single = isinstance(request.text, str)

    def shaped(values: list):
        return values[0] if single else values

    answer = {
        "translation": shaped([t.text for t in found]),
        "model": model,
        "backend": backend,
        "search": asdict(search),
        "search_text": describe_search(search),
        "warnings": shaped([t.warnings for t in found]),
        "terms": shaped([t.terms for t in found]),
    }
    if search.nbest > 1:
        answer["nbest"] = shaped(
            [[{"text": text, "score": score} for text, score in t.alternatives] for t in found]
        )
    if request.scores:
        answer["scores"] = shaped([line_scores(t.scores) for t in found])
    if request.alignments:
        answer["alignments"] = shaped(
            [pharaoh(t.alignments[0]) if t.alignments else "" for t in found]
        )
    return answer


def line_scores(rated) -> dict | None:
    """A line's Scores as LineScores' JSON; None for an empty line."""
    if rated is None:
        return None
    words = zip(rated.words, rated.word_probs, strict=True)
    return {
        "confidence": rated.confidence,
        "log_prob_per_token": rated.mean_log_prob,
        "words": [{"word": word, "probability": p} for word, p in words],
    }
