"""`nmt.serve backend=ctranslate2`: one process, FastAPI and uvicorn, an in-process batcher.

CTranslate2 decodes in its own threads and lets go of the GIL while it does, so it needs no
worker processes; under LitServe a third of a model worker's time went into passing requests
and answers through multiprocessing queues (docs/benchmarks.md). Here the routes put
each request's work on an asyncio queue and a Batcher hands batches to `workers` threads, each
running the same `TranslationAPI.predict` as LitServe's workers (so the answers are the
same). One CTranslate2 Translator decodes them, with workers x threads single-threaded
workers of its own on the CPU (one request's batches can then use more than one; a
Translator with several threads per batch was 17x slower on batches of one line here).

The batching rule is batching.py's: a free worker takes the first waiting request and every
request that joins it until `batch_wait_ms` after its arrival, up to `batch_requests`. A
request that waited longer than `timeout` before a worker took it is answered 504.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from nmt.serving.api import TimedOut
from nmt.serving.dispatch import Work, answered_texts
from nmt.translation.translated import Translation

log = logging.getLogger("nmt.serve")


@dataclass
class Waiting:
    payload: object  # what predict takes for one request
    future: asyncio.Future
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """Requests in, batches of them to `predict` on `workers` threads, answers out."""

    def __init__(
        self,
        predict: Callable,
        workers: int,
        batch_requests: int,
        wait_s: float,
        timeout_s: float,
        timed_out: Callable[[], object],
    ):
        self.predict, self.workers = predict, workers
        self.batch_requests, self.wait_s, self.timeout_s = batch_requests, wait_s, timeout_s
        self.timed_out = timed_out  # the answer of a request that waited too long
        self.queue: asyncio.Queue[Waiting] = asyncio.Queue()
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="nmt-worker")

    async def answer(self, payload) -> object:
        job = Waiting(payload, asyncio.get_running_loop().create_future())
        await self.queue.put(job)
        return await job.future

    async def run(self) -> None:
        """Forever: wait for a free worker, gather a batch, start it, look for the next."""
        free = asyncio.Semaphore(self.workers)
        while True:
            await free.acquire()
            batch = await self.gather()
            asyncio.get_running_loop().create_task(self.decode(batch, free))

    async def gather(self) -> list[Waiting]:
        batch: list[Waiting] = []
        while not batch:  # the first request still in time
            batch = self.in_time([await self.queue.get()])
        deadline = batch[0].arrived + self.wait_s
        while len(batch) < self.batch_requests:
            if self.queue.empty():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch += self.in_time([await asyncio.wait_for(self.queue.get(), left)])
                except TimeoutError:
                    break
            else:
                batch += self.in_time([self.queue.get_nowait()])
        return batch

    def in_time(self, jobs: list[Waiting]) -> list[Waiting]:
        """The jobs still worth decoding; the others answered (504) or dropped (gone)."""
        now, kept = time.monotonic(), []
        for job in jobs:
            if job.future.done():  # its client's handler was cancelled
                continue
            if now - job.arrived > self.timeout_s:
                job.future.set_result(self.timed_out())
            else:
                kept.append(job)
        return kept

    async def decode(self, batch: list[Waiting], free: asyncio.Semaphore) -> None:
        try:
            payloads = [job.payload for job in batch]
            loop = asyncio.get_running_loop()
            answers = await loop.run_in_executor(self.pool, self.predict, payloads)
            for job, answer in zip(batch, answers, strict=True):
                if not job.future.done():
                    job.future.set_result(answer)
        except Exception as error:  # noqa: BLE001 - predict answers its own failures: a bug
            log.exception("a batch failed outside predict")
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(error)
        finally:
            free.release()


class InProcessServer:
    """The FastAPI app (`app`, for build_server to add the page and the gate) and its run."""

    def __init__(
        self,
        api,
        workers: int,
        batch_requests: int,
        wait_s: float,
        timeout_s: float,
        metadata: dict,
    ):
        self.api = api
        self.batcher = Batcher(
            api.predict,
            workers,
            batch_requests,
            wait_s,
            timeout_s,
            lambda: TimedOut(f"request timed out: not taken within timeout={timeout_s:g} s"),
        )

        @asynccontextmanager
        async def lifespan(app: FastAPI):
            task = asyncio.create_task(self.batcher.run())
            yield
            task.cancel()
            self.batcher.pool.shutdown(wait=False, cancel_futures=True)

        self.app = app = FastAPI(lifespan=lifespan)

        @app.get("/health", response_class=PlainTextResponse)
        async def health() -> str:
            return "ok"  # the model is loaded before the port opens

        @app.get("/info")
        async def info() -> dict:
            return {"model": metadata, "server": {"in_process": True, "workers": workers}}

    async def submit(self, work: Work, gone: asyncio.Future | None) -> list[Translation]:
        """Work queued to the batcher (nmt.serving.dispatch's Submit); its threads see the
        client leave through `gone`."""
        taken = self.api.decode_request(work)
        if gone is not None:
            taken.gone = gone.done
        return answered_texts(await self.batcher.answer(taken))

    def run(
        self, host: str, port: int, log_level: str, drain_seconds: float, connections: dict
    ) -> None:
        """Load the model (the port opens once it is loaded), then serve until stopped; on
        SIGTERM or SIGINT, uvicorn lets the requests in flight finish for `drain_seconds`."""
        self.api.setup("auto")
        with suppress(KeyboardInterrupt):  # uvicorn raises the signal again once drained
            uvicorn.run(
                self.app,
                host=host,
                port=port,
                log_level=log_level,
                timeout_graceful_shutdown=drain_seconds,
                **connections,  # nmt.serving.server.uvicorn_settings
            )
