"""How a model worker gathers waiting requests into one batch: timed from the first arrival.

LitServe 0.2.19's BatchedLoop opens its `batch_wait_ms` window when the worker starts looking
and closes it only at `batch_requests` requests or the window's end, asking its queue every
millisecond meanwhile: a worker that finishes a batch while fewer than `batch_requests`
requests wait still idles out the whole window, and an idle worker keeps asking. With a
fast engine that idle window, not the decoding, bounded what the server answered.

FirstArrivalLoop blocks (no polling) until a request is there, takes every request already
waiting, and waits for more only until `batch_wait_ms` after the first of them arrived (the
HTTP process stamps each request as it queues it). Requests that queued while the worker was
busy go into the next batch at once; a lone request on an idle server waits at most the
window for company, as before.
"""

from __future__ import annotations

import time
from queue import Empty

from litserve.loops import BatchedLoop
from litserve.loops.base import _SENTINEL_VALUE, _StopLoopError
from litserve.utils import LitAPIStatus, LoopResponseType

IDLE_SECONDS = 1.0  # how long one blocking wait on an empty queue lasts before it is renewed


class FirstArrivalLoop(BatchedLoop):
    def get_batch_requests(self, lit_api, request_queue, transport) -> tuple[list, list]:
        """(payloads to decode, timed-out requests): LitAPI's contract for a batch."""
        try:
            item = request_queue.get(timeout=IDLE_SECONDS)
        except Empty:
            return [], []
        payloads, timed_out = [], []
        deadline = None
        expires = lit_api.request_timeout not in (-1, False)
        while True:
            if item == _SENTINEL_VALUE:  # the server is stopping
                raise _StopLoopError()
            queue_id, uid, queued_at, payload = item
            # tells the HTTP process which worker holds the request (nmt.serving.workers)
            self.put_response(
                transport, queue_id, uid, (), LitAPIStatus.START, LoopResponseType.REGULAR
            )
            if expires and time.monotonic() - queued_at > lit_api.request_timeout:
                timed_out.append((queue_id, uid))
            else:
                payloads.append((queue_id, uid, payload))
            if deadline is None:
                deadline = queued_at + lit_api.batch_timeout
            if len(payloads) + len(timed_out) >= lit_api.max_batch_size:
                return payloads, timed_out
            try:
                item = request_queue.get_nowait()
            except Empty:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return payloads, timed_out
                try:
                    item = request_queue.get(timeout=remaining)
                except Empty:
                    return payloads, timed_out
