"""The line-aligned text files of a report folder (hyp.<role>.txt, ref.<role>.txt).

UTF-8, "\\n" after every line and "\\n" the only line break, as `nmt.data.read_lines` reads
corpora: a reference holding "\\r" or "\\u2028" stays one line. Kept apart from `nmt.data` so
that `nmt.report` starts without importing torch, datasets and Lightning.
"""

from __future__ import annotations

from pathlib import Path


def write_lines(path: Path, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)


def read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.removesuffix("\n") for line in f]
