"""Numbers as people write them, each one whole: `10:45`, `$4.99`, `2026-12-01`, `v2.1.3`,
`50%`, `3-2`, `30x40x50 cm`, `+49 30 1234567`, `A-2291-X`, `%1$s`, `{0:>8}`.

A number as written is digits joined by the separators it is written with (`:`, `.`, `,`,
`-`, `/`, `x`), with what belongs to it on either side: a currency sign or code, a version's
`v`, a sign, `#`; a percent sign, a unit, am/pm, an ordinal's ending. Dates with a month's
name and a year (`1 May 2019`, `May 1, 2019`), codes of letters and digits (`LH 454`,
`A-2291-X`, `MP3`) and phone numbers (Google's libphonenumber, `phonenumbers`: its matcher
knows every country's plan) are numbers too. Format-string placeholders (printf's, Python's,
Qt's) are `PLACEHOLDERS`. Both are ground-floor rules: spans protect what they find
(nmt.terms.spans) and the output checks compare it (nmt.inference.output_checks).

Why a grammar of our own beside phonenumbers: Microsoft's Recognizers-Text (the one suite for
such entities on PyPI, 1.0.2a2) needs emoji < 2 to import, takes 48 ms a sentence, and misses
versions, dimensions, codes and `EUR 30` (docs/benchmarks.md).

A number keeps its source's form (the contract). `localize` writes an amount's decimal and
thousands separators as German does (`3.5` -> `3,5`, `1,000` -> `1.000`), via Babel's CLDR
data; times, dates, versions, addresses, phone numbers and codes are never localized.
"""

from __future__ import annotations

from dataclasses import dataclass

import phonenumbers
import regex
from babel.numbers import NumberFormatError, format_decimal, parse_decimal

MODES = ("keep", "localize")  # how a number comes back: as written, or with German separators
CURRENCY_CODES = "USD|EUR|GBP|CHF|JPY|CNY|CAD|AUD|NZD|SEK|NOK|DKK|PLN|CZK|HUF|INR|RUB|BRL|MXN"
MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec"
)
UNITS = (  # after a number, with or without a space; longest first where one starts another
    "km/h|m/s|mph|kmh|kWh|mAh|Ah|°C|°F|°|µm|nm|mm|cm|dm|km|m²|m³|km²|sq ft|mg|kg|g|ml|cl|dl|l"
    "|oz|lbs|lb|ft|yd|mi|KiB|MiB|GiB|TiB|KB|kB|MB|GB|TB|PB|Kbps|kbps|Mbps|Gbps|bps|kHz|MHz|GHz"
    "|Hz|kW|MW|W|mV|kV|V|mA|Ω|ms|µs|ns|px|pt|dpi|fps|cc|m"
)
GLUED_UNITS = "s|h|min|t|K|M|B|k|bn"  # only written onto the digits: 30s, 2h, 4K, $5bn
# two capitals before digits are a code ("LH 454"), unless they are a word in capitals
CAPITAL_WORDS = "IN|ON|AT|OF|TO|BY|IS|OR|AN|AS|UP|NO|SO|IT|IF|WE|MY|HE|BE|DO|GO|US|AM|PM|ME|OK"

FRACTION_SIGNS = "½¼¾⅓⅔⅛"  # a number without a digit: "½ cup"
# 10:45, 2026-12-01, 1,250.5, 30 x 40, 3/4, 1½
_CORE = rf"(?:\d*[{FRACTION_SIGNS}]|\d+(?:(?:[.,:/\-–]|\s?[x×]\s?)\d+)*)"
_DATE = (
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s(?i:{MONTHS})\.?,?\s\d{{4}}"  # 1 May 2019
    rf"|(?i:{MONTHS})\.?\s\d{{1,2}}(?:st|nd|rd|th)?,?\s\d{{4}}"  # May 1, 2019
)
_AMOUNT = (
    rf"(?:(?:[$€£¥₹₽₩¢]|(?:US|C|A|NZ|HK)\$|(?:{CURRENCY_CODES})\s?)(?=\d)"  # $4.99, EUR 30
    r"|[vV](?=\d)|[#№](?=\d)|(?<![\w.,:])[+\-−±](?=\d))?"  # v2.1.3, #58213, -5
    + _CORE
    + r"(?:(?:st|nd|rd|th)(?!\w)"  # 21st
    r"|\s?(?:[ap]\.m\.|[AP]\.M\.|[ap]m|[AP]M)(?!\w)"  # 9 pm, 9:00 AM
    r"|\s?[%‰]"  # 50%
    rf"|\s?(?:[€$£¥]|(?:{CURRENCY_CODES})(?!\w))"  # 12,50 €, 30 EUR
    rf"|\s?(?:{UNITS})(?![\w/²³])"  # 3.5 kg, 4.7 GB
    rf"|(?:{GLUED_UNITS})(?!\w))?"  # 1990s, 4K
)
_CODE = (
    rf"(?<!\w)(?!(?:{CAPITAL_WORDS})\s)[A-Z]{{2}}\s\d{{1,4}}(?!\w)"  # LH 454
    r"|(?<!\w)(?=[A-Z\d-]*\d)(?:[A-Z]{1,3}|\d[A-Z\d]*)(?:-(?:[A-Z]{1,3}|\d[A-Z\d]*))+(?![\w-])"
    r"|(?<!\w)[A-Za-z]+\d[A-Za-z\d]*(?!\w)"  # MP3, H2O, SKU123
)
# each form apart: at one start the longest match wins (`find`), not the first alternative
FORMS = tuple(
    regex.compile(p)
    for p in (rf"(?<![\w.,])(?:{_DATE})(?!\w)", _CODE, rf"(?<![\w.,])(?:{_AMOUNT})(?!\w)")
)

PLACEHOLDERS = regex.compile(
    r"(?<![\d%])%(?:\d+\$)?[-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?"
    r"[diouxXeEfFgGaAcspn](?![A-Za-z])"  # %s, %-10s, %ld, %1$s, %.2f
    r"|(?<![\d%])%\(\w+\)[-+0#]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"  # %(count)d
    r"|(?<![\w%])%\d(?!\d*[.,]\d)"  # Qt's %1
    r"|\{\{[^{}\n]*\}\}"  # {{name}}
    r"|\{\w*(?:\.\w+|\[\w+\])*(?:![rsa])?(?::[^{}\s]*)?\}"  # {0}, {name}, {0:>8}, {count:,}
    r"|\$\{?[A-Za-z_]\w*\}?|(?<![\w:/]):[A-Za-z_]\w*"  # $HOME, ${x}, :user
)
# the characters a PLACEHOLDERS match can begin with: a text without any holds none, and
# needs no search (a corpus's cleaning, nmt/corpus/cleaning.py)
PLACEHOLDER_STARTS = "%{$:"


@dataclass(frozen=True)
class WrittenSpan:
    """A match as `regex`'s are read (nmt.terms.spans.find): start(), end(), group()."""

    at: int
    to: int
    text: str

    def start(self) -> int:
        return self.at

    def end(self) -> int:
        return self.to

    def group(self, _: int = 0) -> str:
        return self.text


# what every form and phone number holds: a digit (any script's) or a fraction sign. Most
# captions hold neither, and skip the forms' searches (about a tenth of translate's CPU on them)
NUMBER_SIGNS = regex.compile(rf"[\d{FRACTION_SIGNS}]")


def find(text: str) -> list[WrittenSpan]:
    """The numbers of `text` as written, in order, none overlapping: of two that overlap the
    one starting first wins, then the longer."""
    if not NUMBER_SIGNS.search(text):
        return []
    found = [(m.start(), -m.end()) for form in FORMS for m in form.finditer(text)]
    if "+" in text:  # an international number, as its country writes it
        found += [
            (m.start, -m.end)
            for m in phonenumbers.PhoneNumberMatcher(text, None, phonenumbers.Leniency.VALID)
        ]
    spans, end = [], 0
    for start, neg_end in sorted(found):
        if start >= end:
            spans.append(WrittenSpan(start, -neg_end, text[start:-neg_end]))
            end = -neg_end
    return spans


class Numbers:
    """`find` as a pattern: what nmt.terms.spans takes for a kind (finditer)."""

    def finditer(self, text: str) -> list[WrittenSpan]:
        return find(text)


NUMBERS = Numbers()


_PLAIN = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"  # 1,250.5, 3.5, 17: an amount
_GERMAN_PLAIN = r"\d{1,3}(?:\.\d{3})+(?:,\d+)?|\d+(?:,\d+)?"  # 1.250,5, 3,5, 17
_HEAD = rf"(?:[$€£¥₹₽₩¢]|(?:US|C|A|NZ|HK)\$|(?:{CURRENCY_CODES})\s?|[+\-−±])?"
_TAIL = rf"(?:\s?(?:[%‰]|[€$£¥]|{CURRENCY_CODES}|{UNITS}))?"
AMOUNT = regex.compile(rf"(?P<head>{_HEAD})(?P<core>{_PLAIN})(?P<tail>{_TAIL})")
GERMAN_AMOUNT = regex.compile(rf"(?P<head>{_HEAD})(?P<core>{_GERMAN_PLAIN})(?P<tail>{_TAIL})")


def localize(number: str) -> str:
    """`number` (as `find` gives it) with an amount's separators as German writes them:
    `3.5 kg` -> `3,5 kg`, `$1,250.50` -> `$1.250,50`; its grouping, its decimals and all
    else as written. Anything but an amount (a time, a date, a version) comes back as it is."""
    m = AMOUNT.fullmatch(number)
    if not m or not any(c in m["core"] for c in ".,"):
        return number
    core = m["core"]
    decimals = len(core.partition(".")[2])
    pattern = ("#,##0" if "," in core else "0") + ("." + "0" * decimals if decimals else "")
    german = format_decimal(parse_decimal(core, locale="en"), format=pattern, locale="de")
    return m["head"] + german + m["tail"]


def value(number: str, german: bool = False) -> tuple:
    """What `number` stands for, its form aside: an amount's sum (read as English writes it,
    or as German does with `german`), else its digit groups (`10:45` -> ("10", "45"))."""
    m = (GERMAN_AMOUNT if german else AMOUNT).fullmatch(number)
    if m:
        try:
            return ("amount", parse_decimal(m["core"], locale="de" if german else "en"))
        except NumberFormatError:
            pass
    return tuple(regex.findall(r"\d+", number))


def same_value(number: str, written: str) -> bool:
    """Whether `written` (in a translation) stands for the source's `number`, in either
    language's separators."""
    return value(number) in (value(written), value(written, german=True))


def split_over(number: str, written: list[str]) -> range | None:
    """The run of `written` (a translation's numbers, in order) whose digit groups are
    `number`'s, one after another (`10`, `45` for `10:45`): its value written in pieces;
    None if there is none."""
    groups = regex.findall(r"\d+", number)
    for i in range(len(written)):
        have: list[str] = []
        for j in range(i, len(written)):
            have += regex.findall(r"\d+", written[j])
            if have != groups[: len(have)]:
                break
            if len(have) == len(groups):
                return range(i, j + 1)
    return None


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"numbers={mode}: choose one of {', '.join(MODES)}")


def as_mode(number: str, mode: str) -> str:
    """The form `number` must come out in under `mode` (MODES)."""
    return localize(number) if mode == "localize" else number
