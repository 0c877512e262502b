"""Where a source sentence's inline tags go in its translation, from the word alignment.

A tag covers a run of source words; it goes around the target words aligned to them, as one
contiguous range (from the first to the last aligned word). Source words with no link borrow
the links of the nearest aligned source word. Ranges are then made to nest as the source
tags did: a child is clipped to its parent, and of two siblings that overlap the later one
starts where the earlier ends (possibly empty). A point (an element with no words of its
own: an image, a comment, an empty anchor) sits after the target words of the source word
before it, or before those of the word after it.

Word indices are whitespace words; a range (start, end) is half-open, start == end an empty
range at that boundary. Each source word's aligned range is found once (`extents`), each
tag's in O(1) from a table of runs of words (`Runs`, n log n to build): placing t tags on
n words costs O(n log n + t log t), however they nest.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Span:
    """A tag over `words` (source word indices, a range: a set is taken as the run from its
    least to its greatest; empty for a point at boundary `at`) and its children; `target`:
    the range found for it."""

    words: range | set[int]
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
    # a point before a word of its own ("<img>word"): never pushed off it by a space
    glued: bool = False
    # a point read as the space between two words ("truck<tab/>A"): it takes the place of the
    # target's space where it lands
    space: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.words, range):
            self.words = range(min(self.words), max(self.words) + 1) if self.words else range(0)


def extents(links: list[tuple[int, int]], source_count: int) -> list[tuple[int, int] | None]:
    """Per source word, the target range (first, last + 1) of its links; an unaligned word
    borrows the nearest aligned word's (the earlier on a tie); None where none is aligned."""
    found: list[tuple[int, int] | None] = [None] * source_count
    for s, t in links:
        if s < source_count:
            start, end = found[s] or (t, t + 1)
            found[s] = (min(start, t), max(end, t + 1))
    # the nearest aligned word before and after each word, in two sweeps
    before, after = [None] * source_count, [None] * source_count
    last = None
    for s in range(source_count):
        last = s if found[s] else last
        before[s] = last
    last = None
    for s in reversed(range(source_count)):
        last = s if found[s] else last
        after[s] = last
    borrowed = []
    for s in range(source_count):
        b, a = before[s], after[s]
        nearest = b if a is None or (b is not None and s - b <= a - s) else a
        borrowed.append(found[nearest] if nearest is not None else None)
    return borrowed


class Runs:
    """The target range of any run of source words in O(1): a sparse table of the least
    start and greatest end over each run of 2**k words (n log n entries)."""

    def __init__(self, found: list[tuple[int, int] | None]):
        self.starts = [[f[0] if f else float("inf") for f in found]]
        self.ends = [[f[1] if f else -1 for f in found]]
        width = 1
        while 2 * width <= len(found):
            starts, ends = self.starts[-1], self.ends[-1]
            self.starts.append(list(map(min, starts, starts[width:])))
            self.ends.append(list(map(max, ends, ends[width:])))
            width *= 2

    def __call__(self, first: int, stop: int) -> tuple[int, int] | None:
        """(first target, last target + 1) of source words first..stop-1; None if none."""
        if stop <= first:
            return None
        k = (stop - first).bit_length() - 1
        other = stop - (1 << k)
        end = max(self.ends[k][first], self.ends[k][other])
        return (min(self.starts[k][first], self.starts[k][other]), end) if end >= 0 else None


def project(
    spans: list[Span], links: list[tuple[int, int]], source_count: int, target_count: int
) -> None:
    """Set `target` of every span (and its children) for a translation of `target_count`
    words."""
    found = extents(links, source_count)
    _place(spans, found, Runs(found), (0, target_count), source_count)


def _boundary(at: int, found: list[tuple[int, int] | None], default: int) -> int:
    """The target boundary of a point at source boundary `at` (`default` where no word is
    aligned at all)."""
    if 0 < at <= len(found) and found[at - 1]:
        return found[at - 1][1]
    if at < len(found) and found[at]:
        return found[at][0]
    return default


def _place(
    spans: list[Span],
    found: list[tuple[int, int] | None],
    runs: Runs,
    parent: tuple[int, int],
    source_count: int,
) -> None:
    lo, hi = parent
    for span in spans:
        aligned = runs(span.words.start, min(span.words.stop, source_count))
        start, end = aligned or (_boundary(span.at, found, default=hi),) * 2
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
        _place(span.children, found, runs, span.target, source_count)
