"""The model worker's batching loop (nmt/serving/batching.py), driven with a plain queue: what
waits is taken at once, the window runs from the first arrival, the batch stops at its size,
expired requests are set apart, and every request taken is reported to the HTTP process."""

from __future__ import annotations

import queue
import threading
import time
from types import SimpleNamespace

import pytest
from litserve.loops.base import _SENTINEL_VALUE, _StopLoopError
from litserve.utils import LitAPIStatus

from nmt.serving import batching
from nmt.serving.batching import FirstArrivalLoop


class Transport:
    def __init__(self):
        self.sent = []

    def send(self, item, consumer_id):
        self.sent.append((consumer_id, item))


def setup(requests: int, age: float, size: int = 8, wait: float = 0.2, expiry: float = 30):
    """A loop, its transport, an API's batch settings and a queue of requests `age` s old."""
    loop = FirstArrivalLoop()
    loop._restart_workers, loop._worker_id = True, 3
    api = SimpleNamespace(max_batch_size=size, batch_timeout=wait, request_timeout=expiry)
    waiting = queue.Queue()
    for i in range(requests):
        waiting.put((0, f"r{i}", time.monotonic() - age, {"text": f"line {i}"}))
    return loop, Transport(), api, waiting


def test_requests_that_waited_are_taken_at_once_and_reported_taken():
    loop, transport, api, waiting = setup(3, age=1.0, wait=0.8)
    start = time.monotonic()
    payloads, timed_out = loop.get_batch_requests(api, waiting, transport)
    assert time.monotonic() - start < 0.3  # the window ran out while they queued
    assert [uid for _, uid, _ in payloads] == ["r0", "r1", "r2"] and timed_out == []
    assert [(uid, item[1], item[3]) for _, (uid, item) in transport.sent] == [
        (f"r{i}", LitAPIStatus.START, 3) for i in range(3)
    ]


def test_a_lone_fresh_request_waits_the_window_for_company():
    """The window runs from the request's arrival (not from the call, which a busy machine may
    start later), and one that comes 0.1 s later joins the batch."""
    loop, transport, api, waiting = setup(1, age=0.0, wait=0.5)
    arrived = waiting.queue[0][2]
    threading.Timer(0.1, lambda: waiting.put((0, "late", time.monotonic(), {}))).start()
    payloads, _ = loop.get_batch_requests(api, waiting, transport)
    assert 0.49 < time.monotonic() - arrived < 1.5
    assert [uid for _, uid, _ in payloads] == ["r0", "late"]


def test_the_batch_stops_at_its_size():
    loop, transport, api, waiting = setup(3, age=0.0, size=2, wait=5.0)
    payloads, _ = loop.get_batch_requests(api, waiting, transport)
    assert [uid for _, uid, _ in payloads] == ["r0", "r1"] and waiting.qsize() == 1


def test_expired_requests_are_set_apart():
    loop, transport, api, waiting = setup(2, age=60.0, expiry=30)
    payloads, timed_out = loop.get_batch_requests(api, waiting, transport)
    assert payloads == [] and timed_out == [(0, "r0"), (0, "r1")]


def test_an_idle_worker_blocks_then_comes_back_empty_and_stops_on_the_sentinel(monkeypatch):
    monkeypatch.setattr(batching, "IDLE_SECONDS", 0.05)
    loop, transport, api, waiting = setup(0, age=0.0)
    assert loop.get_batch_requests(api, waiting, transport) == ([], [])
    waiting.put(_SENTINEL_VALUE)
    with pytest.raises(_StopLoopError):
        loop.get_batch_requests(api, waiting, transport)


# --- the in-process batcher of the CTranslate2 server (nmt/serving/inprocess.py) ---


def batcher_run(predict, arrivals, workers=1, size=8, wait=0.2, timeout=30.0):
    """Post payloads at their arrival times (s) to a Batcher over `predict`; its answers."""
    import asyncio

    from nmt.serving.inprocess import Batcher

    async def main():
        batcher = Batcher(predict, workers, size, wait, timeout, lambda: "504")
        task = asyncio.create_task(batcher.run())

        async def post(payload, at):
            await asyncio.sleep(at)
            return await batcher.answer(payload)

        answers = await asyncio.gather(*(post(p, at) for p, at in arrivals))
        task.cancel()
        batcher.pool.shutdown()
        return answers

    return asyncio.run(main())


def test_the_batcher_answers_each_request_its_own_and_batches_those_that_wait_together():
    batches = []

    def predict(payloads):
        batches.append(list(payloads))
        return [p.upper() for p in payloads]

    arrivals = [("a", 0.0), ("b", 0.05), ("c", 0.1), ("d", 0.6)]
    answers = batcher_run(predict, arrivals, size=8, wait=0.3)
    assert answers == ["A", "B", "C", "D"]
    assert batches == [["a", "b", "c"], ["d"]]  # d came after a's window closed


def test_the_batcher_stops_a_batch_at_its_size_and_keeps_workers_batches_in_flight():
    running, most = [0], [0]
    lock = threading.Lock()

    def predict(payloads):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return [len(payloads)] * len(payloads)

    answers = batcher_run(predict, [(str(i), 0.0) for i in range(6)], workers=2, size=2)
    assert answers == [2] * 6 and most[0] == 2


def test_a_request_not_taken_within_the_timeout_gets_the_timeout_answer_undecoded():
    decoded = []

    def predict(payloads):
        decoded.extend(payloads)
        time.sleep(0.5)  # the only worker is busy past the others' timeout
        return ["ok"] * len(payloads)

    arrivals = [("hog", 0.0), ("late1", 0.1), ("late2", 0.1)]
    answers = batcher_run(predict, arrivals, size=1, wait=0.01, timeout=0.3)
    assert answers == ["ok", "504", "504"] and decoded == ["hog"]
