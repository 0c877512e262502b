"""The model behind `POST /translate`: a LitServe API run by the inference worker.

LitServe hands `predict` the requests that waited together: up to batch_requests, gathered
until batch_wait_ms after the first of them arrived (batching.py). Their lines are decoded
together: requests with the same search are one call of the backend's `translate`, which
sorts all their lines by length into batches under max_tokens, so a line's translation does
not depend on who else asked (tests/test_serve.py).
Sampling requests are decoded one by one, so a seed gives the same samples however they arrive;
requests asking for alignments, scores, another segmenting or format are decoded apart from
the rest.
The requests of one group are one job (nmt.jobs), run here; each text is cut into sentences
(or not) as nmt.translation.texts says. Decoding stops between two batches once every
request of the group is past `timeout` since it was taken (or, in-process, its client gone):
a 504. A search that is no search as a whole (the engine's SearchError) is a 422 for the
requests that asked for it. If a call fails otherwise, its requests are retried one by one: only a
request that fails alone gets a 500, the others their translations, and the model stays loaded.

No `from __future__ import annotations` here: LitServe reads decode_request's and
encode_response's annotations as the endpoint's request and response types (OpenAPI).
"""

import logging
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, replace

import litserve as ls
from fastapi.responses import JSONResponse

from nmt.config import ServeConfig
from nmt.decoding.settings import SearchError
from nmt.inference.cache import TranslationCache
from nmt.inference.engine import Stopped
from nmt.inference.loading import load
from nmt.inference.search_choice import choose_search
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits
from nmt.jobs.run import engine_translator, run
from nmt.serving.batching import FirstArrivalLoop
from nmt.serving.metrics import batch_metrics
from nmt.serving.schema import TranslateRequest, TranslateResponse, request_job, response
from nmt.terms import lemmas
from nmt.terms.glossary import LANGS
from nmt.translation.sentences import SentenceSplitter

log = logging.getLogger("nmt.serve")


class Failure(str):
    """A request that failed when decoded alone: the one-line reason (a 500)."""

    status = 500


class Refusal(Failure):
    """A request whose search is no search (a 422)."""

    status = 422


class TimedOut(Failure):
    """A request whose decoding passed its timeout (a 504)."""

    status = 504


@dataclass
class Taken:
    """A request a worker took: its job, when its decoding must end, and whether its client
    has gone (`gone`: set by the in-process server; LitServe's workers cannot tell)."""

    request: TranslateRequest
    job: Job
    deadline: float
    gone: Callable[[], bool] = lambda: False


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
            self.engine.cache = TranslationCache(self.cfg.cache_sentences, self.cfg.cache_bytes)
        self.splitter = SentenceSplitter(max_words=self.cfg.segment_max_words)
        self.search, line = choose_search(self.engine.card, self.cfg.decode, self.overrides)
        self.batches = batch_metrics() if self.cfg.metrics else None
        lemmas.load(LANGS)  # any request may bring a glossary
        log.info("%s on %s; default %s", self.model_name, self.engine.describe(), line)

    def decode_request(self, request: TranslateRequest) -> Taken:
        """The request as this worker takes it: its job (checked by the server's door as it
        came in) and the time its decoding must end by (timeout from now)."""
        job = request_job(request, self.search, self.cfg)
        job.search = self.engine.runnable(job.search)[0]
        return Taken(request, job, time.monotonic() + self.cfg.timeout)

    def predict(self, taken: list[Taken]) -> list:
        """One answer (a dict) or Failure per request, in order."""
        if self.batches is not None:
            self.batches.observe(len(taken), sum(len(t.job.texts) for t in taken))
        answers: list = [None] * len(taken)
        groups: dict[tuple, list[int]] = {}
        for i, one in enumerate(taken):
            job = one.job
            # alignments record attention the plain way, which may round differently: requests
            # asking for them are decoded apart, so no one's translation depends on a neighbour;
            # so are those asking for scores (the CTranslate2 engine force-decodes for them)
            # and for another segmenting, format or protection
            alike = (
                astuple(job.search),
                job.alignments,
                job.scores,
                job.segment,
                job.format,
                job.protect,
                id(job.glossary),  # the server's own, or a request's: decoded apart
            )
            key = ("alone", i) if job.search.strategy == "sample" else alike
            groups.setdefault(key, []).append(i)
        for members in groups.values():
            try:
                for i, answer in zip(
                    members, self.decode([taken[i] for i in members]), strict=True
                ):
                    answers[i] = answer
            except SearchError as error:  # the same search for all of them
                for i in members:
                    answers[i] = Refusal(f"search: {error}")
            except Stopped:
                for i in members:
                    answers[i] = self.timed_out()
            except Exception:  # noqa: BLE001 - isolate it: retry its requests one by one
                log.exception("a batch of %d requests failed; retrying each alone", len(members))
                for i in members:
                    try:
                        answers[i] = self.decode([taken[i]])[0]
                    except Stopped:
                        answers[i] = self.timed_out()
                    except Exception as error:  # noqa: BLE001 - this request's own failure
                        log.exception("a request failed")
                        first = str(error).splitlines()[0] if str(error) else ""
                        answers[i] = Failure(f"translation failed: {type(error).__name__} {first}")
        return answers

    def timed_out(self) -> TimedOut:
        return TimedOut(f"request timed out: not translated within timeout={self.cfg.timeout:g} s")

    def decode(self, taken: list[Taken]) -> list[dict]:
        """Requests alike (`predict`) run as one job; its decoding stops between batches once
        every one of them is past its time (or, in-process, gone: `gone`)."""
        first = taken[0].job
        job = replace(
            first,
            texts=[text for t in taken for text in t.job.texts],
            prefixes=None,
        )
        if any(t.job.prefixes for t in taken):
            job.prefixes = [p for t in taken for p in (t.job.prefixes or [""] * len(t.job.texts))]
        last = max(t.deadline for t in taken)

        def stop() -> bool:
            return time.monotonic() > last or all(t.gone() for t in taken)

        plan = check(job, Limits.unbounded())
        found = run(plan, engine_translator(self.engine, job, self.splitter, stop)).translations
        answers, at = [], 0
        for one in taken:
            mine = found[at : at + len(one.job.texts)]
            at += len(one.job.texts)
            answers.append(
                response(one.request, mine, self.model_name, self.engine.name, one.job.search)
            )
        return answers

    def encode_response(self, answer) -> TranslateResponse:
        if isinstance(answer, Failure):
            return JSONResponse({"detail": str(answer)}, status_code=answer.status)
        return answer
