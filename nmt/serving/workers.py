"""The model workers: which are up, what /health says of them, and the requests of one that dies.

LitServe 0.2.19 (restart_workers=True) starts a new model worker when one dies, but the
requests the dead one had taken wait forever: its monitor fails them in the main process's
buffer, while they wait in the HTTP process's. And /health says "ok" until that monitor,
every 2 s, notices the death, then 503 "not ready" until the new worker has loaded the model.

Here each model worker writes its pid into memory shared by the server's processes once its
model is loaded. The HTTP process looks every WATCH_SECONDS at the requests a worker has
taken and answers those whose worker is gone with a one-line 503 (the next try goes to a live
worker); /health is 503 naming how many workers are up until all of them are again.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
from contextlib import asynccontextmanager

import litserve as ls
from fastapi import HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from litserve.callbacks import Callback
from litserve.utils import LitAPIStatus

log = logging.getLogger("nmt.serve")

WATCH_SECONDS = 0.5  # a dead worker's requests wait at most this long (on Linux) for their 503


class ModelWorkers(Callback):
    """The pid of each model worker once its model is loaded (0 before), by LitServe's worker
    id: LitServe hands this callback to every worker it starts, restarted ones included."""

    def __init__(self, count: int):
        self.pids = multiprocessing.get_context("spawn").RawArray("i", count)

    def on_after_setup(self, *args, **kwargs) -> None:
        """Run in the worker, whose id LitServe has put in its environment."""
        self.pids[int(os.environ["LITSERVE_WORKER_ID"])] = os.getpid()

    def up(self) -> int:
        return sum(1 for pid in self.pids if pid and alive(pid))


def alive(pid: int) -> bool:
    """Whether process `pid` runs; a killed worker stays a zombie until LitServe's monitor
    reaps it (up to 2 s later), so /proc's state is read where there is one."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except ProcessLookupError:
        return False
    except OSError:  # no /proc here, or the worker runs as another user
        return True


def monitor_stops_first(server: ls.LitServer) -> None:
    """LitServe's shutdown after Ctrl+C or SIGTERM leaves its worker monitor running: the
    monitor polls the shutdown event (a proxy to the multiprocessing manager) every 2 s, and
    the shutdown terminates the workers, then the manager, without setting it. A poll after
    the manager is gone logged a traceback in a clean stop's log; one between the workers'
    ends could start them again. The monitor reads the event from the server at every poll,
    so a set event of this process put in its place first ends it at its next one."""
    shut_down = server._perform_graceful_shutdown

    def stop_the_monitor_then_shut_down(*args, **kwargs):
        stopped = threading.Event()
        stopped.set()
        server._shutdown_event = stopped
        return shut_down(*args, **kwargs)

    server._perform_graceful_shutdown = stop_the_monitor_then_shut_down


def watch_workers(server: ls.LitServer, workers: ModelWorkers) -> None:
    """Answer the requests of dead workers in each HTTP process while it runs, and put the
    workers' count in front of LitServe's /health."""
    litserve_lifespan = server.app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app):
        task = asyncio.create_task(answer_orphans(server.response_buffer, workers))
        try:
            async with litserve_lifespan(app) as state:
                yield state
        finally:
            task.cancel()

    server.app.router.lifespan_context = lifespan
    routes = server.app.router.routes
    path = server.healthcheck_path
    litserve_health = next(r for r in routes if getattr(r, "path", None) == path)
    routes.remove(litserve_health)

    @server.app.get(path, dependencies=litserve_health.dependencies)
    async def health(request: Request) -> Response:
        up, count = workers.up(), len(workers.pids)
        if up < count:
            return PlainTextResponse(f"not ready: {up} of {count} model workers up", 503)
        return await litserve_health.endpoint(request)


async def answer_orphans(buffer: dict, workers: ModelWorkers) -> None:
    """Every WATCH_SECONDS, answer 503 to each waiting request whose worker has died.

    `buffer` is LitServe's {request id: ResponseBufferItem} of this HTTP process; an item's
    worker_id is set once a worker has taken the request. The pid is read when the request is
    first seen taken: a restarted worker writes its own pid seconds later, after its setup."""
    taken: dict[str, int] = {}  # request id -> pid of the worker that took it
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        waiting = {
            uid: item
            for uid, item in buffer.items()
            if item.worker_id is not None and not item.event.is_set()
        }
        taken = {uid: taken.get(uid) or workers.pids[i.worker_id] for uid, i in waiting.items()}
        dead = {pid for pid in set(taken.values()) if not alive(pid)}
        for uid, item in waiting.items():
            if taken[uid] in dead:
                log.warning("model worker pid %d died translating request %s", taken[uid], uid)
                message = "the model worker translating this request died; try again"
                item.response = (HTTPException(503, message), LitAPIStatus.ERROR)
                item.event.set()
