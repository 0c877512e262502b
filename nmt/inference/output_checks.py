"""Cheap checks of a translation against its source, after the search: what must come through
unchanged (numbers, URLs, e-mail addresses) and signs of a search stuck in a loop.

`check` finds the problems of one (source, translation); `fix_numbers` mends the one kind a
word alignment makes safe: a source number whose word is linked to a single target word that
is itself a number (or a number word), written wrong. A translation with a problem left gets
a lower confidence (`lowered`), and every door shows the warnings (nmt.documents.translation).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"']+[^\s<>\"'.,;:!?)\]]")
EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
# a number as text writes it: 7, 1,250, 3.5, 1.000.000; its digits are what must survive
# (German writes 1.250 for 1,250 and 3,5 for 3.5)
NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?![\w])")
GERMAN_NUMBER_WORDS = {
    "null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn",
    "elf", "zwölf",
}  # fmt: skip
LOOP_REPEATS = 4  # the same word n-gram this many times in a row (n up to LOOP_NGRAM)
LOOP_NGRAM = 4
CHAR_RUN = 6  # one letter this many times in a row, where the source has no such run
CHAR_RUN_PATTERN = re.compile(r"([^\W\d_])\1{" + str(CHAR_RUN - 1) + ",}")  # letters
LENGTH_RATIO, LENGTH_SLACK = 3.0, 20  # characters: more than 3 x the source's + 20
# what a problem left in a translation does to its confidence: a loop leaves little of it
LOWERED = {"loop": 0.25, "missing": 0.5}


@dataclass
class Findings:
    """What `check` found in one translation: `missing` (numbers by their digits, URLs and
    e-mail addresses of the source absent from it), `loop` (a sign of a repeated loop, or
    ""), and `fixed` (the numbers `fix_numbers` wrote in)."""

    missing: list[str] = field(default_factory=list)
    loop: str = ""
    fixed: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """One short line per finding, for outputs and logs."""
        lines = [f"missing {item}" for item in self.missing]
        lines += [f"fixed number {item}" for item in self.fixed]
        return lines + ([self.loop] if self.loop else [])

    def lowered(self, confidence: float | None) -> float | None:
        """The confidence with each problem left counted against it."""
        if confidence is None:
            return None
        if self.loop:
            confidence *= LOWERED["loop"]
        if self.missing:
            confidence *= LOWERED["missing"]
        return confidence


def digits(number: str) -> str:
    return re.sub(r"\D", "", number)


def must_keep(source: str) -> list[str]:
    """The spans of `source` its translation must carry: URLs, e-mail addresses, then numbers
    (not those inside a URL or address), in order of kind."""
    spans = URL.findall(source) + EMAIL.findall(source)
    rest = source
    for span in spans:
        rest = rest.replace(span, " ")
    return spans + NUMBER.findall(rest)


def missing(source: str, translation: str) -> list[str]:
    """The spans of `must_keep(source)` the translation lacks: URLs and addresses by their
    exact text, numbers by their digits (each as often as the source has it)."""
    kept = must_keep(source)
    absent = [span for span in kept if not NUMBER.fullmatch(span) and span not in translation]
    have = Counter(digits(n) for n in NUMBER.findall(translation))
    for span in kept:
        if NUMBER.fullmatch(span):
            if have[digits(span)] > 0:
                have[digits(span)] -= 1
            else:
                absent.append(span)
    return absent


def loop_sign(source: str, translation: str) -> str:
    """A description of the first sign of a repeated loop in `translation`, or "": an n-gram
    of words LOOP_REPEATS times in a row, a character CHAR_RUN times in a row, or a length
    far past the source's. A repetition the source itself has is not counted."""
    words = translation.split()
    for n in range(1, LOOP_NGRAM + 1):
        for i in range(len(words) - n * LOOP_REPEATS + 1):
            gram = words[i : i + n]
            if all(words[i + k * n : i + (k + 1) * n] == gram for k in range(1, LOOP_REPEATS)):
                repeated = " ".join(gram)
                if (" " + repeated) * LOOP_REPEATS not in " " + " ".join(source.split()):
                    return f"loop: {repeated!r} repeated"
    run = CHAR_RUN_PATTERN.search(translation)
    if run and not re.search(re.escape(run.group(1)) * CHAR_RUN, source, re.IGNORECASE):
        return f"loop: {run.group(0)[:CHAR_RUN]}…"
    if len(translation) > LENGTH_RATIO * len(source) + LENGTH_SLACK:
        return f"loop: {len(translation)} characters for a source of {len(source)}"
    return ""


def check(source: str, translation: str) -> Findings:
    return Findings(missing=missing(source, translation), loop=loop_sign(source, translation))


def fix_numbers(
    source: str, translation: str, links: list[tuple[int, int]], findings: Findings
) -> str:
    """`translation` with each missing number written in where it is safe: the source word
    holding it is linked (`links`: source word, target word, Pharaoh over whitespace words)
    to exactly one target word, and that word is a number or a number word. Updates
    `findings` (a fixed number leaves `missing` for `fixed`)."""
    src_words, tgt_words = source.split(), translation.split()
    numbers = [m for m in findings.missing if NUMBER.fullmatch(m)]
    for number in numbers:
        holders = [i for i, w in enumerate(src_words) if number in NUMBER.findall(w)]
        if len(holders) != 1:
            continue
        targets = sorted({t for s, t in links if s == holders[0] and t < len(tgt_words)})
        if len(targets) != 1:
            continue
        word = tgt_words[targets[0]]
        core = re.sub(r"^\W+|\W+$", "", word)
        if NUMBER.fullmatch(core):
            tgt_words[targets[0]] = word.replace(core, number, 1)
        elif core.lower() in GERMAN_NUMBER_WORDS:
            tgt_words[targets[0]] = word.replace(core, number, 1)
        else:
            continue
        findings.missing.remove(number)
        findings.fixed.append(number)
    return " ".join(tgt_words) if findings.fixed else translation


def tally(warnings: list[list[str]]) -> str:
    """One log line for a run's texts' warnings: how many texts were flagged, and by kind."""
    kinds = Counter(w.split(" ", 1)[0].rstrip(":") for ws in warnings for w in ws)
    flagged = sum(1 for ws in warnings if any(not w.startswith("fixed") for w in ws))
    return (
        f"output checks: {flagged:,} of {len(warnings):,} lines flagged ({kinds['missing']:,} "
        f"missing numbers, URLs or addresses, {kinds['loop']:,} loops); "
        f"{kinds['fixed']:,} numbers fixed"
    )
