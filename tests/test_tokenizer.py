"""The sentencepiece tokenizer: lossless round trip, fixed special ids, reuse and retraining."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from nmt.config import TokenizerConfig
from nmt.data.arrow_ids import encode_arrow
from nmt.data.bpe_dropout import BpeDropout
from nmt.files import read_lines
from nmt.tokenizer import THREADED_FROM, Tokenizer, encode_all
from nmt.tokenizer_training import tokenizer_paths, train_or_load
from nmt.vocabulary import EOS_ID


@pytest.mark.parametrize("lang", ["en", "de"])
def test_round_trip_on_every_validation_sentence(
    tiny_tokenizer: Tokenizer, multi30k_dir: Path, lang: str
) -> None:
    sentences = list(read_lines(multi30k_dir / f"val.{lang}"))
    assert len(sentences) == 1014
    assert tiny_tokenizer.decode(tiny_tokenizer.encode(sentences)) == sentences


def test_round_trip_of_unseen_characters_and_spaces(tiny_tokenizer: Tokenizer) -> None:
    texts = ["  two  spaces ", "Ökonomie ≠ 経済 🙂", "tab\there", ""]
    assert tiny_tokenizer.decode(tiny_tokenizer.encode(texts)) == texts


ODD_TEXTS = ["", " ", "  two  spaces ", " lead", "trail ", "tab\there", "\tx", "▁ a▁b", "経済 🙂 x"]
NUL_TEXTS = ["nul\0here", "x\0\0y", "\0"]  # kept by the identity normalisation


def test_word_cache_gives_sentencepieces_own_ids(
    tiny_tokenizer: Tokenizer, multi30k_dir: Path
) -> None:
    texts = list(read_lines(multi30k_dir / "val.en")) + list(read_lines(multi30k_dir / "val.de"))
    texts += ODD_TEXTS
    fresh = Tokenizer(tiny_tokenizer.model_bytes)
    assert fresh.words_split_exactly
    assert fresh.encode(texts) == fresh.sp.encode(texts, out_type=int)
    assert "Hund" in fresh.words.ids and "  two  spaces " not in fresh.words.ids
    assert fresh.encode(texts[::-1]) == fresh.sp.encode(texts[::-1], out_type=int)  # cache hits


@pytest.mark.parametrize("size", [0, 1, THREADED_FROM - 1, THREADED_FROM])
def test_short_lists_one_by_one_give_what_one_batch_call_gives(
    tiny_tokenizer: Tokenizer, multi30k_dir: Path, size: int
) -> None:
    """Below THREADED_FROM, texts and id rows go through sentencepiece one by one."""
    texts = (ODD_TEXTS + list(read_lines(multi30k_dir / "val.de")))[:size]
    fresh = Tokenizer(tiny_tokenizer.model_bytes)
    ids = fresh.encode(texts)
    assert ids == fresh.sp.encode(texts, out_type=int)
    rows = [[*row, EOS_ID] for row in ids] + [[], [EOS_ID]]  # ended, and empty
    assert fresh.decode(rows) == fresh.sp.decode([row[:-1] for row in rows[:-2]] + [[], []])
    assert encode_all(fresh.sp, texts, str) == fresh.sp.encode(texts, out_type=str)


def test_arrow_encoding_gives_sentencepieces_own_ids(
    tiny_tokenizer: Tokenizer, multi30k_dir: Path
) -> None:
    regular = list(read_lines(multi30k_dir / "val.en")) + list(read_lines(multi30k_dir / "val.de"))
    regular += ["", "tab\there", "▁ a▁b", "経済 🙂 x"]  # single spaces only: split into words
    tokenizer = Tokenizer(tiny_tokenizer.model_bytes)
    for texts in (regular, regular[:7] + ODD_TEXTS, []):  # ODD_TEXTS are encoded whole
        chunked = pa.chunked_array(
            [pa.array(texts[:5], pa.string()), pa.array(texts[5:], pa.string())]
        )
        for column in (pa.array(texts, pa.string()), pa.array(texts, pa.large_string()), chunked):
            ids = encode_arrow(tokenizer, column, np.uint16)
            assert ids.type == pa.list_(pa.uint16())
            assert ids.to_pylist() == tokenizer.sp.encode(texts, out_type=int)
    assert "Hund" in tokenizer.words.ids


def test_bpe_dropout_samples_finer_pieces_of_the_same_text(
    tiny_tokenizer: Tokenizer, multi30k_dir: Path
) -> None:
    texts = list(islice(read_lines(multi30k_dir / "val.de"), 200)) + ODD_TEXTS + NUL_TEXTS
    plain, sampler = tiny_tokenizer.encode(texts), BpeDropout(tiny_tokenizer)
    assert sampler.sample(texts, 0.0, seed=1) == plain  # our merge loop is BPE's own
    sampled = sampler.sample(texts, 0.1, seed=1)
    assert tiny_tokenizer.decode(sampled) == tiny_tokenizer.decode(plain)  # == texts but for ▁
    assert sampler.sample(texts, 0.1, seed=1) == sampled  # reproducible
    assert sampler.sample(texts, 0.1, seed=2) != sampled
    changed = sum(s != p for s, p in zip(sampled, plain, strict=True))
    assert 100 < changed < len(texts)  # most sentences, not all (169-182 of 209, seeds 1-10)
    assert sum(map(len, sampled)) > sum(map(len, plain))
    # Every merge skipped: single characters, each a piece of its own.
    characters = sampler.sample(texts[:20], 1.0, seed=1)
    pieces = [tiny_tokenizer.sp.id_to_piece(i).lstrip("▁") for ids in characters for i in ids]
    assert all(len(piece) <= 1 for piece in pieces)


def test_bpe_dropout_draws_the_same_pieces_in_another_process(
    tiny_tokenizer: Tokenizer, multi30k_dir: Path, tmp_path: Path
) -> None:
    """What makes a resumed run or a spawned worker read the same pieces. sentencepiece's own
    sampler failed this: its generator is salted per process."""
    texts = list(islice(read_lines(multi30k_dir / "val.en"), 100)) + ODD_TEXTS
    model = tmp_path / "tiny.model"
    model.write_bytes(tiny_tokenizer.model_bytes)
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    script = (
        "import json; from nmt.tokenizer import Tokenizer; "
        "from nmt.data.bpe_dropout import BpeDropout; "
        f"texts = json.load(open({str(tmp_path / 'texts.json')!r})); "
        f"sampler = BpeDropout(Tokenizer.from_file({str(model)!r})); "
        "print(json.dumps(sampler.sample(texts, 0.1, seed=7)))"
    )
    other = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(other) == BpeDropout(tiny_tokenizer).sample(texts, 0.1, seed=7)


def test_pieces_across_spaces_turn_the_word_cache_off(multi30k_dir: Path, tmp_path: Path) -> None:
    import sentencepiece as spm

    texts = list(islice(read_lines(multi30k_dir / "train.en"), 2000))
    model = tmp_path / "across.model"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_prefix=str(model.with_suffix("")),
        vocab_size=800,
        model_type="bpe",
        split_by_whitespace=False,  # pieces such as "▁a▁dog" may form
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        minloglevel=2,
    )
    tokenizer = Tokenizer.from_file(model)
    assert not tokenizer.words_split_exactly
    sample = texts[:200] + ODD_TEXTS
    assert tokenizer.encode(sample) == tokenizer.sp.encode(sample, out_type=int)
    assert tokenizer.encode(ODD_TEXTS) == tokenizer.sp.encode(ODD_TEXTS, out_type=int)
    # BPE-dropout's merge loop over whole texts, without byte fallback: runs of characters
    # outside the vocabulary become one unknown id each, as in sentencepiece.
    sample += NUL_TEXTS
    assert BpeDropout(tokenizer).sample(sample, 0.0, seed=0) == tokenizer.sp.encode(
        sample, out_type=int
    )
    ids = encode_arrow(tokenizer, pa.array(texts[:200]), np.int32)
    assert ids.to_pylist() == tokenizer.sp.encode(texts[:200], out_type=int)


def test_special_ids(tiny_tokenizer: Tokenizer) -> None:
    tok = tiny_tokenizer
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2, 3)
    assert tok.pieces([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    ids = tok.encode(["A dog runs."])[0]
    assert min(ids) > tok.eos_id  # no BOS/EOS added, no padding
    assert tok.decode([[tok.bos_id, *ids, tok.eos_id, tok.pad_id]]) == ["A dog runs."]


def test_a_word_ends_before_a_words_start_punctuation_or_eos_not_a_hyphen(
    tiny_tokenizer: Tokenizer,
) -> None:
    """word_ends: what may follow a whole word (a term's end, a prefix that ends a word)."""
    tok = tiny_tokenizer
    ends = tok.word_ends
    by_piece = dict(zip(tok.vocabulary_pieces, ends, strict=True))
    assert ends[tok.eos_id] and not ends[tok.pad_id]
    assert by_piece["."] and by_piece[","] and not by_piece["-"]
    starts = [p for p in tok.vocabulary_pieces if p.startswith("\u2581")]
    goes_on = [p for p in tok.vocabulary_pieces if p[:1].isalpha()]
    assert starts and goes_on
    assert all(by_piece[p] for p in starts) and not any(by_piece[p] for p in goes_on)


def test_pickles_as_model_bytes(tiny_tokenizer: Tokenizer) -> None:
    """Dataset.map hashes and ships the tokenizer by pickling it."""
    clone = pickle.loads(pickle.dumps(tiny_tokenizer))
    assert clone.encode(["Ein Hund."]) == tiny_tokenizer.encode(["Ein Hund."])


@pytest.fixture
def small_corpus(multi30k_dir: Path) -> list[str]:
    return [*islice(read_lines(multi30k_dir / "train.en"), 1000)] + [
        *islice(read_lines(multi30k_dir / "train.de"), 1000)
    ]


def test_reused_when_settings_and_data_match(small_corpus: list[str], tmp_path: Path) -> None:
    cfg = TokenizerConfig(name="small", dir=str(tmp_path), vocab_size=400)
    first = train_or_load(cfg, small_corpus, "multi30k train[:1000]")
    model_path = tokenizer_paths(cfg)[0]
    mtime = model_path.stat().st_mtime_ns
    again = train_or_load(cfg, small_corpus, "multi30k train[:1000]")
    assert model_path.stat().st_mtime_ns == mtime
    assert again.model_bytes == first.model_bytes


@pytest.mark.parametrize("change", ["settings", "data"])
def test_retrained_when_settings_or_data_change(
    small_corpus: list[str], tmp_path: Path, change: str
) -> None:
    cfg = TokenizerConfig(name="small", dir=str(tmp_path), vocab_size=400)
    train_or_load(cfg, small_corpus, "multi30k train[:1000]")
    model_path = tokenizer_paths(cfg)[0]
    mtime = model_path.stat().st_mtime_ns
    if change == "settings":
        cfg = TokenizerConfig(name="small", dir=str(tmp_path), vocab_size=450)
    else:
        small_corpus = small_corpus[:-100]
    retrained = train_or_load(cfg, small_corpus, "multi30k train[:1000]")
    assert model_path.stat().st_mtime_ns != mtime
    assert retrained.vocab_size == cfg.vocab_size
