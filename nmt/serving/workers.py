"""The model workers: which are up, what /health says of them, and the requests of one that dies.

LitServe 0.2.19 (restart_workers=True) starts a new model worker when one dies, but the
requests the dead one had taken wait forever: its monitor fails them in the main process's
buffer, while they wait in the HTTP process's. And /health says "ok" until that monitor,
every 2 s, notices the death, then 503 "not ready" until the new worker has loaded the model.

Here each model worker writes its pid into memory shared by the server's processes once its
model is loaded. The HTTP process looks every WATCH_SECONDS at the requests a worker has
taken and answers those whose worker is gone with a one-line 503 (the next try goes to a live
worker); /health is 503 naming how many workers are up until all of them are again.

LitServe starts every model worker with multiprocessing's "spawn": a fresh interpreter that
imports torch and our modules again (~2.5 CPU-s each, before the model loads). On the CPU they
are forked from the server instead (`start_workers_by`), which has imported them already.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import multiprocessing
import os
import sys
import threading
from contextlib import asynccontextmanager

import litserve as ls
import litserve.server
from fastapi import HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from litserve.callbacks import Callback
from litserve.utils import LitAPIStatus

from nmt.errors import UsageError

log = logging.getLogger("nmt.serve")

PR_SET_NAME = 15  # prctl's option (linux/prctl.h)
WATCH_SECONDS = 0.5  # a dead worker's requests wait at most this long (on Linux) for their 503


class ModelWorkers(Callback):
    """The pid of each model worker once its model is loaded (0 before), by LitServe's worker
    id: LitServe hands this callback to every worker it starts, restarted ones included."""

    def __init__(self, count: int):
        self.pids = multiprocessing.get_context("spawn").RawArray("i", count)

    def on_after_setup(self, *args, **kwargs) -> None:
        """Run in the worker, whose id LitServe has put in its environment; `ps` and `top`
        then show it as nmt-worker-ID (a forked worker's command line is the server's)."""
        worker = int(os.environ["LITSERVE_WORKER_ID"])
        name_process(f"nmt-worker-{worker}")
        self.pids[worker] = os.getpid()

    def up(self) -> int:
        return sum(1 for pid in self.pids if pid and alive(pid))


def name_process(name: str) -> None:
    """Set this process's name (Linux's comm, at most 15 bytes, which ps, top and psutil's
    name() show); elsewhere nothing."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


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


WORKER_STARTS = ("auto", "fork", "spawn")  # ServeConfig.worker_start


def worker_start(setting: str, gpu: bool) -> str:
    """The start method `setting` (one of WORKER_STARTS) means for a server on a GPU or not:
    auto forks on the CPU where the platform can, and spawns on a GPU (CUDA, once the server
    has asked torch for the GPU, does not work in a fork)."""
    if setting not in WORKER_STARTS:
        raise UsageError(f"worker_start must be one of {', '.join(WORKER_STARTS)}, not {setting!r}")
    if setting == "fork" and gpu:
        raise UsageError("worker_start=fork cannot serve on a GPU (CUDA does not survive a fork)")
    if setting == "auto":
        fork = not gpu and "fork" in multiprocessing.get_all_start_methods()
        return "fork" if fork else "spawn"
    return setting


def start_workers_by(server: ls.LitServer, method: str) -> None:
    """Make `server` start its model workers, the first ones and those it restarts, with
    multiprocessing's `method` in place of LitServe's "spawn". LitServe (0.2.19) takes that
    context from its module's `multiprocessing` at each start; while this server starts a
    worker, the name answers `method` for "spawn" and is itself for all else. A LitServe
    without these names or that one spawns as before (test_serve_faults would say so)."""
    if method == "spawn":
        return
    for name in ("launch_inference_worker", "launch_single_inference_worker"):
        if launch := getattr(server, name, None):
            setattr(server, name, started_by(launch, method))


class _Multiprocessing:
    """The multiprocessing module, but for the "spawn" context, which is `method`'s."""

    def __init__(self, method: str):
        self.method = method

    def get_context(self, method: str | None = None):
        return multiprocessing.get_context(self.method if method == "spawn" else method)

    def __getattr__(self, name: str):
        return getattr(multiprocessing, name)


_STARTING = threading.Lock()  # one start at a time swaps LitServe's name


def started_by(launch, method: str):
    """`launch` (a LitServer's bound launch method) starting its worker by `method`."""

    @functools.wraps(launch)
    def start(*args, **kwargs):
        with _STARTING:
            found, litserve.server.mp = litserve.server.mp, _Multiprocessing(method)
            try:
                return launch(*args, **kwargs)
            finally:
                litserve.server.mp = found

    return start


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
