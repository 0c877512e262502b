"""nmt.serve under faults: a model worker killed mid-batch, a body far over the limit.

One server (two model workers, a request each at a time) is started for the module and
stopped at its end; every request has a timeout.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest
import torch
from conftest import Command, http_get, http_post, server_process, zygote_serve
from test_serve import post, serving

from nmt.serving.launch import started

pytestmark = [
    pytest.mark.xdist_group("serve"),  # with test_serve's servers: one set at a time
    pytest.mark.skipif(sys.platform != "linux", reason="Linux process groups and /proc"),
]


@pytest.fixture(scope="module")
def server(model_pt: Path) -> Iterator[str]:
    # a cold start (launch's `started`), as a user's: the other servers fork from the zygote
    with serving(model_pt, "workers=2", "batch_requests=1", "timeout=20", start=started) as url:
        yield url


@pytest.fixture(scope="module")
def lines(overfit_pairs) -> list[str]:
    return overfit_pairs[0][:12]


def model_workers(url: str) -> list[int]:
    """The pids of the model workers of the server at `url`, which this process started:
    they name themselves nmt-worker-ID once their model is loaded."""
    return workers_of(server_process(url))


def workers_of(main: psutil.Process) -> list[int]:
    """The pids of the server `main`'s model workers."""
    return sorted(p.pid for p in main.children() if p.name().startswith("nmt-worker-"))


# what worker_start=auto picks for these servers (device=auto): fork, unless torch sees a GPU
AUTO_START = "spawn" if torch.cuda.is_available() else "fork"


def started_by(main: psutil.Process, worker: int) -> str:
    """How model worker `worker` of the server `main` started: "fork" (its command line is
    the server's) or "spawn" (multiprocessing's spawn_main runs it)."""
    line = psutil.Process(worker).cmdline()
    return (
        "fork" if line == main.cmdline() else "spawn" if "--multiprocessing-fork" in line else "?"
    )


def watch_health(url: str, stop: threading.Event, seen: list) -> None:
    """Append (status, text) for each change of /health, every 0.1 s until `stop`."""
    while not stop.is_set():
        try:
            reply = http_get(url + "/health", timeout=2)
            now = (reply.status_code, reply.text)
        except httpx.HTTPError as error:
            now = (None, type(error).__name__)
        if not seen or seen[-1] != now:
            seen.append(now)
        stop.wait(0.1)


def test_a_killed_worker_fails_its_request_in_one_line_and_comes_back(server, lines):
    """SIGKILL a worker mid-batch: its request gets a one-line 503 within seconds (LitServe
    alone lets it wait forever), the other worker's and later requests are answered, /health
    says 503 while the worker is gone and "ok" once it is back."""
    workers = model_workers(server)
    assert len(workers) == 2
    main = server_process(server)
    assert [started_by(main, pid) for pid in workers] == [AUTO_START] * 2
    slow = {"text": lines * 4, "search": {"min_len": 150, "max_len_b": 150}}
    stop, seen = threading.Event(), []
    health = threading.Thread(target=watch_health, args=(server, stop, seen))
    health.start()
    try:
        with ThreadPoolExecutor(6) as pool:
            busy = [pool.submit(post, server, slow, 30) for _ in workers]
            done: dict[int, float] = {}
            for i, future in enumerate(busy):
                future.add_done_callback(lambda _, i=i: done.setdefault(i, time.monotonic()))
            time.sleep(1.5)  # each worker is decoding one of them
            assert not done
            os.kill(workers[0], signal.SIGKILL)
            killed = time.monotonic()
            quick = [pool.submit(post, server, {"text": line}, 30) for line in lines[:3]]
            replies = [f.result() for f in busy]
            assert [f.result().status_code for f in quick] == [200, 200, 200]
        assert sorted(r.status_code for r in replies) == [200, 503]
        failed = next(i for i, r in enumerate(replies) if r.status_code == 503)
        assert done[failed] - killed < 3  # answered, not left to wait
        detail = replies[failed].json()["detail"]
        assert "model worker" in detail and "\n" not in detail
        deadline = time.monotonic() + 30
        while seen[-1] != (200, "ok") or (503, "not ready: 1 of 2 model workers up") not in seen:
            assert time.monotonic() < deadline, seen
            time.sleep(0.2)
    finally:
        stop.set()
        health.join()
    assert seen[0] == (200, "ok") and None not in (status for status, _ in seen), seen
    restarted = model_workers(server)
    assert len(restarted) == 2 and workers[0] not in restarted and workers[1] in restarted
    assert [started_by(main, pid) for pid in restarted] == [AUTO_START] * 2
    with ThreadPoolExecutor(4) as pool:
        again = list(pool.map(lambda line: post(server, {"text": line}, 30), lines[:4]))
    assert [r.status_code for r in again] == [200] * 4


BIG = json.dumps({"text": "a " * (5 << 20)}).encode()  # 10 MB, ten times max_body_bytes


def urllib_post(url: str) -> tuple[int, bytes]:
    """With a Content-Length: refused from the headers, before any of the body is read."""
    request = urllib.request.Request(
        url + "/translate", data=BIG, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def chunked_post(url: str) -> tuple[int, bytes]:
    """Chunked, with no length: refused once the body read so far passes the limit."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        chunks = (BIG[i : i + (1 << 16)] for i in range(0, len(BIG), 1 << 16))
        connection.request("POST", "/translate", body=chunks, encode_chunked=True)
        reply = connection.getresponse()
        return reply.status, reply.read()
    finally:
        connection.close()


@pytest.mark.parametrize("send", [urllib_post, chunked_post])
def test_a_body_far_over_the_limit_gets_its_413_not_a_reset(server, lines, send):
    status, body = send(server)
    assert status == 413, body
    assert json.loads(body) == {"detail": "the body exceeds max_body_bytes=1000000"}
    assert post(server, {"text": lines[0]}, 30).status_code == 200


@contextmanager
def own_server(args: list[str], log: Path) -> Iterator[tuple[Command, int]]:
    """`python -m nmt.serve args` on a free port, forked from the zygote in a session (and
    so a process group) of its own, its output in `log`; yields the main process (signals go
    to it alone) and the port once /health says ok; the group is killed at the end,
    whatever the test did."""
    from nmt.serving.launch import free_port, healthy

    port = free_port()
    with open(log, "wb") as output:
        process = zygote_serve([*args, f"port={port}"], None, output)
    try:
        deadline = time.monotonic() + 120
        while not healthy(f"http://127.0.0.1:{port}"):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield process, port
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def assert_stopped_whole(process, port: int, log: Path) -> None:
    """A clean exit of the main process, no process of its group left, the port free."""
    assert process.wait(timeout=90) == 0, log.read_text()[-2000:]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # every process of its group gone
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("workers outlived the server")
    with socket.socket() as s:  # and a new server can listen on the port, as uvicorn does
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (past TIME_WAIT only)
        s.bind(("127.0.0.1", port))
        s.listen()
    assert "Traceback" not in log.read_text()


def assert_idles(process, port: int) -> None:
    """After a request, none for 3 s: all the server's processes together use under 2% of a
    core (LitServe's own batching loop polled every millisecond; ours blocks)."""
    http_post(f"http://127.0.0.1:{port}/translate", json={"text": "A man."}, timeout=60)
    time.sleep(1)
    tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(True)]
    before, start = [sum(p.cpu_times()[:2]) for p in tree], time.monotonic()
    time.sleep(3)
    used = sum(sum(p.cpu_times()[:2]) for p in tree) - sum(before)
    assert used / (time.monotonic() - start) < 0.02, f"{used:.2f} s of CPU in 3 s idle"


def wait_in_flight(url: str) -> None:
    """Until the server's /metrics counts a /translate request in flight (10 s at most)."""
    deadline = time.monotonic() + 10
    while 'nmt_requests_in_flight{route="/translate"} 1.0' not in http_get(url + "/metrics").text:
        assert time.monotonic() < deadline, "the request never got in flight"
        time.sleep(0.02)


DRAINS = [  # backend, signal, drain_seconds, worker_start
    ("torch", signal.SIGTERM, 60, "auto"),
    # either signal on either server: one handler (serve.py)
    ("ctranslate2", signal.SIGINT, 60, "auto"),
    ("torch", signal.SIGTERM, 1, "spawn"),  # a GPU server's workers, started as on a GPU
]


@pytest.mark.parametrize(
    "backend,sig,drain,start", DRAINS, ids=[f"{b}-{s.name}-{d}s-{w}" for b, s, d, w in DRAINS]
)
def test_a_signal_lets_the_request_in_flight_finish_then_stops_every_process(
    backend, sig, drain, start, request, model_pt, multi30k_dir, tmp_path
):
    """First, with drain_seconds=60, the server idles (assert_idles). Then SIGTERM or SIGINT to
    the main process alone (what `kill`, systemd and `docker stop` send; LitServe's HTTP and
    model workers used to outlive it, holding the port) once /metrics counts a long request
    in flight (~3 s of decoding):
    with drain_seconds=60 that request still gets its whole answer (it ends after the
    signal); with drain_seconds=1 it is cut at once. Then every process ends, the port is free
    and the exit is clean."""
    ckpt = model_pt if backend == "torch" else request.getfixturevalue("ct2_int8")
    val = (multi30k_dir / "val.en").read_text(encoding="utf-8").splitlines()
    # CTranslate2 decodes this several times faster: its 128 lines hold three sentences each,
    # so its request still decodes for seconds after the signal (256 lines of one sentence
    # took ~1.5 s on a Zen 5 EPYC); torch's 64 lines of one decode for ~3 s on a Xeon
    per_line, count = (3, 128) if backend == "ctranslate2" else (1, 64)
    lines = [" ".join(val[i : i + per_line]) for i in range(0, count * per_line, per_line)]
    args = [f"ckpt={ckpt}", f"backend={backend}", "workers=1", "threads=1", "metrics=true"]
    args += ["cache_sentences=0", f"drain_seconds={drain}", "timeout=120", f"worker_start={start}"]
    log = tmp_path / "serve.log"
    with own_server(args, log) as (process, port):
        if backend == "torch":
            main = psutil.Process(process.pid)
            started = [started_by(main, pid) for pid in workers_of(main)]
            assert started == [start.replace("auto", AUTO_START)]
        if drain == 60:
            assert_idles(process, port)
        url = f"http://127.0.0.1:{port}"
        answered = {}

        def ask():
            search = {"strategy": "beam", "beam_size": 8, "min_len": 50, "max_len_b": 70}
            body = {"text": lines, "search": search}  # 64+ x 8 hypotheses of 50+ tokens
            try:
                answered["response"] = http_post(url + "/translate", json=body, timeout=120)
            except httpx.HTTPError as error:
                answered["response"] = error
            answered["at"] = time.monotonic()

        asking = threading.Thread(target=ask)
        asking.start()
        wait_in_flight(url)
        signalled = time.monotonic()
        os.kill(process.pid, sig)
        asking.join(timeout=120)
        response = answered["response"]
        if drain == 1:
            assert isinstance(response, httpx.RemoteProtocolError), response
            assert answered["at"] - signalled < 5
        else:
            assert response.status_code == 200, response.text
            assert len(response.json()["translation"]) == len(lines)
            assert answered["at"] > signalled + 0.5, "the request ended before the signal came"
        assert_stopped_whole(process, port, log)
