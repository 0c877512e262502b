"""Protected spans: text a translation carries byte for byte, whatever the model does.

A span is a URL, an e-mail address, inline code (`...`), a template variable (`{{name}}`,
`{0}`, `%s`, `%(name)s`, `$var`, `:name`), a number, or a match of a pattern the caller gives
(`Rules`). For a model the placeholders view taught to carry them (nmt.data.augmentation; its
model.pt says `placeholders: true`), `protect` puts a placeholder (#1, #2, ...: two pieces,
"#" and digits) in each span's place, so the model reads a token it can carry instead of
pieces it would translate or garble. A model that never saw one garbles it ("#1" becomes
"Nummer 1"), so for any other model the span is taken out, with the punctuation glued to it
(`glued`: `%s:`, `(%s)`), the model translates the rest, and the span goes in at its aligned
position (the last case below).
`restore` then puts each span back, byte for byte:
- its placeholder is in the output once: in its place;
- twice or more: in place of the one aligned to the placeholder's source word (else the
  first); the others go;
- not at all: at its aligned position, in place of a target word aligned to the placeholder
  that holds a "#" or a digit (a garbled placeholder), else after the target words aligned to
  the nearest source word before it, else before those of the nearest one after it, else at
  the end.
All but the first case are reported (`Restored.warnings`). A span is never lost, never
doubled, never changed.

Word indices are whitespace words (Pharaoh, as nmt.inference.alignment): `Protected.source_of`
maps the words the model read to the words of the sentence, `Restored.origin` the words of the
restored translation to those the model wrote, so alignments and word scores carry over.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass, field

import re2
import regex

from nmt.errors import SpanError
from nmt.inference.output_checks import EMAIL, URL
from nmt.written_numbers import NUMBERS, PLACEHOLDERS, as_mode, check_mode

KINDS = {  # a kind's pattern, or a finder of its own (finditer)
    "urls": URL.pattern,
    "emails": EMAIL.pattern,
    "code": r"`[^`\n]+`",
    "variables": PLACEHOLDERS.pattern,  # %s, %1$s, {0:>8}, %(count)d, {{name}}, $HOME, :user
    "numbers": NUMBERS,  # as written, whole: 10:45, $4.99, v2.1.3 (nmt.written_numbers)
}
KIND_NAMES = tuple(KINDS)
RE2_MEMORY = 8 << 20  # bytes RE2 may build a caller's pattern's automaton in
MAX_PATTERNS, MAX_PATTERN_CHARS = 16, 200
PLACEHOLDER = re.compile(r"#(\d+)(?!\d)")
SPAN_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Rules:
    """Which spans to protect: built-in `kinds` (KINDS' names) and the caller's `patterns`
    (regular expressions); `numbers`: how a number span comes back (keep: byte for byte;
    localize: an amount with German separators, nmt.written_numbers). Checked once, as they
    are given (`check`)."""

    kinds: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    numbers: str = "keep"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(self.kinds))
        object.__setattr__(self, "patterns", tuple(self.patterns))

    def check(self) -> None:
        """SpanError for an unknown kind or numbers mode, too many or too long patterns, or a
        pattern that does not compile or matches the empty string."""
        try:
            check_mode(self.numbers)
        except ValueError as error:
            raise SpanError(str(error)) from None
        for kind in self.kinds:
            if kind not in KINDS:
                raise SpanError(f"protect: no kind {kind!r}; the kinds: {', '.join(KINDS)}")
        if len(self.patterns) > MAX_PATTERNS:
            raise SpanError(f"protect_patterns: {len(self.patterns)} given, at most {MAX_PATTERNS}")
        for pattern in self.patterns:
            if len(pattern) > MAX_PATTERN_CHARS:
                raise SpanError(f"protect_patterns: a pattern over {MAX_PATTERN_CHARS} characters")
            if caller_pattern(pattern).fullmatch("") is not None:
                raise SpanError(f"protect_patterns: {pattern!r} matches the empty text")

    def check_texts(self, texts: list[str], seconds: float) -> None:
        """SpanError when the caller's patterns take over `seconds` on `texts` together: RE2
        runs each in time linear in the text, so this bounds a request's texts as a whole
        (the server checks them so before translating them, nmt.jobs.check)."""
        end = time.monotonic() + seconds
        for pattern in self.patterns:
            compiled = caller_pattern(pattern)
            for text in texts:
                for _ in compiled.finditer(text):
                    pass
                if time.monotonic() > end:
                    raise SpanError(
                        f"protect_patterns: {pattern!r} took over {seconds:g} s on the texts"
                    )

    @property
    def active(self) -> bool:
        return bool(self.kinds or self.patterns)

    def compiled(self) -> list[regex.Pattern]:
        """The patterns: the caller's first (their marking wins a tie), then the kinds in
        KINDS' order."""
        kinds = [KINDS[k] for k in KINDS if k in self.kinds]
        return [caller_pattern(p) for p in self.patterns] + [
            regex.compile(p) if isinstance(p, str) else p for p in kinds
        ]


def caller_pattern(pattern: str):
    """A caller's pattern compiled by RE2 (google-re2): it runs in time linear in the text and
    in bounded memory (RE2_MEMORY), whatever the pattern, so none can hold a worker: on "a" * n
    + "!", `(a|aa)+$` took `regex` 0.03 s at n=24 and 0.52 s at n=30, RE2 under 0.1 ms at
    either and at n=100,000 (docs/benchmarks.md). SpanError for one RE2 cannot run: no
    pattern, a backreference, a lookaround."""
    options = re2.Options()
    options.log_errors, options.max_mem = False, RE2_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = (
            error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else error
        )
        raise SpanError(
            f"protect_patterns: {pattern!r} is no pattern RE2 runs (no backreferences or "
            f"lookarounds): {reason}"
        ) from None


DEFAULT_RULES = Rules(KIND_NAMES)  # translate's, the server's and evaluate's


@dataclass
class Protected:
    """A sentence as the model reads it: `text`, where placeholder spans[k][0] stands for
    spans[k][1] of `source`; `source_of[i]`: the words of `source` word i of `text` stands
    for."""

    source: str
    text: str
    spans: list[tuple[str, str]] = field(default_factory=list)
    source_of: list[list[int]] = field(default_factory=list)
    # per span: its placeholder's word in text, or (taken out) the first word of text after it
    placeholder_words: list[int] = field(default_factory=list)
    span_words: list[list[int]] = field(default_factory=list)  # per span, its words in source
    taken_out: bool = False  # the spans are not in text at all (placeholders=False)
    # per span, the text it comes back as: itself, or a number localized (Rules.numbers)
    written: list[str] = field(default_factory=list)

    def masked(self, text: str) -> str:
        """`text` (this sentence as read, or its translation) with each of its placeholders
        made "#": no number for the output checks, the words where they were."""
        mine = {p for p, _ in self.spans}
        return PLACEHOLDER.sub(lambda m: "#" if m.group(0) in mine else m.group(0), text)


def find(sentence: str, compiled: list[regex.Pattern]) -> list[range]:
    """The spans of `sentence` to protect, as character ranges in order, none overlapping:
    of overlapping matches the one starting first wins, then the longest, then the earlier
    pattern. A span runs on over the digits right after it ("SKU" of "SKU123"), which its
    placeholder could not be told apart from."""
    found = []
    for rank, pattern in enumerate(compiled):
        found += [(m.start(), -m.end(), rank) for m in pattern.finditer(sentence)]
    spans, end = [], 0
    for start, neg_end, _ in sorted(found):
        stop = -neg_end
        if start >= end and stop > start:
            while stop < len(sentence) and sentence[stop].isdigit():
                stop += 1
            spans.append(range(start, stop))
            end = stop
    return spans


def protect(
    sentence: str, compiled: list[regex.Pattern], placeholders: bool = True, numbers: str = "keep"
) -> Protected:
    """`sentence` with a placeholder in each span's place (see the module docstring); the
    placeholders' numbers are ones the sentence does not hold already. placeholders=False
    (a model that never saw a placeholder) takes each span out instead, with a space beside
    it: the model reads the rest, and `restore` places the span by the alignment alone.
    numbers=localize: a span that is a number as written comes back localized."""
    cores = find(sentence, compiled)
    ranges = [glued(sentence, r) for r in cores] if not placeholders else cores
    if not ranges:
        words = len(sentence.split())
        return Protected(sentence, sentence, [], [[i] for i in range(words)], [])
    taken = {int(m.group(1)) for m in PLACEHOLDER.finditer(sentence)}
    free = (n for n in range(1, len(sentence) + len(taken) + 2) if n not in taken)
    parts, origins, at, spans, offsets = [], [], 0, [], []
    for span in ranges:
        placeholder = f"#{next(free)}" if placeholders else ""
        before = sentence[at : span.start]
        if not placeholders and (not before or before[-1].isspace()):
            before = before.rstrip()  # "see https://x.org now" reads "see now"
            before += " " if sentence[span.stop : span.stop + 1].isspace() and before else ""
        parts.append(before)
        origins += [(c, c + 1) for c in range(at, at + len(before))]
        offsets.append(len(origins))  # where the placeholder starts in the text
        parts.append(placeholder)
        origins += [(span.start, span.stop)] * len(placeholder)
        spans.append((placeholder, sentence[span.start : span.stop]))
        at = span.stop
        if not placeholders and (before.endswith(" ") or not "".join(parts).strip()):
            at += len(sentence[at:]) - len(sentence[at:].lstrip())  # one space, or none first
    parts.append(sentence[at:])
    origins += [(c, c + 1) for c in range(at, len(sentence))]
    text = "".join(parts)
    word_at = _word_index(sentence)
    source_of = []
    for m in SPAN_WORD.finditer(text):
        covered = {word_at[c] for a, b in origins[m.start() : m.end()] for c in range(a, b)}
        source_of.append(sorted(covered - {-1}))
    starts = [m.start() for m in SPAN_WORD.finditer(text)]
    if placeholders:
        placeholder_words = [sum(1 for s in starts if s <= at) - 1 for at in offsets]
    else:
        placeholder_words = [sum(1 for s in starts if s < at) for at in offsets]
    span_words = [sorted({word_at[c] for c in r} - {-1}) for r in ranges]
    written = [span for _, span in spans]
    if numbers != "keep":
        whole = {(m.start(), m.end()) for m in NUMBERS.finditer(sentence)}
        written = [
            sentence[r.start : c.start]
            + as_mode(sentence[c.start : c.stop], numbers)
            + sentence[c.stop : r.stop]
            if (c.start, c.stop) in whole
            else span
            for r, c, span in zip(ranges, cores, written, strict=True)
        ]
    return Protected(
        sentence, text, spans, source_of, placeholder_words, span_words, not placeholders, written
    )


def glued(sentence: str, span: range) -> range:
    """`span` and the punctuation glued to it, when the rest of its whitespace word is
    punctuation alone: `%s:`, `(%s)`, `"{name}",`. A span taken out goes back with it, as
    the source wrote it; the model would have read a stray ":" or "()" and written it with
    spaces, or elsewhere. The marks that end the sentence stay with the sentence."""
    start, stop = span.start, span.stop
    while start > 0 and not sentence[start - 1].isspace():
        start -= 1
    while stop < len(sentence) and not sentence[stop].isspace():
        stop += 1
    before, after = sentence[start : span.start], sentence[span.stop : stop]
    if not sentence[stop:].strip():  # the sentence's last word: its final marks stay
        after = after.rstrip(".!?…")
    if not all(punctuation(c) for c in before + after):
        return span
    return range(span.start - len(before), span.stop + len(after))


def punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def _word_index(text: str) -> list[int]:
    """For each character of `text`, the index of its whitespace word (-1 for whitespace)."""
    index = [-1] * len(text)
    for i, m in enumerate(SPAN_WORD.finditer(text)):
        index[m.start() : m.end()] = [i] * (m.end() - m.start())
    return index


@dataclass
class Restored:
    """A translation with its spans back: `text`; `origin[i]`: the word of the translation as
    the model wrote it that word i of `text.split()` comes from (None for a span put in on
    its own); `spans_of[i]`: the spans word i holds (indices of Protected.spans; empty for
    none); `warnings`: one line per span that was not in place once (put back at its aligned
    position, or written twice)."""

    text: str
    origin: list[int | None]
    spans_of: list[frozenset[int]]
    warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.warnings


def needs_alignment(protected: Protected, translation: str) -> bool:
    """Whether `restore` needs the word alignment: a placeholder lost or written twice, or
    spans taken out."""
    if protected.taken_out:
        return bool(protected.spans)
    counts = _counts(protected, translation.split())
    return any(counts.get(p, 0) != 1 for p, _ in protected.spans)


def _counts(protected: Protected, words: list[str]) -> dict[str, int]:
    mine = {p for p, _ in protected.spans}
    counts: dict[str, int] = {}
    for word in words:
        for m in PLACEHOLDER.finditer(word):
            if m.group(0) in mine:
                counts[m.group(0)] = counts.get(m.group(0), 0) + 1
    return counts


def restore(
    protected: Protected, translation: str, links: list[tuple[int, int]] | None = None
) -> Restored:
    """`translation` (of `protected.text`) with every span back (see the module docstring).
    `links`: (word of protected.text, word of translation) pairs; needed only where
    `needs_alignment` says so (without them a lost span goes at the end)."""
    words = translation.split()
    if not protected.spans:
        return Restored(translation, list(range(len(words))), [frozenset()] * len(words))
    aligned: dict[int, list[int]] = {}
    for s, t in links or []:
        if t < len(words):
            aligned.setdefault(s, []).append(t)
    found = find_placeholders(protected, words, aligned)
    place_lost(protected, words, aligned, found)
    pieces = restored_pieces(protected, words, found)
    origin: list[int | None] = []
    spans_of: list[frozenset[int]] = []
    for text, came_from, held in pieces:
        count = len(text.split())
        origin += [came_from] * count
        spans_of += [held] * count
    text = " ".join(text for text, _, _ in pieces)
    return Restored(text, origin, spans_of, found.warnings)


@dataclass
class Placement:
    """Where `restore` puts each span back: `keep[(word, match start)]` the span whose
    placeholder stays there; `drop` the placeholders that go (a span's second writing);
    `lost` the spans with no placeholder; `replace[word]` the span a garbled placeholder's
    word becomes; `after[j]` the spans put in after word j (-1: before the first)."""

    keep: dict[tuple[int, int], int] = field(default_factory=dict)
    drop: set[tuple[int, int]] = field(default_factory=set)
    lost: list[int] = field(default_factory=list)
    replace: dict[int, int] = field(default_factory=dict)
    after: dict[int, list[int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def find_placeholders(
    protected: Protected, words: list[str], aligned: dict[int, list[int]]
) -> Placement:
    """Each span's placeholder in `words`: kept once (the one aligned to its source word,
    else the first), the others dropped; spans with none are `lost`."""
    index = {p: k for k, (p, _) in enumerate(protected.spans)}
    where: dict[int, list[tuple[int, re.Match]]] = {}
    for j, word in enumerate(words):
        for m in PLACEHOLDER.finditer(word):
            if m.group(0) in index:
                where.setdefault(index[m.group(0)], []).append((j, m))
    found = Placement()
    for k, (_, span) in enumerate(protected.spans):
        places = where.get(k, [])
        if not places:
            found.lost.append(k)
            continue
        mine = set(aligned.get(protected.placeholder_words[k], []))
        chosen = next((p for p in places if p[0] in mine), places[0])
        found.keep[(chosen[0], chosen[1].start())] = k
        found.drop |= {(j, m.start()) for j, m in places if (j, m) != chosen}
        if len(places) > 1:
            found.warnings.append(f"span {span!r} was written {len(places)} times: kept once")
    return found


def place_lost(
    protected: Protected, words: list[str], aligned: dict[int, list[int]], found: Placement
) -> None:
    """Where each lost span goes: in place of a garbled placeholder aligned to it, else
    after the words aligned to the nearest source word before it, else before those of the
    nearest after it, else at the end."""
    for k in found.lost:
        s, span = protected.placeholder_words[k], protected.spans[k][1]
        if protected.taken_out:  # where it goes is the alignment's call: said so
            found.warnings.append(f"span {span!r} put in at its aligned position")
        else:  # a placeholder the model lost
            found.warnings.append(f"span {span!r} was lost: put back at its aligned position")
            garbled = [
                t
                for t in sorted(aligned.get(s, []))
                if re.search(r"[#\d]", words[t])
                and t not in found.replace
                and not PLACEHOLDER.search(words[t])
            ]
            if garbled:
                found.replace[garbled[0]] = k
                continue
        position = len(words) - 1
        before = [max(aligned[i]) for i in range(s - 1, -1, -1) if aligned.get(i)]
        first_after = s if protected.taken_out else s + 1
        later = [
            min(aligned[i]) for i in range(first_after, len(protected.source_of)) if aligned.get(i)
        ]
        if before:
            position = before[0]
        elif later:
            position = later[0] - 1
        found.after.setdefault(position, []).append(k)


def restored_pieces(protected: Protected, words: list[str], found: Placement) -> list[list]:
    """The restored translation as pieces joined by spaces: a word as the model wrote it, or
    a span as the source has it (spaces inside kept), each with the word it came from (None
    for a span put in) and the spans it holds."""
    pieces: list[list] = []

    def put(text: str, came_from: int | None, held: set[int]) -> None:
        pieces.append([text, came_from, frozenset(held)])

    for k in found.after.get(-1, []):
        put(protected.written[k], None, {k})
    for j, word in enumerate(words):
        if j in found.replace:
            k = found.replace[j]
            core = re.match(r"^(\W*?)([#\w].*?)(\W*)$", word)
            head, tail = (core.group(1), core.group(3)) if core else ("", "")
            put(head + protected.written[k] + tail, j, {k})
        else:
            rest, held = without_placeholders(protected, word, j, found)
            if held or any(c.isalnum() for c in rest) or rest == word:
                put(rest, j, held)
            elif rest and pieces:  # a dropped placeholder's punctuation: onto the word before
                pieces[-1][0] += rest
        for k in found.after.get(j, []):
            last = pieces[-1] if pieces else None
            if j == len(words) - 1 and last and not last[2] and last[0][-1:] in ".!?":
                mark = last[0][-1]
                last[0] = last[0][:-1]
                if not last[0].strip():  # the mark was the whole word
                    pieces.pop()
                put(protected.written[k] + mark, None, {k})
            else:
                put(protected.written[k], None, {k})
    return pieces


def without_placeholders(
    protected: Protected, word: str, j: int, found: Placement
) -> tuple[str, set[int]]:
    """Word j with its kept placeholders written as their spans and its dropped ones gone,
    and the spans it now holds."""
    parts, at, held = [], 0, set()
    for m in PLACEHOLDER.finditer(word):
        if (j, m.start()) in found.keep:
            held.add(found.keep[(j, m.start())])
            parts += [word[at : m.start()], protected.written[found.keep[(j, m.start())]]]
            at = m.end()
        elif (j, m.start()) in found.drop:
            parts.append(word[at : m.start()])
            at = m.end()
    return "".join(parts) + word[at:], held


def restored_links(
    protected: Protected, restored: Restored, links: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """`links` between protected.text and the model's translation, as links between the
    sentence and the restored translation: through both word maps, and each span's words
    linked to the words it came from, and to nothing else (the model's links from a
    placeholder are dropped: tags placed by them would wrap more than the span)."""
    span_sources = protected.span_words
    new_of: dict[int, list[int]] = {}
    for i, j in enumerate(restored.origin):
        if j is not None:
            new_of.setdefault(j, []).append(i)
    placeholders = set() if protected.taken_out else set(protected.placeholder_words)
    out = set()
    for s, t in links:
        if s in placeholders:  # what the model wrote for a placeholder is no span's link
            continue
        for i in new_of.get(t, []):
            if not restored.spans_of[i]:
                out |= {(s2, i) for s2 in protected.source_of[s]}
    for i, held in enumerate(restored.spans_of):
        for k in held:
            out |= {(s2, i) for s2 in span_sources[k]}
    return sorted(out)


class KeepWhole:
    """A sentence splitter (nmt.translation.sentences) that never cuts inside a protected span
    ("https://example.org/docs?id=42" holds a "?"): two sentences whose boundary falls inside
    a span are one."""

    def __init__(self, splitter, compiled: list[regex.Pattern]):
        self.splitter, self.compiled = splitter, compiled

    def spans(self, text: str) -> list[tuple[int, int]]:
        protected = find(text, self.compiled)
        joined: list[tuple[int, int]] = []
        for start, end in self.splitter.spans(text):
            if joined and any(r.start < start and r.stop > joined[-1][1] for r in protected):
                start = joined.pop()[0]
            joined.append((start, end))
        return joined
