"""Training views (nmt.data.augmentation): each keeps its pair consistent, they are drawn per
epoch the same on every rank, and with every share 0 the batches are today's."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nmt.config import AUGMENT_VIEWS, AugmentConfig, DataConfig, TokenizerConfig
from nmt.data.augmentation import (
    Pair,
    linked_lemmas,
    merged,
    numbers,
    placeholders,
    terms,
    title,
    unpunctuated,
    upper,
)
from nmt.data.datamodule import TranslationDataModule
from nmt.terms.annotation import MARK, TARGET_FUNCTION_WORDS, annotate, target_lemma
from nmt.terms.glossary import Entry, Match
from nmt.tokenizer import piece_words

WORD = st.text(alphabet="abcdefßxyzäöüABC,.!?0123456789", min_size=1, max_size=8)


@st.composite
def pairs(draw) -> Pair:
    src = draw(st.lists(WORD, min_size=1, max_size=8))
    tgt = draw(st.lists(WORD, min_size=1, max_size=8))
    links = draw(
        st.sets(st.tuples(st.integers(0, len(src) - 1), st.integers(0, len(tgt) - 1)), max_size=10)
    )
    return Pair(src, tgt, sorted(links))


def assert_links_index_words(pair: Pair) -> None:
    assert all(0 <= s < len(pair.src) and 0 <= t < len(pair.tgt) for s, t in pair.links)
    assert all(w and " " not in w for w in pair.src + pair.tgt)


@settings(max_examples=300, deadline=None)
@given(pairs(), pairs(), st.integers(0, 2**32 - 1))
def test_each_view_keeps_its_pair_consistent(pair, other, seed):
    for view in (upper, title):
        new = view(pair)
        assert new.links == pair.links and len(new.src) == len(pair.src)
        assert [w.lower() for w in new.src] == [w.upper().lower() for w in pair.src] or (
            view is title
        )
    assert all(w == w.upper() for w in upper(pair).src + upper(pair).tgt)
    assert all(w[:1] == w[:1].upper() for w in title(pair).src + title(pair).tgt)

    both = merged(pair, other)
    assert_links_index_words(both)
    assert both.src == pair.src + other.src and both.tgt == pair.tgt + other.tgt
    assert {(both.src[s], both.tgt[t]) for s, t in both.links} == {
        (pair.src[s], pair.tgt[t]) for s, t in pair.links
    } | {(other.src[s], other.tgt[t]) for s, t in other.links}

    bare = unpunctuated(pair)
    if pair.src[-1][-1] not in ".!?…":
        assert bare is None
    elif bare is not None:
        assert_links_index_words(bare)
        assert bare.src[-1][-1] not in ".!?…" and bare.tgt[-1][-1] not in ".!?…"
        assert bare.src[:-1] == pair.src[: len(bare.src) - 1]
    else:  # a side of nothing but punctuation
        assert not "".join(pair.src).strip(".!?…") or not "".join(pair.tgt).strip(".!?…")

    with_number = numbers(pair, np.random.default_rng(seed))
    if with_number is None:
        return
    assert_links_index_words(with_number)
    new_digits = [
        (s, t)
        for s, t in with_number.links
        if re.search(r"\d", with_number.src[s])
        and re.findall(r"\d+", with_number.src[s]) == re.findall(r"\d+", with_number.tgt[t])
        and (
            s >= len(pair.src)
            or with_number.src[s] != pair.src[s]
            or len(with_number.src) > len(pair.src)
        )
    ]
    assert new_digits, (pair, with_number)  # a number went in at a pair of linked words
    # every other linked pair of words is the one it was
    if len(with_number.src) == len(pair.src):
        changed = [
            i for i, (a, b) in enumerate(zip(pair.src, with_number.src, strict=True)) if a != b
        ]
        assert len(changed) <= 1


WORDS = st.text(alphabet="abcdefghrstuAB", min_size=2, max_size=7).map(lambda w: w + "x")


def with_linked_words(pair: Pair, extra: list[str]) -> Pair:
    """`pair` with `extra` words at the end of both sides, each linked one to one with its
    twin (so that the pair has term words)."""
    return Pair(
        pair.src + extra,
        pair.tgt + extra,
        pair.links + [(len(pair.src) + i, len(pair.tgt) + i) for i in range(len(extra))],
    )


@settings(max_examples=300, deadline=None)
@given(pairs(), st.lists(WORDS, min_size=1, max_size=6), st.integers(0, 2**32 - 1))
@example(  # a target word with its full stop: the term is the word alone
    Pair(["0"] * 5 + ["AAA"], ["0"] * 5 + ["AAA."], [(5, 5)]), ["AAx"], 125
)
def test_terms_annotate_a_linked_word_with_its_target_as_translation_would(pair, extra, seed):
    """The source gains `word %% term %%` after one or two words linked one to one, the term
    the linked target word (exact form), linked to it; the target and every other word stay;
    and the text is what translation writes for a glossary entry of those two words."""
    pair = with_linked_words(pair, extra)
    new = terms(pair, np.random.default_rng(seed), "exact")
    assert new is not None  # the extra words are term words linked one to one
    assert_links_index_words(new)
    assert new.tgt == pair.tgt
    marks = [i for i, w in enumerate(new.src) if w.startswith(MARK)]
    assert len(marks) in (2, 4)
    matches = []
    for at, close in zip(marks[0::2], marks[1::2], strict=True):
        assert new.src[at] == MARK
        (t,) = {t for s, t in new.links if at < s < close}
        assert new.src[at + 1 : close] == [new.tgt[t].strip(",.!?")]
        before = at - 1 - 3 * len(matches)  # the annotated word's place in the pair's source
        assert (before, t) in pair.links
        # a glossary's term is a word, as the annotation writes it: no punctuation after it
        term = new.tgt[t].strip(",.!?")
        matches.append(Match(Entry(pair.src[before], term), range(before, before + 1)))
    assert annotate(" ".join(pair.src), matches, "exact").text == " ".join(new.src)


@settings(max_examples=200, deadline=None)
@given(pairs(), st.lists(WORDS, min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_masked_terms_stand_alone_where_their_word_was(pair, extra, seed):
    """term_mask=1: each annotated word is gone, `%% term %%` in its place linked to its
    target word, as translation writes a term in place; the target and every other word
    (and link) stay."""
    pair = with_linked_words(pair, extra)
    new = terms(pair, np.random.default_rng(seed), "exact", mask=1.0)
    assert_links_index_words(new)
    assert new.tgt == pair.tgt
    marks = [i for i, w in enumerate(new.src) if w.startswith(MARK)]
    assert len(marks) in (2, 4)
    matches = []
    for open_, close in zip(marks[0::2], marks[1::2], strict=True):
        (t,) = {t for s, t in new.links if open_ < s < close}
        assert new.src[open_ + 1 : close] == [new.tgt[t].strip(",.!?")]
        assert all(s != open_ and s != close for s, _ in new.links)  # marks link nothing
        (s,) = {s for s, b in pair.links if b == t}  # the word it stands for: linked one to one
        matches.append(Match(Entry(pair.src[s], new.tgt[t].strip(",.!?")), range(s, s + 1)))
    assert len(new.links) == len(pair.links)  # the word's link became the term's
    # as translation reads a glossary's terms for a model trained so
    assert annotate(" ".join(pair.src), matches, "exact", in_place=True).text == " ".join(new.src)


def test_uncommon_terms_are_the_words_translated_otherwise_than_usual():
    """term_pick "uncommon": a pair holding a word translated otherwise than usual (not the
    lemma most often linked to it, yet linked to it UNCOMMON_SEEN times) gets that word
    annotated, every draw; a lemma linked once (an aligner's stray link) or an article is no
    such word; a pair with none still gets a term."""
    said = [("the dog runs", "der Hund rennt")] * 4 + [
        ("two dogs", "zwei Hunde"),
        ("the dog barks", "der Köter bellt"),
        ("a dog sleeps", "ein Köter schläft"),
        ("the dog sits", "der Köter sitzt"),
        ("the dog eats", "der Welpe frisst"),
        ("a cat sleeps", "eine Katze schläft"),
    ]
    read = [Pair(s.split(), t.split(), [(0, 0), (1, 1), (2, 2)][: len(s.split())]) for s, t in said]
    seen = linked_lemmas(read)
    assert seen["dog"] == {"hund": 4, "köter": 3, "welpe": 1}
    assert seen["dogs"] == {"hund": 1}  # by lemma; "der", "zwei" are no terms
    both = Pair("the dog and the cat".split(), "der Köter und die Katze".split(), [(1, 1), (4, 4)])
    for seed in range(30):
        new = terms(both, np.random.default_rng(seed), "exact", seen)
        assert [w for w in new.src if w not in both.src and w != MARK] == ["Köter"]
    stray = Pair("the dog and the cat".split(), "der Welpe und die Katze".split(), [(1, 1), (4, 4)])
    picked = {
        tuple(
            w
            for w in terms(stray, np.random.default_rng(seed), "exact", seen).src
            if w not in stray.src and w != MARK
        )
        for seed in range(30)
    }
    assert ("Welpe",) in picked and ("Katze",) in picked  # neither preferred
    usual = Pair("the dog".split(), "der Hund".split(), [(0, 0), (1, 1)])
    assert terms(usual, np.random.default_rng(0), "exact", seen).src == [
        "the",
        "dog",
        MARK,
        "Hund",
        MARK,
    ]
    assert terms(Pair(["paddling"], ["der"], [(0, 0)]), np.random.default_rng(0), "exact") is None


@pytest.mark.parametrize("word", ["Deren", "Wurde", "Keinen", "Seines"])
def test_no_term_is_a_function_word_as_written_or_as_annotated(word):
    """A target word whose lemma is a function word is no term, in either form: the lemma
    is what the mark would carry ("Deren" -> "Der", as a title-cased line reads)."""
    assert target_lemma(word).lower() in TARGET_FUNCTION_WORDS
    pair = Pair(["facing"], [word], [(0, 0)])
    for form in ("lemma", "exact"):
        assert terms(pair, np.random.default_rng(0), form) is None
    assert terms(Pair(["facing"], ["Zugewandt"], [(0, 0)]), np.random.default_rng(0), "lemma")


@settings(max_examples=300, deadline=None)
@given(pairs(), st.integers(0, 2**32 - 1))
def test_placeholders_stand_at_linked_words_numbered_in_source_order(pair, seed):
    """#1 (and #2) on both sides once each, numbered from the source's start as
    nmt.terms.spans numbers spans, the two of a number linked; every other word as it was."""
    new = placeholders(pair, np.random.default_rng(seed))
    if new is None:
        return
    assert_links_index_words(new)
    src_marks = [(s, m) for s, w in enumerate(new.src) for m in re.findall(r"#\d", w)]
    tgt_marks = [(t, m) for t, w in enumerate(new.tgt) for m in re.findall(r"#\d", w)]
    assert [m for _, m in src_marks] in (["#1"], ["#1", "#2"])
    assert sorted(m for _, m in tgt_marks) == [m for _, m in src_marks]
    where = {m: t for t, m in tgt_marks}
    assert all((s, where[m]) in new.links for s, m in src_marks)
    for old, now in ((pair.src, new.src), (pair.tgt, new.tgt)):
        rest = iter(old)
        assert all(w in rest for w in now if "#" not in w)  # in order, none changed


def test_numbers_replace_a_number_word_linked_to_its_translation():
    pair = Pair(["Two", "dogs", "run."], ["Zwei", "Hunde", "rennen."], [(0, 0), (1, 1), (2, 2)])
    new = numbers(pair, np.random.default_rng(0))
    assert new.src[1:] == ["dogs", "run."] and new.tgt[1:] == ["Hunde", "rennen."]
    assert new.src[0] == new.tgt[0] and new.src[0].isdigit()
    assert new.links == pair.links


# --- in the data module, on real pairs ---


def write(path: Path, lines: list[str]) -> str:
    """The file, written once: a rewrite would give it a new mtime, so a new fingerprint,
    and every cached step after it (the links too) would run again."""
    if not path.exists():
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def data_module(
    tmp_path: Path, multi30k_dir: Path, augment: AugmentConfig
) -> TranslationDataModule:
    en = (multi30k_dir / "train.en").read_text(encoding="utf-8").splitlines()[:300]
    de = (multi30k_dir / "train.de").read_text(encoding="utf-8").splitlines()[:300]
    files = {
        "train": {"en": write(tmp_path / "train.en", en), "de": write(tmp_path / "train.de", de)},
        "val": {
            "en": write(tmp_path / "val.en", en[:20]),
            "de": write(tmp_path / "val.de", de[:20]),
        },
    }
    cfg = DataConfig(
        source="files",
        name="augment",
        cache_dir=str(tmp_path / "cache"),
        data_files=files,
        splits={"train": "train", "valid": "val"},
        max_tokens=600,
        word_alignments=True,
        augment=augment,
    )
    tok = TokenizerConfig(name="augment", dir=str(tmp_path / "tok"), vocab_size=600)
    dm = TranslationDataModule(cfg, tok, seed=3)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def epoch_rows(dm: TranslationDataModule, epoch: int, rank: int = 0, world: int = 1) -> dict:
    """index -> (src ids, tgt ids, links) of every row a rank reads in an epoch."""
    dm.trainer = SimpleNamespace(global_rank=rank, world_size=world, current_epoch=epoch)
    loader = dm.train_dataloader()
    loader.batch_sampler.set_epoch(epoch)
    rows = {}
    for batch in loader:
        for item in loader.dataset.__getitems__(batch.indices.tolist()):
            rows[item["index"]] = (
                list(item["src_ids"]),
                list(item["tgt_ids"]),
                list(item["word_align"]),
            )
    return rows


SHARES = AugmentConfig(
    upper=0.2,
    title=0.2,
    unpunctuated=0.3,
    numbers=0.3,
    merged=0.1,
    placeholders=0.1,
    terms=0.2,
    term_pick="uncommon",
)


# the tests of the two data modules below: on one worker, which builds them once
ONE_WORKER = pytest.mark.xdist_group("augmentation")


@pytest.fixture(scope="module")
def plain_and_augmented(multi30k_dir, tmp_path_factory):
    # one folder: the views are drawn per epoch, after the encoding and the links, which
    # the second module finds cached (eflomal runs once)
    folder = tmp_path_factory.mktemp("augment")
    plain = data_module(folder, multi30k_dir, AugmentConfig())
    augmented = data_module(folder, multi30k_dir, SHARES)
    return plain, augmented


@ONE_WORKER
def test_augmented_rows_are_real_pairs_with_true_links(plain_and_augmented):
    _, dm = plain_and_augmented
    tokenizer, starts = dm.tokenizer, dm.tokenizer.word_starts()
    encoded = dm.encoded["train"]
    original = {
        i: (row["src_ids"], row["tgt_ids"], row["word_align"]) for i, row in enumerate(encoded)
    }
    rows = epoch_rows(dm, 0)
    assert sorted(rows) == sorted(original)  # every pair, once
    changed = [i for i in rows if rows[i] != original[i]]
    assert 0.4 * len(rows) < len(changed) < 0.95 * len(rows)
    seen = {"upper": 0, "digits": 0, "unpunctuated": 0, "terms": 0}
    texts = {i: tokenizer.decode([s, t]) for i, (s, t, _) in original.items()}
    for i in changed:
        src_ids, tgt_ids, flat = rows[i]
        src, tgt = tokenizer.decode([src_ids, tgt_ids])
        before = (
            texts[i]
            if i + 1 not in texts
            else [a + " " + b for a, b in zip(texts[i], texts[i + 1], strict=True)]
        )
        assert len(piece_words(src_ids, starts)) == len(src.split())
        assert len(piece_words(tgt_ids, starts)) == len(tgt.split())
        links = list(zip(flat[::2], flat[1::2], strict=True))
        assert all(s < len(src.split()) and t < len(tgt.split()) for s, t in links)
        if src == src.upper():
            assert tgt == tgt.upper()
            seen["upper"] += 1
        # a number put in went in on both sides (one the data had may have no digits in German)
        added = Counter(re.findall(r"\d+", src)) - Counter(re.findall(r"\d+", before[0]))
        if added:
            assert not added - Counter(re.findall(r"\d+", tgt)), (src, tgt)
            seen["digits"] += 1
        seen["unpunctuated"] += src[-1] not in ".!?"
        if MARK in src:  # a term annotated: marks in pairs around a word, the target as it was
            assert MARK not in tgt
            assert re.fullmatch(r"(?:[^%]+ %% [^ %]+ %%)+[^%]*", src), src
            terms = re.findall(r"%% ([^ %]+) %%", src)
            assert not {t.lower() for t in terms} & TARGET_FUNCTION_WORDS, src
            seen["terms"] += 1
    assert all(count > 10 for count in seen.values()), seen


@ONE_WORKER
def test_views_are_drawn_per_epoch_alike_on_every_rank(plain_and_augmented):
    _, dm = plain_and_augmented
    epoch1 = epoch_rows(dm, 1)
    assert epoch_rows(dm, 1) == epoch1  # the same epoch read again (a resumed run)
    assert epoch_rows(dm, 2) != epoch1  # another epoch, other views
    rank0, rank1 = epoch_rows(dm, 1, 0, 2), epoch_rows(dm, 1, 1, 2)
    assert not set(rank0) & set(rank1)
    assert rank0 | rank1 == epoch1


@ONE_WORKER
def test_no_view_gives_the_batches_of_plain_training(plain_and_augmented, caplog):
    plain, _ = plain_and_augmented
    assert not plain.data_cfg.augment.active
    loader = plain.train_dataloader()
    assert (
        loader.dataset.ds._fingerprint
        == plain.encoded["train"].select_columns(["src_ids", "tgt_ids", "word_align"])._fingerprint
    )


@ONE_WORKER
def test_an_epochs_views_are_logged_and_cached(plain_and_augmented, caplog):
    from nmt.data.augmentation import augment_epoch

    _, dm = plain_and_augmented
    args = (dm.encoded["train"], dm.tokenizer, SHARES, dm.seed)
    with caplog.at_level("INFO"):
        first = augment_epoch(*args, epoch=5, max_len=dm.data_cfg.max_len)
    assert re.search(
        r"Epoch 5 views of \d+ training pairs: [\d,]+ merged, [\d,]+ numbers", caplog.text
    )
    again = augment_epoch(*args, epoch=5, max_len=dm.data_cfg.max_len)
    assert again._fingerprint == first._fingerprint
    assert again.cache_files and again.cache_files == first.cache_files
    assert (
        augment_epoch(*args, epoch=6, max_len=dm.data_cfg.max_len)._fingerprint
        != first._fingerprint
    )
    # a new view goes last: the views column's bits and the other views' draws stay
    assert AUGMENT_VIEWS == (
        "merged",
        "numbers",
        "unpunctuated",
        "upper",
        "title",
        "placeholders",
        "terms",
    )
