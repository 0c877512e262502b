"""The JSON of `POST /translate`, and how a request's search is made from the model's own.

A request: {"text": "A line." | ["line", ...], "prefix": same shape (optional),
"search": {field of DecodeConfig: value, ...} (optional)}. The answer has `translation` in the
shape of `text` (one line per line, "" for an empty one), `nbest` (the same shape, each a list
of {"text", "score"}, when search.nbest > 1), and names the model and the search it ran.
Types are strict: "5" is not a beam size, 1.5 is not a line.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nmt.backends import runnable_search
from nmt.config import DecodeConfig, describe_search, search_problem


class SearchSettings(BaseModel):
    """Fields of the search to change for this request (DecodeConfig's; docs/guide.md). The
    bounds keep one request from taking the machine (a beam of 10,000, say)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    strategy: Literal["greedy", "beam", "sample"] | None = None
    beam_size: int | None = Field(default=None, ge=1, le=64)
    len_penalty: float | None = Field(default=None, ge=0, le=10)
    length_norm: Literal["gnmt", "power"] | None = None
    nbest: int | None = Field(default=None, ge=1, le=64)
    temperature: float | None = Field(default=None, ge=0, le=100)
    top_k: int | None = Field(default=None, ge=0, le=1_000_000)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    max_len_a: float | None = Field(default=None, ge=0, le=10)
    max_len_b: int | None = Field(default=None, ge=0, le=1024)
    min_len: int | None = Field(default=None, ge=0, le=1024)
    no_repeat_ngram_size: int | None = Field(default=None, ge=0, le=16)


class TranslateRequest(BaseModel):
    """One line or a list of lines to translate, optional prefixes, optional search fields."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] = Field(examples=["A man rides a bike.", ["Two dogs play.", ""]])
    prefix: str | list[str] | None = Field(
        default=None, description="The start of each translation, in the shape of text"
    )
    search: SearchSettings | None = Field(default=None, examples=[{"beam_size": 8}])

    @property
    def lines(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else self.text

    @property
    def prefixes(self) -> list[str] | None:
        if self.prefix is None:
            return None
        return [self.prefix] if isinstance(self.prefix, str) else self.prefix


class Hypothesis(BaseModel):
    text: str
    score: float


class TranslateResponse(BaseModel):
    """The translation in the shape of the request's text, and what made it."""

    translation: str | list[str]
    nbest: list[Hypothesis] | list[list[Hypothesis]] | None = None
    model: str
    backend: str
    search: dict
    search_text: str


class RequestError(ValueError):
    """A request we refuse: `status` (413 or 422) and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# Which fields a strategy reads: a request setting one its search ignores is refused.
USED_BY = {
    "beam_size": ("beam",),
    "len_penalty": ("beam",),
    "length_norm": ("beam",),
    "nbest": ("beam", "sample"),
    "temperature": ("sample",),
    "top_k": ("sample",),
    "top_p": ("sample",),
    "seed": ("sample",),
}


def parse_request(body: bytes) -> TranslateRequest:
    """The request in `body`, or a 422 RequestError naming the first problem in one line."""
    try:
        return TranslateRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestError(422, validation_message(error)) from None


def validation_message(error: ValidationError) -> str:
    """Pydantic's first error as one line: `where: what`."""
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "extra_forbidden" and where.startswith("search."):
        known = ", ".join(SearchSettings.model_fields)
        return f"unknown search setting {where.removeprefix('search.')!r}; the settings: {known}"
    message = first["msg"].splitlines()[0]
    return f"{where}: {message}" if where else message


def request_search(default: DecodeConfig, backend: str, request: TranslateRequest) -> DecodeConfig:
    """The search this request runs: the server's `default` with the request's fields; a 422
    RequestError if they make no valid search or the search would ignore one of them."""
    given = request.search.model_dump(exclude_none=True) if request.search else {}
    try:
        search = replace(default, **given)
    except ValueError as error:  # DecodeConfig's own checks
        raise RequestError(422, "search." + str(error).removeprefix("decode.")) from None
    for name in given:
        if name in USED_BY and search.strategy not in USED_BY[name]:
            raise RequestError(
                422,
                f"search.{name} does nothing with strategy {search.strategy}: "
                f"it applies to {' or '.join(USED_BY[name])}",
            )
    problem = search_problem(search)
    if problem:
        raise RequestError(422, f"search: {problem}")
    return runnable_search(backend, search)[0]


def response(
    request: TranslateRequest,
    best: list[str],
    nbest: list[list[tuple[str, float]]] | None,
    model: str,
    backend: str,
    search: DecodeConfig,
) -> dict:
    """The answer to `request`: lists for a list of lines, one value for one line."""
    single = isinstance(request.text, str)
    answer = {
        "translation": best[0] if single else best,
        "model": model,
        "backend": backend,
        "search": asdict(search),
        "search_text": describe_search(search),
    }
    if nbest is not None:
        lists = [[{"text": t, "score": s} for t, s in hyps] for hyps in nbest]
        answer["nbest"] = lists[0] if single else lists
    return answer
