"""Where a source sentence's inline tags go in its translation, from the word alignment.

A tag covers a set of source words; it goes around the target words aligned to them, as one
contiguous range (from the first to the last aligned word). Source words with no link borrow
the links of the nearest aligned source word. Ranges are then made to nest as the source
tags did: a child is clipped to its parent, and of two siblings that overlap the later one
starts where the earlier ends (possibly empty). A point (an element with no words of its
own: an image, a comment, an empty anchor) sits after the target words of the source word
before it, or before those of the word after it.

Word indices are whitespace words; a range (start, end) is half-open, start == end an empty
range at that boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Span:
    """A tag over `words` (source word indices; empty for a point at boundary `at`) and its
    children; `target`: the range found for it."""

    words: set[int]
    at: int = 0
    children: list[Span] = field(default_factory=list)
    target: tuple[int, int] = (0, 0)
    node: object = None  # what the caller puts there (nmt.documents.markup: the element)
    # punctuation of its first/last source word left outside the tag ('"' of '"<b>word</b>',
    # "." of "<a>word</a>."): where a target word has it too, it stays outside there as well
    head: str = ""
    tail: str = ""
    # a point with a space before it in the source ("the <img> x") goes after the target's
    # space, not onto the word before; with one after it too, it keeps one after it
    spaced: tuple[bool, bool] = (False, False)


def targets_of(links: list[tuple[int, int]], source_count: int) -> list[list[int]]:
    """Per source word, its aligned target words; an unaligned word borrows the nearest
    aligned word's (the earlier on a tie)."""
    aligned: list[list[int]] = [[] for _ in range(source_count)]
    for s, t in links:
        if s < source_count:
            aligned[s].append(t)
    # the nearest aligned word before and after each word, in two sweeps (linear)
    before, after = [None] * source_count, [None] * source_count
    last = None
    for s in range(source_count):
        last = s if aligned[s] else last
        before[s] = last
    last = None
    for s in reversed(range(source_count)):
        last = s if aligned[s] else last
        after[s] = last
    found = []
    for s in range(source_count):
        b, a = before[s], after[s]
        nearest = b if a is None or (b is not None and s - b <= a - s) else a
        found.append(aligned[s] or (aligned[nearest] if nearest is not None else []))
    return found


def project(
    spans: list[Span], links: list[tuple[int, int]], source_count: int, target_count: int
) -> None:
    """Set `target` of every span (and its children) for a translation of `target_count`
    words."""
    aligned = targets_of(links, source_count)
    _place(spans, aligned, (0, target_count), source_count)


def _boundary(span: Span, aligned: list[list[int]], source_count: int, default: int) -> int:
    """The target boundary of a point at source boundary `span.at` (`default` where no
    word is aligned at all)."""
    if 0 < span.at <= source_count and aligned[span.at - 1]:
        return max(aligned[span.at - 1]) + 1
    if span.at < source_count and aligned[span.at]:
        return min(aligned[span.at])
    return default


def _place(
    spans: list[Span], aligned: list[list[int]], parent: tuple[int, int], source_count: int
) -> None:
    lo, hi = parent
    for span in spans:
        targets = [t for s in span.words if s < source_count for t in aligned[s]]
        if targets:
            start, end = min(targets), max(targets) + 1
        else:
            start = end = _boundary(span, aligned, source_count, default=hi)
        start, end = min(max(start, lo), hi), min(max(end, lo), hi)
        span.target = (start, max(start, end))
    placed_end = lo
    for span in sorted(spans, key=lambda s: (s.target[0], s.target[1])):
        start, end = span.target
        if start < placed_end:  # overlaps an earlier sibling: start after it
            start = placed_end
            end = max(end, start)
        span.target = (start, end)
        placed_end = max(placed_end, end)
        _place(span.children, aligned, span.target, source_count)
