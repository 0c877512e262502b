"""The model's side of every translating route: a LitServe API run by each model worker
(or, on the CTranslate2 server, by the batcher's threads: inprocess.py).

A worker takes `Work` (nmt.serving.dispatch): a checked request's texts, never its body.
LitServe hands `predict` the works that waited together: up to batch_requests, gathered
until batch_wait_ms after the first of them arrived (batching.py). Their texts are decoded
together: works with the same search are one call of the backend's `translate`, which
sorts all their lines by length into batches under max_tokens, so a line's translation does
not depend on who else asked (tests/test_serve.py).
Sampling works are decoded one by one, so a seed gives the same samples however they arrive;
works asking for alignments, scores, another segmenting or format are decoded apart from
the rest. Each text is cut into sentences (or not) as nmt.translation.texts says. Decoding
stops between two batches (and, on torch, every few decoder steps within one) once every
work of the group is past `timeout` since it was taken or its client gone: a 504. A search
that is no search as a whole (the engine's SearchError) is a 422 for the works that asked
for it. If a call fails otherwise, its works are retried in halves (`isolate`): only a work
that fails alone gets a 500, the others their translations, and the model stays loaded.
An answer is the work's Translations, one per text, or a `Failure`.

LitServe reads decode_request's annotation as its endpoint's request type: none here (the
route is ours, nmt.serving.server, and LitServe's own is removed).
"""

import logging
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, replace

import litserve as ls

from nmt.cli import setup_logging
from nmt.config import ModelConfig, ServeConfig
from nmt.decoding.settings import SearchError
from nmt.inference.cache import TranslationCache
from nmt.inference.engine import Stopped
from nmt.inference.loading import load
from nmt.inference.search_choice import choose_search
from nmt.jobs.job import Job, state_bytes_per_token
from nmt.jobs.run import engine_translator
from nmt.serving.batching import FirstArrivalLoop
from nmt.serving.dispatch import Departures, Work
from nmt.serving.metrics import batch_metrics
from nmt.terms import lemmas
from nmt.terms.glossary import LANGS
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.translated import Translation

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
    """Work a worker took: when its decoding must end, and whether its client has gone."""

    work: Work
    job: Job
    deadline: float
    gone: Callable[[], bool] = lambda: False


class TranslationAPI(ls.LitAPI):
    def __init__(
        self,
        cfg: ServeConfig,
        overrides: list[str],
        model_name: str,
        departures: Departures | None = None,
    ):
        """`departures`: where LitServe's workers read that a client has gone (None in the
        HTTP process's own batcher, which sees it directly)."""
        super().__init__(
            max_batch_size=cfg.batch_requests,
            batch_timeout=cfg.batch_wait_ms / 1000,
            api_path="/translate",
            loop=FirstArrivalLoop(),  # predict gets a list, even of one request
        )
        self.cfg, self.overrides, self.model_name = cfg, overrides, model_name
        self.departures = departures

    def setup(self, device: str) -> None:
        """Load the model once; `device` is LitServe's ("cpu", "cuda:0", ...). A worker
        process of LitServe's logs as the server does (stderr, INFO)."""
        setup_logging()
        if self.cfg.device == "auto":
            self.cfg.device = device
        self.engine = load(self.cfg)
        planner = self.engine.planner  # its batches bounded in decoder state too
        planner.max_state_bytes = self.cfg.max_decoder_bytes
        planner.state_bytes_per_token = state_bytes_per_token(ModelConfig(**self.engine.card.shape))
        if self.cfg.cache_sentences:
            self.engine.cache = TranslationCache(self.cfg.cache_sentences, self.cfg.cache_bytes)
        self.splitter = SentenceSplitter(max_words=self.cfg.segment_max_words)
        # the search a request starts from (the door's, nmt.serving.schema): logged, and
        # for library callers that build requests as the server does
        self.search, line = choose_search(self.engine.card, self.cfg.decode, self.overrides)
        self.batches = batch_metrics() if self.cfg.metrics else None
        lemmas.load(LANGS)  # any request may bring a glossary
        log.info("%s on %s; default %s", self.model_name, self.engine.describe(), line)

    def decode_request(self, request) -> Taken:  # no annotation: the module docstring
        """Work as this worker takes it (`request`: a Work, checked by the server's door as
        it came in), with the time its decoding must end by (timeout from now)."""
        job = request.decoded_job(self.cfg.glossary)
        job = replace(job, search=self.engine.runnable(job.search)[0])
        departures = self.departures

        def gone() -> bool:
            return departures is not None and departures.gone(request.slot)

        return Taken(request, job, time.monotonic() + self.cfg.timeout, gone)

    def predict(self, taken: list[Taken]) -> list:
        """One answer (the work's Translations) or Failure per work, in order."""
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
                one.work.alignments,
                one.work.scores,
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
                in_time = time.monotonic() <= max(taken[i].deadline for i in members)
                if in_time and all(taken[i].gone() for i in members):
                    log.info("stopped decoding %d requests: their clients left", len(members))
                for i in members:
                    answers[i] = self.timed_out()
            except Exception:  # noqa: BLE001 - isolate it: retry its requests in halves
                log.exception("a batch of %d requests failed; retrying it in halves", len(members))
                self.isolate(taken, members, answers)  # one alone: decoded once more, alone
        return answers

    def isolate(self, taken: list[Taken], members: list[int], answers: list) -> None:
        """Answers for works whose call failed, decoded again in halves, each half that fails
        halved again: a work that fails alone gets its Failure. One poisoned work among n
        costs about 2 log2(n) more calls, not n, and the others keep being decoded in
        batches."""
        for half in (members[: len(members) // 2], members[len(members) // 2 :]):
            if not half:
                continue
            try:
                for i, answer in zip(half, self.decode([taken[i] for i in half]), strict=True):
                    answers[i] = answer
            except Stopped:
                for i in half:
                    answers[i] = self.timed_out()
            except Exception as error:  # noqa: BLE001 - the poisoned work is in this half
                if len(half) > 1:
                    self.isolate(taken, half, answers)
                    continue
                log.exception("a request failed")
                first = str(error).splitlines()[0] if str(error) else ""
                answers[half[0]] = Failure(f"translation failed: {type(error).__name__} {first}")

    def timed_out(self) -> TimedOut:
        return TimedOut(f"request timed out: not translated within timeout={self.cfg.timeout:g} s")

    def decode(self, taken: list[Taken]) -> list[list[Translation]]:
        """Works alike (`predict`) run as one job; its decoding stops (between batches, and on
        torch within one) once every one of them is past its time or gone (`gone`)."""
        first, work = taken[0].job, taken[0].work
        texts = [text for t in taken for text in t.job.texts]
        prefixes = None
        if any(t.job.prefixes for t in taken):
            prefixes = [p for t in taken for p in (t.job.prefixes or [""] * len(t.job.texts))]
        last = max(t.deadline for t in taken)

        def stop() -> bool:
            return time.monotonic() > last or all(t.gone() for t in taken)

        translate = engine_translator(self.engine, first, self.splitter, stop)
        numbers = list(range(1, len(texts) + 1))
        found = translate(texts, numbers, prefixes, work.alignments, work.scores)
        answers, at = [], 0
        for one in taken:
            answers.append(found[at : at + len(one.job.texts)])
            at += len(one.job.texts)
        return answers

    def encode_response(self, answer):  # no annotation: the answer goes back as it is
        return answer
