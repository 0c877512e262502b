"""The model behind `POST /translate`: a LitServe API run by the inference worker.

LitServe hands `predict` the requests that waited together: up to batch_requests, gathered
until batch_wait_ms after the first of them arrived (batching.py). Their lines are decoded
together: requests with the same search are one call of the backend's `translate`, which
sorts all their lines by length into batches under max_tokens, so a line's translation does
not depend on who else asked (tests/test_serve.py).
Sampling requests are decoded one by one, so a seed gives the same samples however they arrive;
requests asking for alignments, scores, another segmenting or format are decoded apart from
the rest.
Each text is cut into sentences (or not) as nmt.documents.translation says.
A search that is no search as a whole (the engine's SearchError) is a 422 for the requests
that asked for it. If a call fails otherwise, its requests are retried one by one: only a
request that fails alone gets a 500, the others their translations, and the model stays loaded.

No `from __future__ import annotations` here: LitServe reads decode_request's and
encode_response's annotations as the endpoint's request and response types (OpenAPI).
"""

import logging
from dataclasses import astuple

import litserve as ls
from fastapi.responses import JSONResponse

from nmt.config import ServeConfig
from nmt.decoding.settings import DecodeConfig, SearchError
from nmt.documents.markup import translate_html
from nmt.documents.sentences import SentenceSplitter
from nmt.documents.translation import translate_texts
from nmt.inference.cache import TranslationCache
from nmt.inference.loading import load
from nmt.inference.search_choice import choose_search
from nmt.serving.batching import FirstArrivalLoop
from nmt.serving.metrics import batch_metrics
from nmt.serving.schema import TranslateRequest, TranslateResponse, request_search, response

log = logging.getLogger("nmt.serve")


class Failure(str):
    """A request that failed when decoded alone: the one-line reason (a 500)."""

    status = 500


class Refusal(Failure):
    """A request whose search is no search (a 422)."""

    status = 422


class TranslationAPI(ls.LitAPI):
    def __init__(self, cfg: ServeConfig, overrides: list[str], model_name: str):
        super().__init__(
            max_batch_size=cfg.batch_requests,
            batch_timeout=cfg.batch_wait_ms / 1000,
            api_path="/translate",
            loop=FirstArrivalLoop(),  # predict gets a list, even of one request
        )
        self.cfg, self.overrides, self.model_name = cfg, overrides, model_name

    def setup(self, device: str) -> None:
        """Load the model once; `device` is LitServe's ("cpu", "cuda:0", ...)."""
        if self.cfg.device == "auto":
            self.cfg.device = device
        self.engine = load(self.cfg)
        if self.cfg.cache_sentences:
            self.engine.cache = TranslationCache(self.cfg.cache_sentences)
        self.splitter = SentenceSplitter(max_words=self.cfg.segment_max_words)
        self.search, line = choose_search(self.engine.card, self.cfg.decode, self.overrides)
        self.batches = batch_metrics() if self.cfg.metrics else None
        log.info("%s on %s; default %s", self.model_name, self.engine.describe(), line)

    def decode_request(self, request: TranslateRequest) -> tuple[TranslateRequest, DecodeConfig]:
        search = request_search(self.search, request)
        return request, self.engine.runnable(search)[0]

    def predict(self, jobs: list[tuple[TranslateRequest, DecodeConfig]]) -> list:
        """One answer (a dict) or Failure per request, in order."""
        if self.batches is not None:
            lines = sum(1 if isinstance(r.text, str) else len(r.text) for r, _ in jobs)
            self.batches.observe(len(jobs), lines)
        answers: list = [None] * len(jobs)
        groups: dict[tuple, list[int]] = {}
        for i, (request, search) in enumerate(jobs):
            # alignments record attention the plain way, which may round differently: requests
            # asking for them are decoded apart, so no one's translation depends on a neighbour;
            # so are those asking for scores (the CTranslate2 engine force-decodes for them)
            # and for another segmenting or format
            alike = (astuple(search), request.alignments, request.scores, request.segment)
            alike += (request.format or self.cfg.format,)
            key = ("alone", i) if search.strategy == "sample" else alike
            groups.setdefault(key, []).append(i)
        for members in groups.values():
            try:
                for i, answer in zip(members, self.decode([jobs[i] for i in members]), strict=True):
                    answers[i] = answer
            except SearchError as error:  # the same search for all of them
                for i in members:
                    answers[i] = Refusal(f"search: {error}")
            except Exception:  # noqa: BLE001 - isolate it: retry its requests one by one
                log.exception("a batch of %d requests failed; retrying each alone", len(members))
                for i in members:
                    try:
                        answers[i] = self.decode([jobs[i]])[0]
                    except Exception as error:  # noqa: BLE001 - this request's own failure
                        log.exception("a request failed")
                        first = str(error).splitlines()[0] if str(error) else ""
                        answers[i] = Failure(f"translation failed: {type(error).__name__} {first}")
        return answers

    def decode(self, jobs: list[tuple[TranslateRequest, DecodeConfig]]) -> list[dict]:
        """Requests alike (`predict`) decoded in one call."""
        first_request, search = jobs[0]
        lines = [line for request, _ in jobs for line in request.lines]
        prefixes = None
        if any(request.prefixes for request, _ in jobs):
            prefixes = [p for r, _ in jobs for p in (r.prefixes or [""] * len(r.lines))]
        segment = first_request.segment or self.cfg.segment
        if (first_request.format or self.cfg.format) == "html":
            found = translate_html(self.engine, lines, search, segment, self.splitter)
        else:
            found = translate_texts(
                self.engine,
                lines,
                search,
                segment,
                self.splitter,
                prefixes=prefixes,
                alignments=first_request.alignments,
                scores=first_request.scores,
            )
        answers, first = [], 0
        for request, _ in jobs:
            mine = found[first : first + len(request.lines)]
            first += len(request.lines)
            answers.append(response(request, mine, self.model_name, self.engine.name, search))
        return answers

    def encode_response(self, answer) -> TranslateResponse:
        if isinstance(answer, Failure):
            return JSONResponse({"detail": str(answer)}, status_code=answer.status)
        return answer
