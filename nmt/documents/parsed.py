"""`Parsed`: a document read into the segments to translate, and how to put them back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nmt.translation.translated import Translation


@dataclass
class Parsed:
    """`segments`, the texts to translate; `render(found)`, given one Translation per segment,
    the translated document: a file's bytes, or for texts one Translation each. `counted`:
    per segment its (words, inline tags), for documents whose segments carry tags (their
    translations are then aligned, to place the tags)."""

    segments: list[str]
    render: Callable[[list[Translation]], Any]
    counted: list[tuple[int, int]] | None = None

    @property
    def aligned(self) -> bool:
        return self.counted is not None
