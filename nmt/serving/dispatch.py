"""How a checked request reaches the model: the one path of every translating route.

The door (door.py) has read the body once and checked it into a `Plan` (nmt.jobs.check).
`Dispatch.run` runs that plan: its segments go to the model's workers as `Work`s of at most
max_lines texts (a file's segments as several, all at once) and come back as Translations;
a document is then rendered in a thread of this process, where it was parsed. Nothing is
parsed or checked again, and no route calls another over HTTP.

Who decodes a Work is the server's `Submit`: the CTranslate2 server's batcher in this
process (inprocess.py), or LitServe's model worker processes through LitServe's own request
queue (`LitServeSubmit`). Either way a client that goes away reaches its decoding: its `gone`
future is done once it has left; the batcher's threads read the future, a LitServe worker
the request's place on a `Departures` board in shared memory. The decoding stops between
two of its batches, and on torch within one (nmt.serving.api).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from fastapi import HTTPException
from litserve.utils import LitAPIStatus, ResponseBufferItem
from starlette.concurrency import run_in_threadpool

from nmt.errors import JobError
from nmt.jobs.check import Plan
from nmt.jobs.job import Job
from nmt.jobs.run import Result, finished, wanted
from nmt.terms.glossary import Layered, read_glossary
from nmt.translation.translated import Translation

SLOTS = 4096  # requests in flight whose client's departure a LitServe worker can see


@dataclass
class Work:
    """One request's texts for a model worker: `job`, its texts a plan's segments (or some of
    them); what to give back with each translation (`alignments`, `scores`); `server_glossary`:
    None, or the exactness of the server's own glossary, which each worker holds, under the
    job's (a request's own, or none: the server's is never sent); `slot`: its client's place
    on the departure board (-1: none)."""

    job: Job
    alignments: bool
    scores: bool
    server_glossary: bool | None = None
    slot: int = -1

    def decoded_job(self, glossary_path: str | None) -> Job:
        """The job as a worker decodes it, with the server's glossary where it is that (and
        the request's own, if any, over it)."""
        if self.server_glossary is None:
            return self.job
        server = read_glossary(glossary_path, self.server_glossary)
        return replace(self.job, glossary=server.under(self.job.glossary))


# (work, the client's departure: a future done once it has gone, or None) -> translations,
# one per text; JobError with the status of a refusal
Submit = Callable[[Work, asyncio.Future | None], Awaitable[list[Translation]]]


def works(plan: Plan, max_lines: int, glossary_path: str | None) -> list[Work]:
    """The plan's segments as Works of at most max_lines texts each (none for no text)."""
    texts, prefixes, alignments, scores = wanted(plan)
    job, shared, own = plan.job, None, plan.job.glossary
    if glossary_path and own is not None:
        server = read_glossary(glossary_path, own.exact)
        if own is server or (isinstance(own, Layered) and own.base is server):
            shared, own = own.exact, own.own if isinstance(own, Layered) else None
    found = []
    for at in range(0, len(texts), max_lines):
        chunk = replace(
            job,
            texts=texts[at : at + max_lines],
            data=None,
            prefixes=prefixes[at : at + max_lines] if prefixes else None,
            glossary=own,
        )
        found.append(Work(chunk, alignments, scores, shared))
    return found


@dataclass
class Dispatch:
    """A server's way to run checked plans: its `submit`, and the texts a Work holds."""

    submit: Submit
    max_lines: int
    glossary_path: str | None = None  # the server's glossary (a Work never carries it)

    async def run(self, plan: Plan, receive=None) -> Result:
        """The plan run by the server's workers: its Result, as nmt.jobs.run gives it.
        `receive`: the ASGI receive of the request's client (its body read), whose
        departure stops the decoding."""
        gone = asyncio.ensure_future(client_left(receive)) if receive is not None else None
        try:
            answers = await asyncio.gather(
                *(self.submit(w, gone) for w in works(plan, self.max_lines, self.glossary_path))
            )
        finally:
            if gone is not None:
                gone.cancel()
        found = [t for answer in answers for t in answer]
        if plan.parsed is None:
            return finished(plan, found)
        return await run_in_threadpool(finished, plan, found)


async def client_left(receive) -> None:
    """Return once the client has gone (its body is read: what comes next is the disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class Departures:
    """One byte per slot in memory that LitServe's processes share, set once its client has
    gone; the HTTP process hands the slots out (`take`, `release`)."""

    def __init__(self, slots: int = SLOTS):
        self.flags = multiprocessing.get_context("spawn").RawArray("b", slots)
        self.free = list(range(slots))

    def take(self) -> int:
        if not self.free:
            return -1
        slot = self.free.pop()
        self.flags[slot] = 0
        return slot

    def release(self, slot: int) -> None:
        if slot >= 0:
            self.free.append(slot)

    def leave(self, slot: int) -> None:
        if slot >= 0:
            self.flags[slot] = 1

    def gone(self, slot: int) -> bool:
        return slot >= 0 and self.flags[slot] == 1


class LitServeSubmit:
    """Submit to LitServe's model workers: the work put on LitServe's request queue of
    `api_path` as its own endpoint would put a body, its answer awaited in LitServe's
    response buffer (which nmt.serving.workers watches for workers that die)."""

    def __init__(self, server, api_path: str, departures: Departures):
        self.server, self.api_path, self.departures = server, api_path, departures

    async def __call__(self, work: Work, gone: asyncio.Future | None) -> list[Translation]:
        slot = self.departures.take() if gone is not None else -1
        uid, event = str(uuid.uuid4()), asyncio.Event()
        buffer = self.server.response_buffer
        buffer[uid] = ResponseBufferItem(event=event)
        queue = self.server._get_request_queue(self.api_path)
        queue.put(
            (self.server.app.response_queue_id, uid, time.monotonic(), replace(work, slot=slot))
        )

        def left(_) -> None:  # told to the worker as soon as the client has gone
            if not event.is_set():
                self.departures.leave(slot)

        if gone is not None:
            gone.add_done_callback(left)
        try:
            await event.wait()
            answer, status = buffer[uid].response
        finally:
            if gone is not None:
                gone.remove_done_callback(left)
            buffer.pop(uid, None)
            self.departures.release(slot)
        if status == LitAPIStatus.ERROR:
            raise refusal(answer)
        return answered_texts(answer)


def answered_texts(answer) -> list[Translation]:
    """A worker's answer (nmt.serving.api): its translations, or JobError for its Failure."""
    if isinstance(answer, list):
        return answer
    raise JobError(getattr(answer, "status", 500), str(answer))


def refusal(error) -> JobError:
    """LitServe's error answer (an HTTPException, pickled or not: a request that waited past
    the timeout, a worker that died) as a JobError."""
    if isinstance(error, bytes):
        try:
            error = pickle.loads(error)
        except Exception:  # noqa: BLE001 - whatever it was, it is a failure
            error = None
    if isinstance(error, HTTPException):
        return JobError(error.status_code, str(error.detail))
    return JobError(500, "translation failed")
