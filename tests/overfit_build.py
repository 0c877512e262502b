"""Train the session's shared overfit model in a process of its own, while the test workers
run the tests that do not need it: `python tests/overfit_build.py FOLDER DATA_DIR`.

xdist's controller starts it before its workers (conftest.py `pytest_sessionstart`). It holds
FOLDER's lock (conftest.py `built_once`) from before it says "locked" until its process ends,
so a worker that asks for the model blocks on the lock and wakes when it is built; if the
build fails, that worker finds no `.built` and trains the model itself, failing as the test
would have. Its output goes to FOLDER.log. Same code, same config, one thread: the same
weights as a worker's own build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["OMP_NUM_THREADS"] = "1"

import torch  # noqa: E402
from conftest import OVERFIT_PAIRS, build_overfit_run, head  # noqa: E402
from filelock import FileLock  # noqa: E402


def main(folder: Path, data_dir: Path) -> None:
    torch.set_num_threads(1)
    with FileLock(str(folder) + ".lock"):
        print("locked", flush=True)
        with open(str(folder) + ".log", "ab") as log:  # Lightning's output, for a failure
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        if (folder / ".built").exists():
            return
        pairs = tuple(head(data_dir / f"train.{lang}", OVERFIT_PAIRS) for lang in ("en", "de"))
        build_overfit_run(pairs, folder)
        (folder / ".built").touch()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
