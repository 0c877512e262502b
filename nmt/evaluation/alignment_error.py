"""Alignment error rate (Och & Ney 2003) of word alignments against a gold standard.

Files hold one sentence pair per line, links separated by spaces: "i-j" a sure link of source
word i to target word j (0-based), "i?j" or "ipj" a possible one (the gold standards of
WMT-era alignment sets). A hypothesis' links all count as sure. With A the hypothesis, S the
sure and P the sure-plus-possible gold links, summed over the corpus:
precision |A & P| / |A|, recall |A & S| / |S|, AER 1 - (|A & S| + |A & P|) / (|A| + |S|).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LINK = re.compile(r"^(\d+)([-?p])(\d+)$")


@dataclass
class AlignmentError:
    precision: float
    recall: float
    aer: float
    sentences: int


def parse_links(line: str, number: int = 0) -> tuple[set, set]:
    """(sure, possible) links of one line; possible includes sure. ValueError names a bad
    link and its line."""
    sure, possible = set(), set()
    for token in line.split():
        match = LINK.match(token)
        if match is None:
            raise ValueError(f"line {number}: {token!r} is not a link like 0-1, 0?1 or 0p1")
        link = (int(match.group(1)), int(match.group(3)))
        possible.add(link)
        if match.group(2) == "-":
            sure.add(link)
    return sure, possible


def alignment_error(gold: list[str], hypothesis: list[str]) -> AlignmentError:
    """AER of `hypothesis` lines against `gold` lines (the same number of lines)."""
    if len(gold) != len(hypothesis):
        raise ValueError(f"{len(gold)} gold lines but {len(hypothesis)} hypothesis lines")
    a_total = s_total = a_and_s = a_and_p = 0
    for number, (gold_line, hyp_line) in enumerate(zip(gold, hypothesis, strict=True), start=1):
        sure, possible = parse_links(gold_line, number)
        found, _ = parse_links(hyp_line.replace("?", "-").replace("p", "-"), number)
        a_total, s_total = a_total + len(found), s_total + len(sure)
        a_and_s += len(found & sure)
        a_and_p += len(found & possible)
    precision = a_and_p / a_total if a_total else 0.0
    recall = a_and_s / s_total if s_total else 0.0
    total = a_total + s_total
    aer = 1.0 - (a_and_s + a_and_p) / total if total else 0.0
    return AlignmentError(precision, recall, aer, len(gold))
