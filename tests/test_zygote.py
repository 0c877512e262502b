"""The suite's zygote (tests/zygote.py): a forked command's interpreter is a stand-in that forks
training launches from the zygote and runs anything else in the real interpreter, and a
command tied to its client ends when the client goes."""

import os
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, run_module, zygote

from nmt.serving.workers import alive  # a zombie, killed and not yet reaped, is not alive

PROBE = """
import resource, subprocess, sys
print(sys.executable)
trained = subprocess.run([sys.executable, "-u", "-m", "nmt.train", "--help"], capture_output=True)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(trained.returncode, b"experiment" in trained.stdout, used.ru_utime + used.ru_stime < 0.5)
plain = [sys.executable, "-c", "import sys; print(sys.executable)"]
print(subprocess.run(plain, capture_output=True, text=True).stdout.strip())
"""


def test_a_forked_commands_interpreter_forks_training_and_runs_the_rest_itself(tmp_path: Path):
    (tmp_path / "probe.py").write_text(PROBE)
    result = run_module("probe", [], tmp_path, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    stand_in, trained, plain = result.stdout.splitlines()
    assert stand_in == zygote().stand_in
    # `python -u -m nmt.train --help` answered, and not by a child of the probe's: a fork of
    # the zygote's, whose CPU is not the probe's children's (the stand-in's ~0.02 CPU-s is;
    # a fresh interpreter's imports for the help are ~2 CPU-s)
    assert trained == "0 True True"
    # `-c`: the real interpreter, the zygote's own
    assert os.path.samefile(plain, psutil.Process(zygote().pid).exe())


def test_a_tied_command_ends_with_its_client_and_an_untied_one_does_not(tmp_path: Path):
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(60)\n")
    env = {"PYTHONPATH": str(ROOT)}
    pids = {}
    for tied in (True, False):
        request = {"module": "sleeper", "args": [], "cwd": str(tmp_path), "env": env}
        with open(os.devnull, "r+b") as null:
            command = zygote().start({**request, "tied": tied}, [null.fileno()] * 3)
        command.connection.close()  # the client goes, as a killed stand-in's socket does
        pids[tied] = command.pid
    deadline = time.monotonic() + 10
    while alive(pids[True]) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not alive(pids[True]) and alive(pids[False])
    finally:
        os.kill(pids[False], 9)


def test_under_xdist_each_test_process_is_a_fork_of_the_zygote():
    """`make test`'s test processes start through the stand-in (tests/conftest.py rewrites
    xdist's `popen` specs), so they inherit the zygote's imports instead of paying them."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("a run without xdist has no test processes of its own")
    assert zygote().pid in {parent.pid for parent in psutil.Process().parents()}
