"""Run `python -m nmt.serve` in the background, for tests, benchmarks and scripts: on
127.0.0.1 and a free port, in a process group of its own (LitServe's HTTP and model workers
are its children), ready once /health answers ok, stopped whole at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def started(args: list[str], env: dict | None, log: BinaryIO) -> subprocess.Popen:
    """`python -m nmt.serve args` in a session (and so a process group) of its own, its
    stdout (uvicorn's access log, at log_level=info) and stderr into `log`."""
    return subprocess.Popen(
        [sys.executable, "-m", "nmt.serve", *args],
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )


@contextmanager
def launched(
    args: list[str],
    env: dict | None = None,
    startup: float = 120,
    log_path: Path | None = None,
    start: Callable[[list[str], dict | None, BinaryIO], subprocess.Popen] = started,
) -> Iterator[str]:
    """`python -m nmt.serve args port=<free>`, begun by `start` (a process group leader, as
    Popen gives it); yields "http://127.0.0.1:<port>" once ready. Its log (stdout and stderr)
    goes to `log_path`, else to a temporary file."""
    port = free_port()
    # a file, not a pipe: nobody reads a pipe while it serves
    log = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()
    process = start([*args, "host=127.0.0.1", f"port={port}"], env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup
        while not healthy(url):
            if process.poll() is not None:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"nmt.serve exited with {process.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"nmt.serve did not answer /health in {startup} s")
            time.sleep(0.2)
        yield url
    finally:
        signal_group(process, signal.SIGINT)  # LitServe's graceful shutdown
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        signal_group(process, signal.SIGKILL)  # whatever is left of the group
        process.wait(timeout=10)
        log.close()


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as reply:
            return reply.status == 200
    except (OSError, urllib.error.URLError):
        return False


def signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
