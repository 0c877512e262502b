"""Glossaries: source terms and the target terms a translation must use for them.

A glossary file is UTF-8, one entry per line, `source term<TAB>target term` (several words
allowed on either side); blank lines and lines starting with "#" are skipped. `read` refuses,
naming the file and the line, a line without exactly one tab, an empty side, or a term over
MAX_TERM_CHARS or MAX_TERM_WORDS, and a glossary with over MAX_FORMS entries whose source
terms have the same lemmas; a request's glossary is held to MAX_ENTRIES as well. So finding
the terms of a sentence of n words costs at most n x MAX_TERM_WORDS lookups, each checking
at most MAX_FORMS entries, whatever the glossary.

`Glossary.find(words)` gives the entries whose source term a sentence holds, word by word at
word boundaries (the punctuation around a word is not part of it). A word matches by its form
or by its English lemma (simplemma), so "contracts" finds "contract"; a term's word in lower
case also matches the word capitalised (a sentence's first word), any other keeps its case.
Overlapping matches: the longest wins, then the first, then one by form over one by lemma
("men" finds "men" -> "Männer" before "man" -> "Mann"). `uses(translation, target)`: whether a
translation holds the target term in any inflection, by German lemma ("Verträge" is a use of
"Vertrag").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nmt.errors import GlossaryError
from nmt.terms.lemmas import lemmatize

MAX_TERM_CHARS = 200
MAX_TERM_WORDS = 8  # a source term's words: a sentence is searched for terms up to this long
MAX_FORMS = 4  # entries whose source terms have the same lemmas ("bike", "Bike", "bikes")
MAX_ENTRIES = 1000  # in one request's glossary
MAX_CACHED_CHARS = 40  # the longest word whose lemma is cached (`lemma`)
LANGS = ("en", "de")  # a glossary's source and target languages, as simplemma names them
EDGE = "\"'()[]{}<>«»„“”‚‘’.,;:!?…"  # punctuation around a word, not part of it


@dataclass(frozen=True)
class Entry:
    source: str
    target: str


@dataclass(frozen=True)
class Match:
    """An entry found in a sentence: its source term covers `words` (whitespace words)."""

    entry: Entry
    words: range


def lemma(word: str, lang: str) -> str:
    """The word's lemma in lower case (simplemma; the word itself where it knows none; "" for
    ""). Words of up to MAX_CACHED_CHARS are cached: the cache stays within a few tens of MB
    whatever a request's words (a 2,000-character word a key could hold ~1 GB a process)."""
    if len(word) > MAX_CACHED_CHARS:
        return lemmatize(word, lang).lower()
    return cached_lemma(word, lang)


@lru_cache(maxsize=100_000)
def cached_lemma(word: str, lang: str) -> str:
    return lemmatize(word, lang).lower() if word else ""


def core(word: str) -> str:
    """The word without the punctuation around it."""
    return word.strip(EDGE)


def word_matches(term_word: str, word: str, lang: str) -> bool:
    """Whether a sentence's word (its core) is the term's word: the same form, or the same
    lemma, in the term's case (a lower-case term's word may be capitalised)."""
    if not word:
        return False
    cased = word
    if term_word.islower() and word[:1].isupper() and word[1:] == word[1:].lower():
        cased = word[:1].lower() + word[1:]
    if cased == term_word:
        return True
    if term_word.islower() and not cased.islower():
        return False
    if term_word[:1].isupper() != cased[:1].isupper():
        return False
    return lemma(cased, lang) == lemma(term_word, lang)


class Glossary:
    """Entries, each source term (as words) once: the later entry of a repeated source term
    wins (a request's over the server's, `merged`)."""

    def __init__(
        self, entries: list[Entry], src_lang: str = LANGS[0], tgt_lang: str = LANGS[1], exact=False
    ):
        # exact: each target term in the form given, a hard constraint of the search
        # (nmt.decoding.constrained) rather than a term the model may inflect
        self.exact = exact
        by_source = {e.source: e for e in entries}
        self.entries = list(by_source.values())
        self.sources = set(by_source)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self._words = [[core(w) for w in e.source.split()] for e in self.entries]
        # entries by the lemmas of their words: a run of a sentence's words looks up its own
        self._by_lemmas: dict[tuple[str, ...], list[int]] = {}
        # every key's starts: a run of words that starts none ends the search from its start
        self._starts: set[tuple[str, ...]] = set()
        self._firsts: set[str] = set()  # the lemmas of the terms' first words
        for i, words in enumerate(self._words):
            key = tuple(lemma(w, src_lang) for w in words)
            self._starts.update(key[:n] for n in range(1, len(key) + 1))
            self._firsts.add(key[0])
            forms = self._by_lemmas.setdefault(key, [])
            forms.append(i)
            if len(forms) > MAX_FORMS:
                raise GlossaryError(
                    f"glossary: over {MAX_FORMS} entries are forms of {self.entries[i].source!r}"
                )

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def parse(cls, text: str, name: str) -> Glossary:
        """The entries of a glossary file's `text`; GlossaryError names `name` and the line."""
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            entries.append(checked_entry(line.split("\t"), f"{name} line {number}"))
        return cls(entries)

    @classmethod
    def read(cls, path: str, exact: bool = False) -> Glossary:
        try:
            text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark is no term
        except FileNotFoundError:
            raise GlossaryError(f"glossary={path} not found") from None
        except UnicodeDecodeError as error:
            raise GlossaryError(f"glossary={path} is not UTF-8 (byte {error.start})") from None
        glossary = cls.parse(text, f"glossary={path}")
        glossary.exact = exact
        return glossary

    @classmethod
    def of_request(cls, pairs: dict[str, str], exact: bool = False) -> Glossary:
        """A request's glossary ({"source term": "target term"})."""
        if len(pairs) > MAX_ENTRIES:
            raise GlossaryError(f"glossary: {len(pairs)} entries, at most {MAX_ENTRIES}")
        entries = [checked_entry([s, t], f"glossary entry {s[:40]!r}") for s, t in pairs.items()]
        return cls(entries, exact=exact)

    def under(self, own: Glossary | None) -> Glossary:
        """This glossary (a server's) beneath a request's `own`, whose entries win a shared
        source term: neither is copied nor indexed again (`Layered`)."""
        if own is None or not len(own):
            return self
        return Layered(own, self)

    def find(self, sentence: str) -> list[Match]:
        """The entries `sentence` holds (see the module docstring), in sentence order."""
        words = [core(w) for w in sentence.split()]
        lemmas = [lemma(w, self.src_lang) if w else "" for w in words]
        return chosen_matches(self.candidates(words, lemmas))

    def candidates(self, words: list[str], lemmas: list[str]) -> list[tuple[Match, bool]]:
        """Every entry a sentence's words (their cores, and lemmas) hold, overlapping or not,
        each with whether it matches by form."""
        found = []
        firsts = self._firsts
        for start in range(len(words)):
            if lemmas[start] not in firsts:  # (most words start no term)
                continue
            for end in range(start + 1, min(start + MAX_TERM_WORDS, len(words)) + 1):
                key = tuple(lemmas[start:end])
                if not words[end - 1] or key not in self._starts:
                    break
                for i in self._by_lemmas.get(key, []):
                    pairs = list(zip(self._words[i], words[start:end], strict=True))
                    if all(word_matches(t, w, self.src_lang) for t, w in pairs):
                        form = all(t.lower() == w.lower() for t, w in pairs)
                        found.append((Match(self.entries[i], range(start, end)), form))
        return found

    def uses(self, translation: str, target: str) -> bool:
        """Whether `translation` holds the target term, in any inflection (by lemma)."""
        return self.used(translation, [target])[0]

    def glued(self, translation: str, target: str) -> bool:
        """Whether `translation` writes the target term's last word on into a longer word
        ("Reha" for "Reh"), case aside: a term the search did not end."""
        last = core(target.split()[-1]).lower()
        return any(
            len(word) > len(last) and word.startswith(last)
            for word in (core(w).lower() for w in translation.split())
        )

    def used(self, translation: str, targets: list[str]) -> list[bool]:
        """`uses` for each of the targets, the translation's lemmas found once."""
        have = self.lemmas(translation)
        return [holds(have, self.lemmas(target)) for target in targets]

    def uses_all(self, translation: str, targets: list[str]) -> bool:
        """Whether `translation` uses every one of the target terms (`used`)."""
        return all(self.used(translation, targets))

    def written_at(self, translation: str, targets: list[str]) -> set[int]:
        """The places of `translation`'s words that write any of the target terms (by
        lemma, as `used`)."""
        have, at = self.lemmas(translation), set()
        for target in targets:
            want = self.lemmas(target)
            for i in range(len(have) - len(want) + 1):
                if have[i : i + len(want)] == want:
                    at.update(range(i, i + len(want)))
        return at

    def lemmas(self, text: str) -> tuple[str, ...]:
        return text_lemmas(text, self.tgt_lang)

    def rank(self, translations: list[str], targets: list[str]) -> list[int]:
        """The order of a sentence's translations (given best first) by how many of the
        target terms each uses, most first; ties keep their order. A first that uses them
        all stays first, the others unread."""
        if translations and self.uses_all(translations[0], targets):
            return list(range(len(translations)))
        wanted = [self.lemmas(target) for target in targets]
        used = [sum(holds(self.lemmas(text), want) for want in wanted) for text in translations]
        return sorted(range(len(translations)), key=lambda h: -used[h])


class Layered(Glossary):
    """A request's glossary over a server's (`Glossary.under`): a sentence's terms are found
    in both, the request's entry winning a source term both hold, as if they were one
    glossary of the server's entries and then the request's."""

    def __init__(self, own: Glossary, base: Glossary):
        self.own, self.base, self.exact = own, base, own.exact
        self.src_lang, self.tgt_lang = base.src_lang, base.tgt_lang
        self.overridden = {e.source for e in own.entries}

    def __len__(self) -> int:
        return len(self.base) + sum(e.source not in self.base.sources for e in self.own.entries)

    def candidates(self, words: list[str], lemmas: list[str]) -> list[tuple[Match, bool]]:
        kept = [
            (match, form)
            for match, form in self.base.candidates(words, lemmas)
            if match.entry.source not in self.overridden
        ]
        return kept + self.own.candidates(words, lemmas)


def chosen_matches(found: list[tuple[Match, bool]]) -> list[Match]:
    """Of overlapping candidates, the longest, then the first, then one by form (stable:
    an earlier entry wins a tie), in sentence order."""
    found = sorted(found, key=lambda m: (-len(m[0].words), m[0].words.start, not m[1]))
    chosen, taken = [], set()
    for match, _ in found:
        if taken.isdisjoint(match.words):
            chosen.append(match)
            taken.update(match.words)
    return sorted(chosen, key=lambda m: m.words.start)


@lru_cache(maxsize=8192)
def text_lemmas(text: str, lang: str) -> tuple[str, ...]:
    """The lemmas of a text's words (a translation is read for its terms several times)."""
    return tuple(lemma(core(w), lang) for w in text.split())


def holds(have: tuple[str, ...], want: tuple[str, ...]) -> bool:
    """Whether the word sequence `want` occurs in `have`."""
    if len(want) == 1:
        return want[0] in have
    return any(have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1))


@lru_cache(maxsize=8)
def read_glossary(path: str, exact: bool = False) -> Glossary:
    """`Glossary.read`, once per path and process (a server's glossary serves every request)."""
    return Glossary.read(path, exact)


def checked_entry(fields: list[str], where: str) -> Entry:
    if len(fields) != 2:
        raise GlossaryError(
            f"{where}: {len(fields) - 1} tabs; an entry is 'source term<TAB>target term'"
        )
    source, target = (" ".join(f.split()) for f in fields)
    if not source or not target:
        raise GlossaryError(f"{where}: an empty {'source' if not source else 'target'} term")
    if max(len(source), len(target)) > MAX_TERM_CHARS:
        raise GlossaryError(f"{where}: a term over {MAX_TERM_CHARS} characters")
    if len(source.split()) > MAX_TERM_WORDS:
        raise GlossaryError(f"{where}: a source term over {MAX_TERM_WORDS} words")
    if not all(core(w) for w in source.split()):
        raise GlossaryError(f"{where}: a source term's word of punctuation alone")
    return Entry(source, target)
