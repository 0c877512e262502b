"""Data pipeline on real Multi30k text: sources, encoding, cleaning, batching, collation."""

from __future__ import annotations

import gzip
import json
import logging
from itertools import islice
from pathlib import Path
from types import SimpleNamespace

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import compose
from lightning.fabric.utilities.data import _set_sampler_epoch
from torch.utils.data import DataLoader

from nmt.config import DataConfig, TokenizerConfig
from nmt.data import sources
from nmt.data.batching import TokenBatchSampler, collate
from nmt.data.datamodule import TranslationDataModule
from nmt.data.encoding import clean_train, encode_split, token_lengths
from nmt.data.sources import load_splits
from nmt.files import read_lines
from nmt.tokenizer import Tokenizer
from nmt.vocabulary import BOS_ID, EOS_ID, PAD_ID

SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
SUBSET = {"train": 300, "val": 100, "test_2016_flickr": 100}  # lines per split in small copies


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8", newline="\n")
    return path


def pairs(ds: datasets.Dataset) -> list[tuple[str, str]]:
    return list(zip(ds["src"][:], ds["tgt"][:], strict=True))


def data_config(cache: Path, **fields) -> DataConfig:
    return DataConfig(**{"name": "test", "cache_dir": str(cache), **fields})


@pytest.fixture(scope="module")
def subset(multi30k_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The first lines of each Multi30k split: split -> {lang: lines}, also written as
    `{split}.{lang}` text files in subset["dir"]."""
    folder = tmp_path_factory.mktemp("multi30k_subset")
    lines = {}
    for split, n in SUBSET.items():
        lines[split] = {
            lang: list(islice(read_lines(multi30k_dir / f"{split}.{lang}"), n))
            for lang in ("en", "de")
        }
        for lang, text in lines[split].items():
            write_lines(folder / f"{split}.{lang}", text)
    return {"dir": folder, **lines}


# --- sources ---


def test_read_lines_breaks_only_at_newline(tmp_path: Path) -> None:
    lines = ["a\rb", "c\x1cd\u2028e\x85f", "", "  g  "]
    path = tmp_path / "x.txt"
    path.write_text("\n".join(lines), encoding="utf-8", newline="\n")  # no final newline
    assert list(read_lines(path)) == lines
    write_lines(path, lines)
    assert list(read_lines(path)) == lines


def test_multi30k_local_dir(multi30k_dir: Path, tmp_path: Path, monkeypatch) -> None:
    splits = load_splits(data_config(tmp_path, source="multi30k", dir=str(multi30k_dir)))
    assert {role: len(ds) for role, ds in splits.items()} == {
        "train": 29000,
        "valid": 1014,
        "test": 1000,
    }
    en, de = read_lines(multi30k_dir / "val.en"), read_lines(multi30k_dir / "val.de")
    assert pairs(splits["valid"]) == list(zip(en, de, strict=True))
    monkeypatch.setenv("NMT_DATA_DIR", str(multi30k_dir))
    from_env = load_splits(data_config(tmp_path, source="multi30k"))
    assert pairs(from_env["test"]) == pairs(splits["test"])


def write_translation_rows(subset: dict, folder: Path) -> tuple[dict, dict]:
    """The subset as json lines and as parquet, rows {"translation": {"de": .., "en": ..}}."""
    json_files, parquet_files = {}, {}
    for split in SUBSET:
        rows = [
            {"translation": {"de": de, "en": en}}
            for en, de in zip(subset[split]["en"], subset[split]["de"], strict=True)
        ]
        json_files[split] = str(
            write_lines(folder / f"{split}.jsonl", [json.dumps(r) for r in rows])
        )
        parquet_files[split] = str(folder / f"{split}.parquet")
        pq.write_table(pa.Table.from_pylist(rows), parquet_files[split])
    return json_files, parquet_files


def write_gz(subset: dict, folder: Path) -> str:
    """The subset as {split}.{lang}.gz files; returns their folder as a file:// URL."""
    folder.mkdir()
    for split in SUBSET:
        for lang in ("en", "de"):
            text = "".join(f"{line}\n" for line in subset[split][lang])
            (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    return folder.as_uri()


@pytest.mark.parametrize("src_lang, tgt_lang", [("en", "de"), ("de", "en")])
def test_every_source_gives_the_same_pairs(
    subset: dict, tmp_path: Path, monkeypatch, src_lang: str, tgt_lang: str
) -> None:
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)
    monkeypatch.setattr(sources, "BESIDE_PROJECT", tmp_path / "no-shared")  # url: downloaded
    json_files, parquet_files = write_translation_rows(subset, tmp_path)
    text_files = {
        split: {lang: str(subset["dir"] / f"{split}.{lang}") for lang in ("en", "de")}
        for split in SUBSET
    }
    common = {"splits": SPLITS, "src_lang": src_lang, "tgt_lang": tgt_lang}
    configs = {
        "local": data_config(tmp_path / "c1", source="multi30k", dir=str(subset["dir"]), **common),
        "url": data_config(
            tmp_path / "c2", source="multi30k", url=write_gz(subset, tmp_path / "gz"), **common
        ),
        "files": data_config(tmp_path / "c3", source="files", data_files=text_files, **common),
        "json": data_config(
            tmp_path / "c4", source="hub", path="json", data_files=json_files, **common
        ),
        "parquet": data_config(
            tmp_path / "c5", source="hub", path="parquet", data_files=parquet_files, **common
        ),
    }
    expected = {
        role: list(zip(subset[split][src_lang], subset[split][tgt_lang], strict=True))
        for role, split in SPLITS.items()
    }
    for name, cfg in configs.items():
        splits = load_splits(cfg)
        assert {role: pairs(ds) for role, ds in splits.items()} == expected, name
        assert splits["train"].features == datasets.Features(
            {"src": datasets.Value("string"), "tgt": datasets.Value("string")}
        ), name


HUB_SPLITS = {"train": "train", "val": "validation", "test_2016_flickr": "test"}


def en_de(subset: dict, split: str) -> list[tuple[str, str]]:
    return list(zip(subset[split]["en"], subset[split]["de"], strict=True))


def translation_parquet(subset: dict, path: Path, split: str, languages: list[str]) -> None:
    """A split as `datasets` writes a Translation-typed parquet file (features in metadata)."""
    rows = [
        {"translation": dict(zip(("en", "de"), pair, strict=True))}
        for pair in zip(subset[split]["en"], subset[split]["de"], strict=True)
    ]
    features = datasets.Features({"translation": datasets.Translation(languages=languages)})
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows, features=features).to_parquet(str(path))


def test_wmt14_loads_through_its_repository_configs(
    subset: dict, tmp_path: Path, monkeypatch
) -> None:
    """wmt/wmt14 as the hub keeps it (parquet since its conversion): a README whose `configs`
    map de-en/{split}-NNNNN-of-NNNNN.parquet to splits, Translation(de, en) rows. Loaded by
    data=wmt14 as shipped, with only its path pointed at this local copy."""
    repo = tmp_path / "wmt14"
    for split, hub_split in HUB_SPLITS.items():
        translation_parquet(
            subset, repo / f"de-en/{hub_split}-00000-of-00001.parquet", split, ["de", "en"]
        )
    configs = "".join(f"  - split: {s}\n    path: de-en/{s}-*\n" for s in HUB_SPLITS.values())
    (repo / "README.md").write_text(
        f"---\nconfigs:\n- config_name: de-en\n  data_files:\n{configs}---\n"
    )
    cfg = compose(
        "train",
        [
            "experiment=multi30k_cpu",
            "data=wmt14",
            f"data.path={repo}",
            f"data.cache_dir={tmp_path / 'c'}",
        ],
    )
    assert cfg.data.config_name == "de-en" and cfg.data.splits["valid"] == "validation"
    splits = load_splits(cfg.data)
    for role, split in SPLITS.items():
        assert pairs(splits[role]) == list(
            zip(subset[split]["en"], subset[split]["de"], strict=True)
        )


def test_iwslt2017_loads_from_the_parquet_conversion_layout(subset: dict, tmp_path: Path) -> None:
    """data=iwslt2017 reads the hub's parquet conversion of IWSLT/iwslt2017
    (iwslt2017-en-de/{split}/0000.parquet, Translation(en, de)); here a local copy."""
    shipped = compose("train", ["experiment=multi30k_cpu", "data=iwslt2017"]).data
    assert shipped.path == "parquet"
    branch = "hf://datasets/IWSLT/iwslt2017@refs/convert/parquet/iwslt2017-en-de"
    assert shipped.data_files == {s: f"{branch}/{s}/*.parquet" for s in HUB_SPLITS.values()}
    local = tmp_path / "iwslt2017-en-de"
    overrides = ["experiment=multi30k_cpu", "data=iwslt2017", f"data.cache_dir={tmp_path / 'c'}"]
    for split, hub_split in HUB_SPLITS.items():
        translation_parquet(subset, local / hub_split / "0000.parquet", split, ["en", "de"])
        overrides.append(f"data.data_files.{hub_split}={local / hub_split}/*.parquet")
    splits = load_splits(compose("train", overrides).data)
    for role, split in SPLITS.items():
        assert pairs(splits[role]) == list(
            zip(subset[split]["en"], subset[split]["de"], strict=True)
        )


def test_tokenizer_text_streams_from_arrow_as_a_seeded_sample(subset: dict, tmp_path: Path) -> None:
    from nmt.data.encoding import training_sentences
    from nmt.data.sources import load_split

    cfg = data_config(tmp_path / "c", source="multi30k", dir=str(subset["dir"]), splits=SPLITS)
    train = load_split(cfg, "train")
    everything = subset["train"]["en"] + subset["train"]["de"]
    assert list(training_sentences(train, 10_000, seed=1)) == everything  # small: all, in order
    sample = list(training_sentences(train, 100, seed=1))
    assert len(sample) == 100 and list(training_sentences(train, 100, seed=1)) == sample
    assert list(training_sentences(train, 100, seed=2)) != sample
    positions = [everything.index(line) for line in sample]
    assert positions == sorted(positions)  # corpus order, both sides drawn
    assert min(positions) < 300 <= max(positions)


def test_a_tokenizer_is_reused_by_fingerprint_without_reading_the_text(
    subset: dict, tmp_path: Path
) -> None:
    from nmt.data.encoding import tokenizer_for
    from nmt.data.sources import load_split
    from nmt.tokenizer_training import train_or_load

    cfg = data_config(tmp_path / "c", source="multi30k", dir=str(subset["dir"]), splits=SPLITS)
    tok_cfg = TokenizerConfig(name="stream", dir=str(tmp_path / "tok"), vocab_size=500)
    train = load_split(cfg, "train")
    first = tokenizer_for(cfg, tok_cfg, train)

    def unread():
        raise AssertionError("the text was read")

    again = train_or_load(tok_cfg, unread, "same data", fingerprint=train._fingerprint)
    assert again.model_bytes == first.model_bytes
    texts = subset["train"]["en"] + subset["train"]["de"]  # another fingerprint, same text
    assert train_or_load(tok_cfg, texts, "x", fingerprint="other").model_bytes == first.model_bytes
    assert list(training_sentences_of(train)) == texts


def test_training_a_tokenizer_never_holds_the_corpus_as_python_strings(
    multi30k_dir: Path, tmp_path: Path
) -> None:
    """150k pairs (300k sentences, ~20 MB of text) and a 3,000-sentence sample: the Python
    heap peaks far below the corpus (the old code built a list of all 300k sentences)."""
    import tracemalloc

    from nmt.data.encoding import tokenizer_for
    from nmt.data.sources import load_split

    files = {}
    for lang in ("en", "de"):
        lines = list(islice(read_lines(multi30k_dir / f"train.{lang}"), 30_000)) * 5
        files[lang] = str(write_lines(tmp_path / f"big.{lang}", lines))
    corpus_bytes = sum(Path(f).stat().st_size for f in files.values())
    cfg = data_config(
        tmp_path / "c", source="files", data_files={"big": files}, splits={"train": "big"}
    )
    train = load_split(cfg, "train")
    tok_cfg = TokenizerConfig(
        name="big", dir=str(tmp_path / "tok"), vocab_size=500, input_sentence_size=3000
    )
    tracemalloc.start()
    try:
        tokenizer_for(cfg, tok_cfg, train)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert corpus_bytes > 15e6 and peak < corpus_bytes / 5, (peak, corpus_bytes)


def training_sentences_of(train):
    from nmt.data.encoding import training_sentences

    return training_sentences(train, 10**9, seed=0)


def test_url_is_downloaded_once(subset: dict, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)
    monkeypatch.setattr(sources, "BESIDE_PROJECT", tmp_path / "no-shared")  # so: downloaded
    url = write_gz(subset, tmp_path / "gz")
    cfg = data_config(tmp_path / "cache", source="multi30k", url=url, splits={"valid": "val"})
    first = pairs(load_splits(cfg)["valid"])
    for gz in (tmp_path / "gz").iterdir():
        gz.unlink()  # a second download would now fail
    assert pairs(load_splits(cfg)["valid"]) == first
    assert list((tmp_path / "cache" / "downloads").glob("*/val.en"))


def test_unequal_line_counts_name_both_files(subset: dict, tmp_path: Path) -> None:
    en = write_lines(tmp_path / "train.en", subset["train"]["en"][:10])
    de = write_lines(tmp_path / "train.de", subset["train"]["de"][:9])
    cfg = data_config(
        tmp_path / "cache", source="multi30k", dir=str(tmp_path), splits={"train": "train"}
    )
    with pytest.raises(ValueError) as error:
        load_splits(cfg)
    message = str(error.value)
    assert str(en) in message and str(de) in message
    assert "10" in message and "9" in message


def test_edited_file_is_read_again(subset: dict, tmp_path: Path) -> None:
    """The Arrow cache is keyed on the files' size and mtime, not only their paths."""
    write_lines(tmp_path / "val.en", subset["val"]["en"][:5])
    write_lines(tmp_path / "val.de", subset["val"]["de"][:5])
    cfg = data_config(
        tmp_path / "cache", source="multi30k", dir=str(tmp_path), splits={"valid": "val"}
    )
    assert len(load_splits(cfg)["valid"]) == 5
    write_lines(tmp_path / "val.en", subset["val"]["en"][:6])
    write_lines(tmp_path / "val.de", subset["val"]["de"][:6])
    assert pairs(load_splits(cfg)["valid"])[-1] == (subset["val"]["en"][5], subset["val"]["de"][5])


def test_max_train_pairs_keeps_the_first(subset: dict, tmp_path: Path) -> None:
    cfg = data_config(tmp_path, source="multi30k", dir=str(subset["dir"]), max_train_pairs=7)
    splits = load_splits(cfg)
    assert pairs(splits["train"]) == list(
        zip(subset["train"]["en"][:7], subset["train"]["de"][:7], strict=True)
    )
    assert len(splits["valid"]) == SUBSET["val"]


# --- encoding and cleaning ---


def test_encode_adds_compact_ids_without_specials(
    subset: dict, tiny_tokenizer: Tokenizer, tmp_path: Path
) -> None:
    raw = load_splits(data_config(tmp_path, source="multi30k", dir=str(subset["dir"])))["valid"]
    ds = encode_split(raw, tiny_tokenizer, num_proc=1)
    assert ds.features["src_ids"] == datasets.List(datasets.Value("uint16"))
    assert ds["src_ids"][:] == tiny_tokenizer.encode(subset["val"]["en"])
    assert ds["tgt_ids"][:] == tiny_tokenizer.encode(subset["val"]["de"])
    src_lens, tgt_lens = token_lengths(ds)
    assert src_lens.tolist() == [len(ids) for ids in ds["src_ids"][:]]
    assert tgt_lens.tolist() == [len(ids) for ids in ds["tgt_ids"][:]]


def test_cleaning_drops_the_right_pairs_and_logs_why(
    subset: dict, tiny_tokenizer: Tokenizer, caplog
) -> None:
    good = list(zip(subset["train"]["en"][:5], subset["train"]["de"][:5], strict=True))
    long = ("A dog runs. " * 14, "Ein Hund rennt. " * 10)  # too long on the source side only
    skewed = ("Dog.", "Ein großer brauner Hund rennt schnell über die grüne Wiese im Park.")
    bad = [("", "Ein Hund."), ("A dog.", " \t "), long, skewed]
    n_long_src, n_long_tgt, n_short, n_wide = (
        len(ids) for ids in tiny_tokenizer.encode([*long, *skewed])
    )
    assert n_long_src > 50 >= n_long_tgt and n_long_src <= 3 * n_long_tgt
    assert n_wide <= 50 and n_wide > 3 * n_short
    rows = good[:2] + bad + good[2:]
    raw = datasets.Dataset.from_dict({"src": [s for s, _ in rows], "tgt": [t for _, t in rows]})
    encoded = encode_split(raw, tiny_tokenizer, num_proc=1)
    with caplog.at_level(logging.INFO, logger="nmt.data.encoding"):
        cleaned = clean_train(encoded, max_len=50, max_len_ratio=3.0)
    assert pairs(cleaned) == good
    assert cleaned["src_ids"][:] == tiny_tokenizer.encode([s for s, _ in good])
    src_lens, tgt_lens = token_lengths(cleaned)  # read through the index mapping
    assert src_lens.tolist() == [len(ids) for ids in cleaned["src_ids"][:]]
    assert tgt_lens.tolist() == [len(ids) for ids in cleaned["tgt_ids"][:]]
    assert (
        "kept 5 of 9 pairs; dropped 2 with an empty side, 1 longer than 50 tokens, "
        "1 with a length ratio above 3"
    ) in caplog.text


# --- batching ---


@pytest.fixture(scope="module")
def train_lengths(multi30k_dir: Path, tiny_tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(29000,) source and target positions of every Multi30k training pair (+1 for EOS/BOS)."""
    return tuple(
        np.array(
            [len(ids) + 1 for ids in tiny_tokenizer.encode(list(read_lines(multi30k_dir / f)))]
        )
        for f in ("train.en", "train.de")
    )


def test_no_batch_exceeds_the_budget_and_each_pair_comes_once(train_lengths) -> None:
    src, tgt = train_lengths
    sampler = TokenBatchSampler(src, tgt, max_tokens=500, shuffle=True, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    for batch in batches:
        assert len(batch) * src[batch].max() <= 500 and len(batch) * tgt[batch].max() <= 500
    assert sorted(i for batch in batches for i in batch) == list(range(len(src)))
    assert np.mean([len(b) * max(src[b].max(), tgt[b].max()) for b in batches]) > 400  # packed


@pytest.mark.parametrize("num_replicas", [2, 3, 7])
def test_ranks_get_disjoint_equal_shares_of_every_pair(train_lengths, num_replicas: int) -> None:
    src, tgt = train_lengths
    shares = []
    for rank in range(num_replicas):
        sampler = TokenBatchSampler(
            src, tgt, 700, True, seed=5, num_replicas=num_replicas, rank=rank
        )
        sampler.set_epoch(2)
        shares.append(list(sampler))
        assert len(shares[-1]) == len(sampler)
    assert len({len(share) for share in shares}) == 1
    indices = [i for share in shares for batch in share for i in batch]
    assert sorted(indices) == list(range(len(src)))


def test_too_few_batches_are_split_for_the_ranks() -> None:
    lens = np.full(5, 4)
    shares = [
        list(TokenBatchSampler(lens, lens, 1000, True, num_replicas=4, rank=r)) for r in range(4)
    ]
    assert [len(share) for share in shares] == [1, 1, 1, 1]
    assert sorted(i for share in shares for i in share[0]) == list(range(5))


def test_order_depends_on_seed_and_epoch_only(train_lengths) -> None:
    src, tgt = train_lengths

    def epoch(seed: int, number: int) -> list[list[int]]:
        sampler = TokenBatchSampler(src, tgt, 600, True, seed=seed)
        sampler.set_epoch(number)
        return list(sampler)

    assert epoch(1, 0) == epoch(1, 0)
    assert epoch(1, 1) != epoch(1, 0)
    assert epoch(2, 0) != epoch(1, 0)
    # a different epoch also regroups pairs of equal length, not only the batch order
    assert {tuple(sorted(b)) for b in epoch(1, 1)} != {tuple(sorted(b)) for b in epoch(1, 0)}


@pytest.mark.parametrize("rank", [0, 1])
def test_skip_resumes_exactly_once(train_lengths, rank: int) -> None:
    src, tgt = train_lengths
    sampler = TokenBatchSampler(src, tgt, 600, True, seed=3, num_replicas=2, rank=rank)
    sampler.set_epoch(4)
    full = list(sampler)
    sampler.set_epoch(4)
    sampler.skip(17)
    assert len(sampler) == len(full)
    assert list(sampler) == full[17:]
    assert list(sampler) == full  # the skip applied to one iteration only


def test_lightning_reaches_set_epoch(train_lengths) -> None:
    """Lightning calls set_epoch on `dataloader.batch_sampler.sampler`."""
    src, tgt = train_lengths
    sampler = TokenBatchSampler(src, tgt, 600, True)
    loader = DataLoader(range(len(src)), batch_sampler=sampler)
    _set_sampler_epoch(loader, 6)
    assert sampler.epoch == 6


def test_evaluation_batches_are_sorted_and_complete(train_lengths) -> None:
    src, tgt = train_lengths
    sampler = TokenBatchSampler(src, tgt, 2000, shuffle=False)
    order = [i for batch in sampler for i in batch]
    assert sorted(order) == list(range(len(src)))
    assert np.all(np.diff(src[order]) >= 0)
    sampler.set_epoch(3)
    assert [i for batch in sampler for i in batch] == order


def test_a_pair_over_budget_gets_its_own_batch(caplog) -> None:
    src, tgt = np.array([5, 50, 5, 5, 6]), np.array([5, 8, 5, 300, 6])
    with caplog.at_level(logging.WARNING):
        batches = list(TokenBatchSampler(src, tgt, 40, shuffle=False))
    assert [1] in batches and [3] in batches
    assert sorted(i for batch in batches for i in batch) == [0, 1, 2, 3, 4]
    assert "2 pairs are longer than max_tokens=40" in caplog.text


# --- collation ---


def test_collate_places_bos_eos_and_padding() -> None:
    batch = collate(
        [
            {"index": 7, "src_ids": [10, 11], "tgt_ids": [20]},
            {"index": 2, "src_ids": [12], "tgt_ids": [21, 22, 23]},
        ]
    )
    eos, bos, pad = EOS_ID, BOS_ID, PAD_ID
    assert batch.src.tolist() == [[10, 11, eos], [12, eos, pad]]
    assert batch.tgt_in.tolist() == [[bos, 20, pad, pad], [bos, 21, 22, 23]]
    assert batch.tgt_out.tolist() == [[20, eos, pad, pad], [21, 22, 23, eos]]
    assert batch.indices.tolist() == [7, 2]
    assert batch.num_tgt_tokens == 6
    assert batch.src.dtype == batch.tgt_in.dtype == batch.indices.dtype == torch.long


# --- the data module ---


def test_data_module_end_to_end(subset: dict, tmp_path: Path, caplog) -> None:
    """Train pairs are cleaned and token-batched; validation keeps every line, even an empty one,
    and batch.indices put outputs back in line order."""
    train_en, train_de = subset["train"]["en"] + [""], subset["train"]["de"] + ["Leer."]
    val_en = subset["val"]["en"][:20] + [""] + subset["val"]["en"][20:40]
    val_de = subset["val"]["de"][:20] + [""] + subset["val"]["de"][20:40]
    files = {}
    for split, (en, de) in {"train": (train_en, train_de), "val": (val_en, val_de)}.items():
        files[split] = {
            "en": str(write_lines(tmp_path / f"{split}.en", en)),
            "de": str(write_lines(tmp_path / f"{split}.de", de)),
        }
    data_cfg = data_config(
        tmp_path / "cache",
        source="files",
        data_files=files,
        splits={"train": "train", "valid": "val"},
        max_tokens=300,
    )
    tok_cfg = TokenizerConfig(name="dm", dir=str(tmp_path / "tok"), vocab_size=400)
    dm = TranslationDataModule(data_cfg, tok_cfg, seed=0)
    with caplog.at_level(logging.INFO):
        dm.prepare_data()
        dm.setup("fit")
    assert "dropped 1 with an empty side" in caplog.text

    train = list(dm.train_dataloader())
    assert sum(len(b.indices) for b in train) == len(train_en) - 1
    assert all(b.src.numel() <= 300 and b.tgt_in.numel() <= 300 for b in train)
    dm.trainer = SimpleNamespace(global_rank=1, world_size=2, current_epoch=0)  # 2 processes
    sampler = dm.train_dataloader().batch_sampler
    assert (sampler.rank, sampler.num_replicas, sampler.shuffle) == (1, 2, True)

    assert pairs(dm.splits["valid"]) == list(zip(val_en, val_de, strict=True))
    restored = [""] * len(val_en)
    for batch in dm.val_dataloader():
        for row, index in zip(batch.src.tolist(), batch.indices.tolist(), strict=True):
            restored[index] = dm.tokenizer.decode([row])[0]
    assert restored == val_en


def _batches(loader: DataLoader, epoch: int) -> list[tuple[list[int], list[list[int]]]]:
    """One epoch of a loader: each batch's indices and unpadded target ids (EOS included)."""
    _set_sampler_epoch(loader, epoch)
    return [
        (b.indices.tolist(), [[i for i in row if i != PAD_ID] for row in b.tgt_out.tolist()])
        for b in loader
    ]


def test_bpe_dropout_gives_each_epoch_new_pieces_and_a_resume_the_same(
    subset: dict, tmp_path: Path
) -> None:
    data_cfg = data_config(
        tmp_path / "cache", source="multi30k", dir=str(subset["dir"]), bpe_dropout=0.1
    )
    tok_cfg = TokenizerConfig(name="bpe_dropout", dir=str(tmp_path / "tok"), vocab_size=400)
    dm = TranslationDataModule(data_cfg, tok_cfg, seed=0)
    dm.setup("fit")
    loader = dm.train_dataloader()
    epoch_1 = _batches(loader, 1)
    assert _batches(loader, 1) == epoch_1  # read again: the same pieces
    epoch_2 = _batches(loader, 2)
    assert [i for i, _ in epoch_2] != [i for i, _ in epoch_1]  # the batches are reshuffled
    in_a_worker = DataLoader(
        loader.dataset, batch_sampler=loader.batch_sampler, collate_fn=collate, num_workers=1
    )
    assert _batches(in_a_worker, 2) == epoch_2
    plain, sampled = {}, {}
    for batches, ids in ((epoch_1, plain), (epoch_2, sampled)):
        for indices, rows in batches:
            ids.update(zip(indices, rows, strict=True))
    assert sorted(plain) == sorted(sampled) == list(range(len(subset["train"]["de"])))
    different = sum(plain[i] != sampled[i] for i in plain)
    assert different > len(plain) // 2  # most sentences have a merge skipped in one epoch
    texts = dm.tokenizer.decode([sampled[i] for i in range(len(sampled))])
    assert texts == subset["train"]["de"]
    assert sum(map(len, sampled.values())) > sum(
        len(ids) + 1 for ids in dm.tokenizer.encode(subset["train"]["de"])
    )

    dm.load_state_dict({"epoch": 1, "batches_done": 2})  # what a resumed Trainer restores
    assert _batches(dm.train_dataloader(), 1) == epoch_1[2:]
    for batch in dm.val_dataloader():  # validation is never sampled
        src = [[i for i in row if i > EOS_ID] for row in batch.src.tolist()]
        lines = [subset["val"]["en"][i] for i in batch.indices.tolist()]
        assert src == dm.tokenizer.encode(lines)


def test_bidirectional_epochs_read_every_pair_both_ways_then_forward_only(
    subset: dict, tmp_path: Path
) -> None:
    """Epochs before data.bidirectional_epochs read each training pair as it is (rows 0..N-1)
    and swapped (rows N..2N-1); later epochs read the pairs once, as they are."""
    data_cfg = data_config(
        tmp_path / "cache", source="multi30k", dir=str(subset["dir"]), bidirectional_epochs=2
    )
    tok_cfg = TokenizerConfig(name="bidirectional", dir=str(tmp_path / "tok"), vocab_size=400)
    dm = TranslationDataModule(data_cfg, tok_cfg, seed=0)
    dm.setup("fit")
    en, de = subset["train"]["en"], subset["train"]["de"]
    n = len(en)

    def read(epoch: int) -> tuple[int, dict[int, tuple[str, str]]]:
        """(batches, row -> (source, target) text) of the loader Lightning gets at `epoch`."""
        dm.trainer = SimpleNamespace(global_rank=0, world_size=1, current_epoch=epoch)
        loader = dm.train_dataloader()
        rows = {}
        for batch in loader:
            src = dm.tokenizer.decode(batch.src.tolist())
            tgt = dm.tokenizer.decode(batch.tgt_out.tolist())
            rows.update(zip(batch.indices.tolist(), zip(src, tgt, strict=True), strict=True))
            assert batch.src.numel() <= data_cfg.max_tokens >= batch.tgt_in.numel()
        return len(loader), rows

    batches_both, both = read(1)
    assert both == {
        **{i: (en[i], de[i]) for i in range(n)},
        **{n + i: (de[i], en[i]) for i in range(n)},
    }
    batches_forward, forward = read(2)
    assert forward == {i: (en[i], de[i]) for i in range(n)}
    assert batches_both > batches_forward


def test_bpe_dropout_needs_a_bpe_tokenizer(tmp_path: Path) -> None:
    tok_cfg = TokenizerConfig(name="unigram", model_type="unigram")
    with pytest.raises(ValueError, match="data.bpe_dropout needs a BPE tokenizer"):
        TranslationDataModule(data_config(tmp_path, bpe_dropout=0.1, source="multi30k"), tok_cfg, 0)


def test_every_command_finds_multi30k_the_same_way(tmp_path, monkeypatch):
    """data.dir, else $NMT_DATA_DIR, else shared/data/multi30k beside the project, else a
    download: what `make train`, `python -m nmt.train`, the tests and the benchmarks read."""
    beside = tmp_path / "shared" / "data" / "multi30k"
    monkeypatch.setattr(sources, "BESIDE_PROJECT", beside)
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)
    cfg = DataConfig(source="multi30k", name="multi30k")
    assert sources.local_multi30k(cfg) is None  # nothing beside: downloaded
    beside.mkdir(parents=True)
    for lang in ("en", "de"):
        (beside / f"train.{lang}").write_text("x\n")
    assert sources.local_multi30k(cfg) == beside
    monkeypatch.setenv("NMT_DATA_DIR", str(tmp_path / "env"))
    assert sources.local_multi30k(cfg) == tmp_path / "env"
    assert sources.local_multi30k(DataConfig(source="multi30k", name="m", dir="/d")) == Path("/d")
    monkeypatch.undo()  # the real one: the checkout's ../shared
    assert sources.BESIDE_PROJECT == Path(__file__).resolve().parents[2] / "shared/data/multi30k"
