"""What README says `make install` does with torch: pip's index by default, another index
(a CPU-only build) when TORCH_INDEX names one. A dry run (`make -n`) against a venv that does
not exist, so every step is printed and none runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def torch_install(tmp_path: Path, *args: str) -> str:
    steps = subprocess.run(
        ["make", "-n", "install", f"VENV={tmp_path / 'venv'}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
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
