"""A paragraph of formatted runs (Word's `w:r`, DrawingML's `a:r`) read as an HTML paragraph
is read: the formatting that covers most of its characters is the paragraph's own, its runs
become plain text, and only runs of another formatting become tags that the alignment carries
onto their target words (as `<b>` inside `<p>`). Were every run a tag, a bold word's tag and
the plain run around it would claim the same target words, and the bold could be lost.
Translated text outside every tag is written in the paragraph's own formatting.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MARKUP = re.compile(r"<[^>]*>")  # of a fragment, whose text is escaped


def own_run(runs: list, text: Callable, formatting: Callable):
    """Of `runs`, the first whose formatting (`formatting(run)`, comparable bytes) covers the
    most characters (`text(run)`); None for no runs."""
    sizes: dict[bytes, int] = {}
    first: dict[bytes, object] = {}
    for run in runs:
        key = formatting(run)
        sizes[key] = sizes.get(key, 0) + len(text(run))
        first.setdefault(key, run)
    return first[max(sizes, key=sizes.__getitem__)] if sizes else None


def has_words(fragment: str) -> bool:
    """Whether a paragraph's fragment holds text, not only points and tags."""
    return bool(MARKUP.sub("", fragment).strip())
