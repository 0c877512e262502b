"""A process that imports the heavy libraries once, then runs each `python -m MODULE ARGS` that
a run's tests ask for in a fork of itself (one per run, which all its test processes share:
tests/conftest.py). The command runs as it would from a shell (its own process, cwd,
environment, stdin, stdout, stderr, exit status, atexit and thread joins at the end), but
without paying torch's and Lightning's ~1.5-6 CPU-s of imports each time. What it imported is
frozen out of the garbage collector (`gc.freeze`): a fork's collections would otherwise walk,
and so copy page by page, the whole inherited heap (a refused `nmt.serve` took 2.5 s, 0.7 s
now).

Protocol, one unix-socket connection per command: the client sends one JSON line (module,
args, cwd, env, and `session`: true for a process group of its own) with three file
descriptors (stdin, stdout, stderr) beside it; a waiter forks the command, sends its pid as a
line, waits for it, and sends its status as a line (the returncode as subprocess gives it:
negative for a signal).

Libraries that read the environment at import are left for the command to import
(prometheus_client reads its multiprocess folder, which the server sets), except `datasets`
(~0.5 CPU-s, in every training and evaluation): a fork reloads its `datasets.config`, which
reads the command's environment (HF_DATASETS_CACHE, which tests set per run) as the import
would, into the module every other part of datasets reads its settings from.

A command's `sys.executable` is a stand-in (`python` in the socket's folder): the launchers
that start training processes through it (Lightning's DDP ranks, torchrun's, a submitit job:
`-m` one of STANDS_IN_FOR) get a fork too, and so does the run's main process for its test
processes (pytest-xdist's `--tx popen//python=STAND-IN`, tests/conftest.py). Such a fork is
tied to its stand-in: the signals the stand-in gets are passed on, its end (even by SIGKILL)
ends the fork, and it exits with the fork's status. Any other use of the stand-in runs the
real interpreter in its place (submitit's job controller, for one, needs its own pid to be
the one its launcher saw). Multiprocessing keeps the real interpreter it read at import
(LitServe's model workers still start fresh).
"""

from __future__ import annotations

import gc
import importlib
import io
import json
import os
import runpy
import shlex
import signal
import socket
import sys
import threading

PRELOADED = (
    *("torch", "lightning.pytorch", "hydra", "omegaconf", "sentencepiece", "sacrebleu"),
    # the file formats' and the server's libraries: none reads at import what a test sets
    *("fastapi", "docx", "pptx", "lxml.etree", "markdown_it", "mdit_py_plugins", "polib"),
    *("phonenumbers", "babel", "srt", "webvtt", "re2", "sentencex", "defusedxml", "PIL"),
    "datasets",
    # and this checkout's own modules that import none of those below
    *("nmt.jobs.run", "nmt.inference.torch_engine", "nmt.training.lightning_module"),
)
STANDS_IN_FOR = ("nmt.train", "submitit.core._submit")
# what execnet (pytest-xdist's test processes) runs: `python -u -c BOOTSTRAP`, the rest on stdin
EXECNET_BOOTSTRAP = "import sys;exec(eval(sys.stdin.readline()))"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)
# A shell script, so that no path's length meets the kernel's limit on a #! line
STAND_IN = '#!/bin/sh\nexec {python} -S -c {code} "$@"\n'
STAND_IN_CODE = (
    "import sys; sys.path.insert(0, {tests!r}); import zygote; "
    "zygote.as_python({socket!r}, {python!r})"
)


def stand_in_of(path: str) -> str:
    """Where the zygote listening at the socket `path` writes its stand-in (STAND_IN)."""
    return os.path.join(os.path.dirname(path), "python")


def run_command(request: dict, fds: list[int], stand_in: str) -> None:
    """In the forked command: become `python -m module args` and never return; with
    `session`, in a session (and so a process group) of its own, as Popen's
    start_new_session gives."""
    if request.get("session"):
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("unbuffered"):  # `python -u`: each write reaches the file
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    sys.executable = stand_in
    importlib.reload(sys.modules["datasets.config"])
    sys.path[0] = request["cwd"]
    if "code" in request:  # `python -c code args`
        sys.argv = ["-c", *request["args"]]
        exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
        sys.exit(0)
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    sys.exit(0)  # an exception or SystemExit leaves here as it would leave `python -m`


def wait_for_command(
    connection: socket.socket, request: dict, fds: list[int], stand_in: str
) -> None:
    """In the waiter: fork the command, tell the client its pid and then its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        connection.close()
        run_command(request, fds, stand_in)
    for fd in fds:
        os.close(fd)
    connection.sendall(f"{pid}\n".encode())
    waited = threading.Event()
    if request.get("tied"):  # the stand-in's end, whatever ended it, ends the command
        threading.Thread(target=end_with_client, args=(connection, pid, waited)).start()
    status = os.waitpid(pid, 0)[1]
    waited.set()
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    try:
        connection.sendall(f"{code}\n".encode())
    except OSError:
        pass  # the client has gone
    os._exit(0)


def end_with_client(connection: socket.socket, pid: int, waited: threading.Event) -> None:
    """In the waiter of a tied command: SIGKILL it once its client has gone (a stand-in reads
    nothing more and closes the connection only when it ends)."""
    try:
        connection.recv(1)
    except OSError:
        pass
    if not waited.is_set():
        os.kill(pid, signal.SIGKILL)


def as_python(path: str, python: str) -> None:
    """The stand-in for `python ARGS` (STAND_IN): `[-u] -m MODULE ARGS` for a MODULE in
    STANDS_IN_FOR, and execnet's `[-u] -c EXECNET_BOOTSTRAP`, forked from the zygote at `path`
    and tied to this process; anything else execs `python` itself."""
    args, unbuffered = sys.argv[1:], False
    while args[:1] == ["-u"]:  # this command's streams alone, not its children's (no variable)
        args, unbuffered = args[1:], True
    request = {"args": args[2:], "cwd": os.getcwd(), "env": dict(os.environ), "tied": True}
    request["unbuffered"] = unbuffered
    if args[:1] == ["-m"] and args[1:2] and args[1] in STANDS_IN_FOR:
        request["module"] = args[1]
    elif args[:2] == ["-c", EXECNET_BOOTSTRAP]:
        request["code"] = args[1]
    else:
        os.execv(python, [python, *sys.argv[1:]])
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
    replies = connection.makefile("rb")
    pid = int(replies.readline())
    for number in FORWARDED:
        signal.signal(number, lambda number, _: os.kill(pid, number))
    code = int(replies.readline())
    if code < 0:  # ended by a signal: so is this process, as its launcher expects
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def preload() -> None:
    for name in PRELOADED:
        __import__(name)
    from nmt.documents.formats import FORMATS, loaded_reader

    for form in FORMATS.values():  # the readers, which a command imports when first called
        loaded_reader(form.file_reader)
    gc.freeze()  # the forks' collections skip what was imported here, and copy none of it


def serve(path: str, preload_now: bool) -> None:
    """Ready at once; the imports come with the first command (a run may ask for none), or
    right after ready with `preload_now` (a run of several test processes, which all fork
    from here: the imports then run while the run's main process goes on with its start)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    stand_in = stand_in_of(path)
    tests = os.path.dirname(os.path.abspath(__file__))
    with open(stand_in, "w") as script:
        code = STAND_IN_CODE.format(tests=tests, socket=path, python=sys.executable)
        script.write(STAND_IN.format(python=shlex.quote(sys.executable), code=shlex.quote(code)))
    os.chmod(stand_in, 0o755)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    print("ready", flush=True)
    if preload_now:
        preload()
    preloaded = preload_now
    while True:
        connection, _ = listener.accept()
        if not preloaded:
            preload()
            preloaded = True
        message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
        while not message.endswith(b"\n"):
            message += connection.recv(1 << 20)
        if os.fork() == 0:
            listener.close()
            wait_for_command(connection, json.loads(message), fds, stand_in)
        connection.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    serve(sys.argv[1], "--preload-now" in sys.argv[2:])
