"""Training pairs shown as people write: in ALL CAPS, in Title Case, without their final
punctuation, with numbers, two pairs run together, with placeholders where protected spans
would be, or with glossary terms annotated in the source (data.augment).

Each view changes both sides alike and keeps the pair's word alignment true, so guided
alignment still trains on real links. Which pairs get which view is drawn from
(seed, epoch, row) alone: every rank and a resumed run see the same views, and each epoch
other ones. `augment_epoch` writes an epoch's views through `Dataset.map`, so they are cached
under the data's fingerprint and the batch sampler packs their real lengths.

Why not OpusTrainer's modifiers: they draw from Python's global `random` (not a function of
the row and the epoch, so ranks and a resumed run would disagree), read and write tab-separated
lines rather than our Arrow columns of ids and links, have no aligned number substitution, and
the package pins sentencepiece==0.1.99 against our 0.2.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass

import datasets
import numpy as np

from nmt.config import AUGMENT_VIEWS, AugmentConfig
from nmt.terms.annotation import (
    FUNCTION_WORDS,
    MARK,
    TARGET_FUNCTION_WORDS,
    annotated_word,
    target_lemma,
    term_text,
)
from nmt.terms.glossary import core
from nmt.tokenizer import Tokenizer, piece_words

log = logging.getLogger(__name__)

Words = list[str]
Links = list[tuple[int, int]]  # (source word, target word)

VIEWS = AUGMENT_VIEWS  # applied in this order
FINAL_PUNCTUATION = ".!?…"
# Number words that eflomal links one to one: en -> de, replaced by digits on both sides.
NUMBER_WORDS = {
    "one": {"ein", "eine", "eins", "einen", "einem", "einer"},
    "two": {"zwei"},
    "three": {"drei"},
    "four": {"vier"},
    "five": {"fünf"},
    "six": {"sechs"},
    "seven": {"sieben"},
    "eight": {"acht"},
    "nine": {"neun"},
    "ten": {"zehn"},
    "eleven": {"elf"},
    "twelve": {"zwölf"},
}
DIGITS = re.compile(r"\d+")
UNCOMMON_SEEN = 3  # links of a word to a lemma that make the lemma one of its translations


@dataclass
class Pair:
    """One training pair as the aligner read it: words of each side and their links."""

    src: Words
    tgt: Words
    links: Links


def upper(pair: Pair) -> Pair:
    """ALL CAPS on both sides ("ß" becomes "SS", within its word: the links hold)."""
    return Pair([w.upper() for w in pair.src], [w.upper() for w in pair.tgt], pair.links)


def title(pair: Pair) -> Pair:
    """Every word's first letter in capitals, the rest as it was, on both sides."""

    def cap(words: Words) -> Words:
        return [w[:1].upper() + w[1:] for w in words]

    return Pair(cap(pair.src), cap(pair.tgt), pair.links)


def unpunctuated(pair: Pair) -> Pair | None:
    """The final . ! ? … gone from both sides; None where the source has none, or where a side
    would be left empty. Last words that were only punctuation go, with their links."""
    if not pair.src or not pair.src[-1] or pair.src[-1][-1] not in FINAL_PUNCTUATION:
        return None
    src, tgt = _strip_end(pair.src), _strip_end(pair.tgt)
    if not src or not tgt:
        return None
    links = [(s, t) for s, t in pair.links if s < len(src) and t < len(tgt)]
    return Pair(src, tgt, links)


def _strip_end(words: Words) -> Words:
    words = list(words)
    while words and not words[-1].rstrip(FINAL_PUNCTUATION):
        words.pop()
    if words:
        words[-1] = words[-1].rstrip(FINAL_PUNCTUATION)
    return words


def numbers(pair: Pair, rng: np.random.Generator) -> Pair | None:
    """A number on both sides at aligned words: it replaces a number (or number word) linked
    one to one with its translation, else it goes in before a word pair linked one to one.
    None where no word pair is linked one to one."""
    one_to_one = one_to_one_links(pair.links)
    if not one_to_one:
        return None
    number = random_number(rng)
    numeric = [(s, t) for s, t in one_to_one if _same_number(pair.src[s], pair.tgt[t])]
    if numeric:
        s, t = numeric[rng.integers(len(numeric))]
        src, tgt = list(pair.src), list(pair.tgt)
        src[s], tgt[t] = _put_core(src[s], number), _put_core(tgt[t], number)
        return Pair(src, tgt, pair.links)
    s, t = one_to_one[rng.integers(len(one_to_one))]
    return insert(pair, s, t, number, number)


def insert(pair: Pair, s: int, t: int, src_word: str, tgt_word: str) -> Pair:
    """The pair with `src_word` before source word s and `tgt_word` before target word t
    (s, t may be the lengths: at the end), the two linked, every other link moved along."""
    src = pair.src[:s] + [src_word] + pair.src[s:]
    tgt = pair.tgt[:t] + [tgt_word] + pair.tgt[t:]
    links = [(a + (a >= s), b + (b >= t)) for a, b in pair.links] + [(s, t)]
    return Pair(src, tgt, sorted(links))


def one_to_one_links(links: Links) -> Links:
    """The links whose two words have no other link."""
    src_count = Counter(s for s, _ in links)
    tgt_count = Counter(t for _, t in links)
    return sorted((s, t) for s, t in links if src_count[s] == 1 and tgt_count[t] == 1)


def _core(word: str) -> str:
    return word.strip(FINAL_PUNCTUATION + ",;:\"'()").lower()


def _same_number(src_word: str, tgt_word: str) -> bool:
    """Whether two linked words say the same number: the same digits, or number words."""
    s, t = _core(src_word), _core(tgt_word)
    if DIGITS.fullmatch(s):
        return s == t
    return t in NUMBER_WORDS.get(s, ())


def _put_core(word: str, new: str) -> str:
    """The word with its core (the word less surrounding punctuation) replaced by `new`."""
    core = _core(word)
    if not core:  # punctuation alone: all of it goes
        return new
    start = word.lower().find(core)
    return word[:start] + new + word[start + len(core) :]


def random_number(rng: np.random.Generator) -> str:
    """Digits as they come in text: a count, a hundreds figure, a year or a model number."""
    kind = rng.random()
    if kind < 0.4:
        return str(rng.integers(2, 21))
    if kind < 0.7:
        return str(rng.integers(21, 1000))
    if kind < 0.85:
        return str(rng.integers(1900, 2031))
    return str(rng.integers(1000, 100_000))


def placeholders(pair: Pair, rng: np.random.Generator) -> Pair | None:
    """#1 (and, a third of the time, #2) on both sides at aligned words, numbered in source
    order as nmt.terms.spans numbers a sentence's spans: each replaces a word pair linked one
    to one (its punctuation kept), or half the time goes in before it. None where no word
    pair is linked one to one."""
    one_to_one = one_to_one_links(pair.links)
    if not one_to_one:
        return None
    count = min(len(one_to_one), 2 if rng.random() < 1 / 3 else 1)
    picks = [one_to_one[i] for i in sorted(rng.choice(len(one_to_one), count, replace=False))]
    picks.sort()
    for k in range(len(picks)):
        s, t = picks[k]
        placeholder = f"#{k + 1}"
        if rng.random() < 0.5:
            src, tgt = list(pair.src), list(pair.tgt)
            src[s], tgt[t] = _put_core(src[s], placeholder), _put_core(tgt[t], placeholder)
            pair = Pair(src, tgt, pair.links)
            continue
        pair = insert(pair, s, t, placeholder, placeholder)
        picks[k + 1 :] = [(a + (a >= s), b + (b >= t)) for a, b in picks[k + 1 :]]
    return pair


def terms(
    pair: Pair,
    rng: np.random.Generator,
    form: str,
    seen: dict[str, Counter] | None = None,
    mask: float = 0.0,
) -> Pair | None:
    """One (a third of the time two) source words linked one to one annotated with their
    target word, as a glossary term (nmt.terms.annotation; form "lemma" or "exact"), the
    annotation's words linked to the target word. Only words of letters, three or more, not
    FUNCTION_WORDS (TARGET_FUNCTION_WORDS on the target side, nor its lemma:
    "Deren" is "Der", "Wurde" "Werden"); None where the pair has none.
    With `seen` (`linked_lemmas`), words translated otherwise than usual (`_uncommon`) are
    taken where the pair has any: a term the model would have written anyway teaches it
    nothing about reading the annotation, and a glossary is given for the words it gets
    wrong. With `mask`, that share of the annotated words go, their annotation left alone
    (`%% Vertrag %%` where `contract %% Vertrag %%` was): the model cannot write the word's
    own translation there, and learns to take the term from the marks."""
    candidates = [
        (s, t)
        for s, t in one_to_one_links(pair.links)
        if _term_word(core(pair.src[s])) and _target_term(core(pair.tgt[t]))
    ]
    if seen is not None:
        uncommon = [(s, t) for s, t in candidates if _uncommon(seen, pair.src[s], pair.tgt[t])]
        candidates = uncommon or candidates
    if not candidates:
        return None
    count = min(len(candidates), 2 if rng.random() < 1 / 3 else 1)
    picks = sorted(candidates[i] for i in rng.choice(len(candidates), count, replace=False))
    src, links = list(pair.src), list(pair.links)
    for s, t in reversed(picks):  # from the end: earlier picks' indices hold
        term = term_text(core(pair.tgt[t]), form).split()
        in_place = bool(mask) and rng.random() < mask
        added = annotated_word(src[s], " ".join(term), in_place)
        if in_place:  # the word goes, and its one link
            links.remove((s, t))
        src[s : s + 1] = added
        grown = len(added) - 1
        links = [(a + grown * (a > s), b) for a, b in links]
        first = s + added.index(MARK) + 1
        links += [(first + k, t) for k in range(len(term))]  # the term's words, not marks
    return Pair(src, pair.tgt, sorted(links))


def _term_word(word: str, function_words: frozenset[str] = FUNCTION_WORDS) -> bool:
    return len(word) >= 3 and word.isalpha() and word.lower() not in function_words


def _target_term(word: str) -> bool:
    return _term_word(word, TARGET_FUNCTION_WORDS) and _term_word(
        target_lemma(word), TARGET_FUNCTION_WORDS
    )


def linked_lemmas(pairs: list[Pair]) -> dict[str, Counter]:
    """Source word (lower case) -> how often each target lemma (lower case) is linked one to
    one with it in `pairs`, for the term words of `terms`."""
    seen: dict[str, Counter] = {}
    for pair in pairs:
        for s, t in one_to_one_links(pair.links):
            word, term = core(pair.src[s]), core(pair.tgt[t])
            if _term_word(word) and _target_term(term):
                seen.setdefault(word.lower(), Counter())[target_lemma(term).lower()] += 1
    return seen


def _uncommon(seen: dict[str, Counter], word: str, term: str) -> bool:
    """Whether `term` translates `word` otherwise than usual: its lemma is not the one most
    often linked to the word, yet is linked to it UNCOMMON_SEEN times or more (fewer is
    likelier an aligner's stray link than a translation)."""
    lemmas = seen.get(core(word).lower(), Counter())
    lemma = target_lemma(core(term)).lower()
    usual = lemmas.most_common(1)[0][0] if lemmas else None
    return lemma != usual and lemmas[lemma] >= UNCOMMON_SEEN


def merged(first: Pair, second: Pair) -> Pair:
    """Two pairs as one: sources, then targets, joined, the second's links moved along."""
    ds, dt = len(first.src), len(first.tgt)
    links = first.links + [(s + ds, t + dt) for s, t in second.links]
    return Pair(first.src + second.src, first.tgt + second.tgt, links)


def draw_views(n: int, shares: AugmentConfig, seed: int, epoch: int) -> dict[str, np.ndarray]:
    """view -> (n,) bool: which of an epoch's rows get it. Upper and title case exclude each
    other; the other views combine. Drawn from (seed, epoch) alone."""
    rng = np.random.default_rng([seed, epoch, 0xA06])
    draws = {view: rng.random(n) for view in VIEWS}
    chosen = {view: draws[view] < getattr(shares, view) for view in VIEWS}
    chosen["title"] &= ~chosen["upper"]
    return chosen


def augment_rows(
    rows: dict[str, list],
    tokenizer: Tokenizer,
    chosen: dict[str, np.ndarray],
    seed: int,
    epoch: int,
    max_len: int,
    term_form: str = "lemma",
    term_pick: str = "any",
    term_mask: float = 0.0,
) -> tuple[dict[str, list], list[list[str]]]:
    """The rows (src, tgt, src_ids, tgt_ids, optional word_align; row i is the epoch's
    row i) with their chosen views applied, re-encoded, and each row's views applied. A
    view that does not fit a row (no final stop, no one-to-one link, a merge past max_len
    pieces, the last row to merge, irregular spacing) is left out of it; a row its views take
    past max_len pieces is left as it was. With term_pick "uncommon", `terms` prefers targets
    that are not their word's usual translation in these rows (`linked_lemmas`)."""
    starts = tokenizer.word_starts()
    has_links = "word_align" in rows
    n = len(rows["src"])
    seen = None
    if term_pick == "uncommon" and has_links and chosen["terms"].any():
        read = (_read_pair(rows, i, starts, has_links) for i in range(n))
        seen = linked_lemmas([pair for pair in read if pair is not None])
    term_view = (term_form, seen, term_mask)
    out = {key: list(values) for key, values in rows.items()}
    applied: list[list[str]] = [[] for _ in range(n)]
    changed = []
    for i in range(n):
        views = [view for view in VIEWS if chosen[view][i]]
        if not views:
            continue
        pair = _read_pair(rows, i, starts, has_links)
        if pair is None:
            continue
        rng = np.random.default_rng([seed, epoch, i])
        done = []
        for view in views:
            new = one_view(view, pair, rows, i, starts, has_links, max_len, rng, term_view)
            if new is not None:
                pair = new
                done.append(view)
        if not done:
            continue
        applied[i] = done
        out["src"][i], out["tgt"][i] = " ".join(pair.src), " ".join(pair.tgt)
        if has_links:
            out["word_align"][i] = [x for link in sorted(pair.links) for x in link]
        changed.append(i)
    reencode(out, rows, changed, applied, tokenizer, max_len)
    return out, applied


def one_view(
    view: str,
    pair: Pair,
    rows: dict[str, list],
    i: int,
    starts: np.ndarray,
    has_links: bool,
    max_len: int,
    rng: np.random.Generator,
    term_view: tuple,
) -> Pair | None:
    """Row i's `pair` in `view`, or None where the view does not fit it (`augment_rows`);
    term_view: terms' (form, seen, mask)."""
    if view == "merged":
        n = len(rows["src"])
        if i + 1 >= n or (
            len(rows["src_ids"][i]) + len(rows["src_ids"][i + 1]) > max_len
            or len(rows["tgt_ids"][i]) + len(rows["tgt_ids"][i + 1]) > max_len
        ):
            return None
        second = _read_pair(rows, i + 1, starts, has_links)
        return None if second is None else merged(pair, second)
    if view == "unpunctuated":
        return unpunctuated(pair)
    if view in ("upper", "title"):
        return upper(pair) if view == "upper" else title(pair)
    if not has_links:  # the other views move words along their links
        return None
    if view == "numbers":
        return numbers(pair, rng)
    if view == "placeholders":
        return placeholders(pair, rng)
    return terms(pair, rng, *term_view)


def reencode(
    out: dict[str, list],
    rows: dict[str, list],
    changed: list[int],
    applied: list[list[str]],
    tokenizer: Tokenizer,
    max_len: int,
) -> None:
    """The `changed` rows of `out` encoded again; one its views take past max_len pieces is
    put back as it was in `rows`, its views (`applied`) none. Lengths follow."""
    encoded = {
        side: texts.encode([out[side][i] for i in changed])
        for side, texts in (("src", tokenizer), ("tgt", tokenizer.target))
    }
    for i, src_ids, tgt_ids in zip(changed, encoded["src"], encoded["tgt"], strict=True):
        if max(len(src_ids), len(tgt_ids)) > max_len:  # capitals take more pieces: as it was
            for key in out:
                out[key][i] = rows[key][i]
            applied[i] = []
            continue
        out["src_ids"][i], out["tgt_ids"][i] = src_ids, tgt_ids
    for side in ("src", "tgt"):
        if f"{side}_len" in out:
            out[f"{side}_len"] = [len(x) for x in out[f"{side}_ids"]]


def _read_pair(rows: dict[str, list], i: int, starts: np.ndarray, has_links: bool) -> Pair | None:
    """Row i as the aligner read it: the words its pieces make (`piece_words`), which for a
    line of single spaces are its own words, and the links. None for a row whose text is not
    such a line (a tab, two spaces): its words would not join back into it."""
    sides = []
    for side in ("src", "tgt"):
        words = rows[side][i].split(" ")
        if "" in words or len(words) != len(piece_words(rows[f"{side}_ids"][i], starts)):
            return None
        sides.append(words)
    flat = rows["word_align"][i] if has_links else []
    return Pair(*sides, [(flat[k], flat[k + 1]) for k in range(0, len(flat), 2)])


def augment_epoch(
    ds: datasets.Dataset,
    tokenizer: Tokenizer,
    shares: AugmentConfig,
    seed: int,
    epoch: int,
    max_len: int,
) -> datasets.Dataset:
    """An epoch's view of the encoded training split: the same rows, some changed by
    `augment_rows`, and a `views` column (a bit per view in VIEWS' order), cached by
    `Dataset.map` under (the split's fingerprint, the draws, seed, epoch). Logs how many pairs
    got each view."""
    out = ds.map(
        _augment_all,
        batched=True,
        batch_size=None,  # merging reads the next row: the whole split at once
        fn_kwargs={
            "tokenizer": tokenizer,
            "chosen": draw_views(len(ds), shares, seed, epoch),
            "seed": seed,
            "epoch": epoch,
            "max_len": max_len,
            "term_form": shares.term_form,
            "term_pick": shares.term_pick,
            "term_mask": shares.term_mask,
        },
        desc=f"Augmenting epoch {epoch}",
    )
    bits = np.asarray(out.data.table.column("views").to_numpy(zero_copy_only=False))
    log.info(
        "Epoch %d views of %d training pairs: %s",
        epoch,
        len(out),
        ", ".join(
            f"{int(np.count_nonzero(bits & (1 << k))):,} {view}"
            for k, view in enumerate(VIEWS)
            if getattr(shares, view) > 0
        ),
    )
    return out


def _augment_all(rows: dict, tokenizer: Tokenizer, **kwargs) -> dict:
    out, views = augment_rows(rows, tokenizer, **kwargs)
    out["views"] = [sum(1 << VIEWS.index(v) for v in row) for row in views]
    return out
