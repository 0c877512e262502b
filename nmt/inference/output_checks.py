"""Cheap checks of a translation against its source, after the search: what must come through
unchanged (numbers as written, URLs, e-mail addresses) and signs of a search stuck in a loop.

A number (nmt.written_numbers) is compared by its value and by its form: `10 45` for `10:45`,
or `1.250` for `1,250` where numbers are kept as written, keeps the value in another form
(`changed`); a number whose value is not there is `missing`. With numbers=localize, an
amount's German form is the one expected.

`check` finds the problems of one (source, translation); `fix_numbers` mends the one kind a
word alignment makes safe: a source number whose word is linked to a single target word that
is itself a number (or a number word), written wrong. A translation with a problem left gets
a lower confidence (`lowered`), and every door shows the warnings (nmt.translation.texts).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from nmt.written_numbers import as_mode, find, same_value, split_over

URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"']+[^\s<>\"'.,;:!?)\]]")
EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
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
    """What `check` found in one translation: `missing` (numbers whose value, URLs and e-mail
    addresses of the source absent from it), `changed` (numbers whose value is there in
    another form), `loop` (a sign of a repeated loop, or ""), and `fixed` (the numbers
    `fix_numbers` wrote in)."""

    missing: list[str] = field(default_factory=list)
    loop: str = ""
    fixed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """One short line per finding, for outputs and logs."""
        lines = [f"missing {item}" for item in self.missing]
        lines += [f"changed number {item}: its value kept, not its form" for item in self.changed]
        lines += [f"fixed number {item}" for item in self.fixed]
        return lines + ([self.loop] if self.loop else [])

    @property
    def numbers(self) -> list[str]:
        """The numbers not come through as they must, missing or changed: what the number
        grammar reads whole (a URL or an address is none)."""
        return [n for n in self.missing + self.changed if [m.text for m in find(n)] == [n]]

    def lowered(self, confidence: float | None) -> float | None:
        """The confidence with each problem left counted against it."""
        if confidence is None:
            return None
        if self.loop:
            confidence *= LOWERED["loop"]
        if self.missing or self.changed:
            confidence *= LOWERED["missing"]
        return confidence


def must_keep(source: str) -> tuple[list[str], list[str]]:
    """What `source`'s translation must carry: (URLs and e-mail addresses, numbers as written
    not inside one of those)."""
    spans = URL.findall(source) + EMAIL.findall(source)
    rest = source
    for span in spans:
        rest = rest.replace(span, " ")
    return spans, [m.text for m in find(rest)]


def compare(source: str, translation: str, mode: str = "keep") -> tuple[list[str], list[str]]:
    """(missing, changed) of `source`'s spans in `translation` (see the module docstring):
    URLs and addresses by their exact text; numbers each as often as the source has it,
    first in the form `mode` asks for, then by value."""
    exact, numbers = must_keep(source)
    missing = [span for span in exact if span not in translation]
    changed = []
    written = [m.text for m in find(translation)]
    for number in numbers:
        form = as_mode(number, mode)
        if form in written:
            written.remove(form)
            continue
        same = next((w for w in written if same_value(number, w)), None)
        if same is not None:
            written.remove(same)
            changed.append(number)
        elif (pieces := split_over(number, written)) is not None:
            del written[pieces.start : pieces.stop]
            changed.append(number)
        else:
            missing.append(number)
    return missing, changed


def missing(source: str, translation: str, mode: str = "keep") -> list[str]:
    """The spans of `source` whose value `translation` lacks (`compare`)."""
    return compare(source, translation, mode)[0]


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


def check(source: str, translation: str, mode: str = "keep") -> Findings:
    lost, changed = compare(source, translation, mode)
    return Findings(missing=lost, changed=changed, loop=loop_sign(source, translation))


def fix_numbers(
    source: str,
    translation: str,
    links: list[tuple[int, int]],
    findings: Findings,
    mode: str = "keep",
) -> str:
    """`translation` with each missing or changed number written in, in the form `mode` asks
    for, where it is safe: the number is one word of the source, that word is linked (`links`:
    source word, target word, Pharaoh over whitespace words) to exactly one target word, and
    that word holds one number, or is a number word. Updates `findings` (a fixed number
    leaves `missing` or `changed` for `fixed`)."""
    src_words, tgt_words = source.split(), translation.split()
    for number in [n for n in findings.numbers if len(n.split()) == 1]:
        holders = [i for i, w in enumerate(src_words) if number in [m.text for m in find(w)]]
        if len(holders) != 1:
            continue
        targets = sorted({t for s, t in links if s == holders[0] and t < len(tgt_words)})
        if len(targets) != 1:
            continue
        word = tgt_words[targets[0]]
        held = find(word)
        core = re.sub(r"^\W+|\W+$", "", word)
        if len(held) == 1:
            old = held[0]
            tgt_words[targets[0]] = word[: old.at] + as_mode(number, mode) + word[old.to :]
        elif core.lower() in GERMAN_NUMBER_WORDS:
            tgt_words[targets[0]] = word.replace(core, as_mode(number, mode), 1)
        else:
            continue
        (findings.missing if number in findings.missing else findings.changed).remove(number)
        findings.fixed.append(number)
    return " ".join(tgt_words) if findings.fixed else translation


def tally(warnings: list[list[str]]) -> str:
    """One log line for a run's texts' warnings: how many texts were flagged, and by kind."""
    kinds = Counter(w.split(" ", 1)[0].rstrip(":") for ws in warnings for w in ws)
    flagged = sum(1 for ws in warnings if any(not w.startswith("fixed") for w in ws))
    return (
        f"output checks: {flagged:,} of {len(warnings):,} lines flagged ({kinds['missing']:,} "
        f"missing numbers, URLs or addresses, {kinds['changed']:,} numbers in another form, "
        f"{kinds['loop']:,} loops); "
        f"{kinds['fixed']:,} numbers fixed"
    )
