"""Pairs kept for a corpus, and a count of every pair dropped and why.

The rules, in order (a pair is counted under the first it breaks): empty on either side; more
than `max_words` words on either side; a word ratio above `max_ratio`; the target equal to
the source (untranslated, or a name); format placeholders (`%s`, `%(name)s`, `{0}`: the
project's own PLACEHOLDERS) not the same on both sides; a repeat of a pair kept before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from nmt.written_numbers import PLACEHOLDER_STARTS, PLACEHOLDERS

REASONS = ("empty", "too long", "ratio", "source = target", "placeholders unmatched", "duplicates")


def placeholders(text: str) -> Counter:
    """The format placeholders in a text, as a multiset."""
    return Counter(m.group(0) for m in PLACEHOLDERS.finditer(text))


def placeholders_unmatched(en: str, de: str) -> bool:
    """Whether the two sides' placeholders differ. Most pairs hold none: those are passed
    without a search (a dictionary's 370,000 sides took 2 s to search)."""
    if not any(start in text for text in (en, de) for start in PLACEHOLDER_STARTS):
        return False
    return placeholders(en) != placeholders(de)


def broken_rule(en: str, de: str, max_words: int, max_ratio: float) -> str | None:
    """The first rule the pair breaks, None if it breaks none (repeats aside)."""
    if not en or not de:
        return "empty"
    n_en, n_de = len(en.split()), len(de.split())
    if max(n_en, n_de) > max_words:
        return "too long"
    if max(n_en, n_de) > max_ratio * min(n_en, n_de):
        return "ratio"
    if en == de:
        return "source = target"
    if placeholders_unmatched(en, de):
        return "placeholders unmatched"
    return None


def cleaned(
    pairs: Iterable[tuple[str, str]], max_words: int, max_ratio: float
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The pairs kept, spaces made single, in their order; and the report: pairs read, kept,
    and dropped per reason (every reason listed, zeros too)."""
    kept: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    report = {"read": 0, **dict.fromkeys(REASONS, 0)}
    for en, de in pairs:
        report["read"] += 1
        pair = (" ".join(en.split()), " ".join(de.split()))
        why = broken_rule(*pair, max_words, max_ratio)
        if why is None and pair in seen:
            why = "duplicates"
        if why is not None:
            report[why] += 1
            continue
        seen.add(pair)
        kept.append(pair)
    report["kept"] = len(kept)
    return kept, report
