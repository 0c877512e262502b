"""Every `nmt.X` the documents, docstrings and config comments name exists: a module, or a
name in one (a renamed or deleted module leaves no stale pointer behind)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"\bnmt(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FILE_SUFFIXES = {"json", "py", "yaml", "md", "pt", "txt", "log", "model", "vocab"}


def named() -> dict[str, str]:
    """Each dotted nmt name -> the first file naming it."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "nmt").rglob("*.py")) + sorted((ROOT / "nmt").rglob("*.yaml"))
    found: dict[str, str] = {}
    for path in files:
        for name in NAME.findall(path.read_text(encoding="utf-8")):
            if name.rsplit(".", 1)[1] not in FILE_SUFFIXES:
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_nmt_name_a_document_gives_exists():
    names = named()
    assert len(names) > 50  # the scan reads what it should
    missing = {name: where for name, where in names.items() if not resolves(name)}
    assert not missing, missing
