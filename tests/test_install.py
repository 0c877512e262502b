"""What README says `make install` does with torch: pip's index by default, another index
(a CPU-only build) when TORCH_INDEX names one. A dry run (`make -n`) against a venv that does
not exist, so every step is printed and none runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def dry_run(tmp_path: Path, target: str, *args: str) -> list[str]:
    """The commands `make TARGET` would run, against a venv that does not exist."""
    return subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def torch_install(tmp_path: Path, *args: str) -> str:
    steps = dry_run(tmp_path, "install", *args)
    # the step that installs torch itself: its spec is the last word, in quotes
    (line,) = [s for s in steps if "pip install" in s and s.split()[-1].startswith('"torch')]
    return line


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_torch_comes_from_the_index_torch_index_names(tmp_path):
    assert "--index-url" not in torch_install(tmp_path)
    cpu = "https://download.pytorch.org/whl/cpu"
    line = torch_install(tmp_path, f"TORCH_INDEX={cpu}", "TORCH_SPEC=torch==2.13.0")
    assert line.endswith(f'--index-url {cpu} "torch==2.13.0"')
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"make install TORCH_INDEX={cpu}" in readme


def train_command(tmp_path: Path, *args: str) -> str:
    (line,) = [s for s in dry_run(tmp_path, "train", *args) if "-m nmt.train" in s]
    return line


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_train_runs_under_the_jemalloc_the_system_has(tmp_path):
    """`make train` preloads jemalloc where the system has it, and a process so started has it
    mapped; JEMALLOC= (or a system without it) trains under the system's malloc."""
    given = train_command(tmp_path, "JEMALLOC=/opt/lib/libjemalloc.so.2")
    assert given.startswith("LD_PRELOAD=/opt/lib/libjemalloc.so.2 ")
    assert "LD_PRELOAD" not in train_command(tmp_path, "JEMALLOC=")
    line = train_command(tmp_path)
    on_system = [
        p
        for folder in ("usr/lib/*-linux-gnu", "usr/lib64", "usr/lib")
        for p in Path("/").glob(f"{folder}/libjemalloc.so.2")
    ]
    if not on_system:
        assert "LD_PRELOAD" not in line
        return
    library = line.split()[0].removeprefix("LD_PRELOAD=")
    assert Path(library) in on_system
    maps = subprocess.run(
        [sys.executable, "-c", "print(open('/proc/self/maps').read())"],
        env={**os.environ, "LD_PRELOAD": library},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "libjemalloc" in maps
