"""Parallel text as `datasets.Dataset`s with two string columns, `src` and `tgt`.

Three sources (DataConfig.source):
  multi30k: `{split}.{lang}` files in cfg.dir, else $NMT_DATA_DIR, else
            shared/data/multi30k beside the project's folder, else downloaded once from
            `{cfg.url}/{split}.{lang}.gz` into `<cfg.cache_dir or ~/.cache/nmt>/downloads/`.
  files:    cfg.data_files = {split: {lang: path}}, a pair of parallel text files per split, or
            {split: path} of a .tsv or .tmx file (nmt.data.user_files); with no validation
            split named, cfg.carve_valid training pairs are set aside as one.
  debian:   the text files of a corpus built once from named Debian packages and Multi30k
            (cfg.corpus; nmt.corpus.build), under cfg.corpus.cache_dir or ~/.cache/nmt.
  hub:      `datasets.load_dataset(cfg.path, cfg.config_name, data_files=cfg.data_files)`, rows
            {"translation": {lang: text}}: wmt/wmt14 (de-en), IWSLT/iwslt2017, or json/parquet.
Text files are read with "\\n" as the only line break and are otherwise kept byte for byte:
`str.splitlines` would also break at "\\r", "\\x1c" or "\\u2028", which occur inside real
sentences, and shift every later line against its translation.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from omegaconf import DictConfig, ListConfig, OmegaConf

from nmt.config import DataConfig
from nmt.corpus.build import corpus_folder
from nmt.data.user_files import read_pair_file
from nmt.files import atomic_path, read_lines

log = logging.getLogger(__name__)

PAIR_FEATURES = datasets.Features(
    {"src": datasets.Value("string"), "tgt": datasets.Value("string")}
)
_READER_VERSION = "3"  # part of the text-file cache key: bump when read_lines changes


def load_splits(cfg: DataConfig) -> dict[str, datasets.Dataset]:
    """role (train, valid, test, as keyed in cfg.splits) -> Dataset with columns src, tgt."""
    return {role: load_split(cfg, role) for role in cfg.splits}


def load_split(cfg: DataConfig, role: str) -> datasets.Dataset:
    """The split that cfg.splits[role] names; training keeps its first cfg.max_train_pairs,
    validation and test their first cfg.max_eval_pairs."""
    split = cfg.splits[role]
    if cfg.source == "hub":
        ds = _load_hub(cfg, split)
    elif cfg.source == "files" and carves_valid(cfg) and role in ("train", "valid"):
        ds = carved(cfg)[role]
    elif cfg.source in ("multi30k", "files", "debian"):
        ds = _load_files_split(cfg, split)
    else:
        raise ValueError(f"data.source must be multi30k, files, debian or hub, not {cfg.source!r}")
    kept = cfg.max_train_pairs if role == "train" else cfg.max_eval_pairs
    if kept is not None:
        ds = ds.select(range(min(kept, len(ds))))
    if role == "train" and cfg.replay.share > 0:
        ds = with_replay(ds, cfg)
    return ds


def with_replay(train: datasets.Dataset, cfg: DataConfig) -> datasets.Dataset:
    """The training split and, after it, a seeded sample of cfg.replay.file's pairs: as many
    as make them cfg.replay.share of the whole (all of them if the file holds fewer)."""
    general = _pair_file(Path(cfg.replay.file), cfg)
    share = cfg.replay.share
    n = min(len(general), round(share / (1 - share) * len(train)))
    chosen = np.sort(np.random.default_rng(0).permutation(len(general))[:n])
    log.info(
        "Replay: %d of %d general pairs from %s mixed into %d training pairs (%.0f%%)",
        n,
        len(general),
        cfg.replay.file,
        len(train),
        100 * n / (n + len(train)),
    )
    return datasets.concatenate_datasets([train, general.select(chosen)])


# --- a user's files (files) ---


def carves_valid(cfg: DataConfig) -> bool:
    """A validation role whose split data_files does not name (or leaves null)."""
    if "valid" not in cfg.splits:
        return False
    given = _given(cfg.data_files).get(cfg.splits["valid"])
    return not given or (isinstance(given, dict) and not any(given.values()))


def carved(cfg: DataConfig) -> dict[str, datasets.Dataset]:
    """The training split less cfg.carve_valid pairs (a tenth at most), drawn at random with a
    fixed seed, and those pairs as the validation split; every repeat of a validation pair
    leaves the training split too, or it would be scored on what it learnt by heart."""
    ds = _load_files_split(cfg, cfg.splits["train"])
    n = min(cfg.carve_valid, len(ds) // 10)
    if n < 1:
        raise ValueError(
            f"data_files names no {cfg.splits['valid']} split and {len(ds)} training pairs "
            "leave none to carve off: name one (data.data_files.dev=...)"
        )
    valid = np.sort(np.random.default_rng(0).permutation(len(ds))[:n])
    text = ds.with_format("arrow")[:]
    pairs = pc.binary_join_element_wise(text["src"], text["tgt"], "\t").to_pandas()
    train = np.flatnonzero(~pairs.isin(set(pairs[valid])).to_numpy())
    log.info(
        "No %s split given: %d training pairs set aside as one (%d repeats of them dropped)",
        cfg.splits["valid"],
        n,
        len(ds) - n - len(train),
    )
    return {"train": ds.select(train), "valid": ds.select(valid)}


def _load_files_split(cfg: DataConfig, split: str) -> datasets.Dataset:
    """A split of text files: one .tsv or .tmx file, or a pair of line-aligned files."""
    if cfg.source == "files" and isinstance(_given(cfg.data_files).get(split), str):
        return _pair_file(Path(_given(cfg.data_files)[split]), cfg)
    return _load_text_pair(*_text_pair_paths(cfg, split), cache_dir=cfg.cache_dir)


def _pair_file(path: Path, cfg: DataConfig) -> datasets.Dataset:
    """A .tsv or .tmx file's pairs, what it skipped logged."""
    sources, targets, skipped = read_pair_file(path, cfg.src_lang, cfg.tgt_lang)
    if skipped:
        log.info(
            "%s: %d pairs read; skipped %s",
            path,
            len(sources),
            ", ".join(f"{n:,} {why}" for why, n in skipped.items()),
        )
    return datasets.Dataset.from_dict({"src": sources, "tgt": targets}, features=PAIR_FEATURES)


# --- text files (multi30k, files) ---


def count_lines(path: Path) -> int:
    """How many lines `read_lines` yields, counted without decoding."""
    count, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _text_pair_paths(cfg: DataConfig, split: str) -> tuple[Path, Path]:
    """The source- and target-language files of a split."""
    if cfg.source == "files":
        files = _given(cfg.data_files).get(split, {})
        if files.get(cfg.src_lang) is None or files.get(cfg.tgt_lang) is None:
            raise ValueError(
                f"data.source=files needs data.data_files.{split}.{cfg.src_lang} and "
                f".{cfg.tgt_lang}: the paths of the split's two text files"
            )
        return Path(files[cfg.src_lang]), Path(files[cfg.tgt_lang])
    folder = debian_corpus(cfg) if cfg.source == "debian" else multi30k_folder(cfg, split)
    return folder / f"{split}.{cfg.src_lang}", folder / f"{split}.{cfg.tgt_lang}"


def multi30k_folder(cfg: DataConfig, split: str) -> Path:
    """The folder a Multi30k split is read from, downloaded first if there is no local one."""
    return local_multi30k(cfg) or download_multi30k(cfg, split)


_CORPORA: dict[str, Path] = {}  # built corpora by their settings, once per process


def debian_corpus(cfg: DataConfig) -> Path:
    """The built corpus's folder (built on first use, then looked up once per process: every
    split and model.pt's record read the same one); English-German only."""
    key = repr((cfg.corpus, cfg.dir, cfg.src_lang, cfg.tgt_lang))
    if key not in _CORPORA:
        _CORPORA[key] = build_debian_corpus(cfg)
    return _CORPORA[key]


def build_debian_corpus(cfg: DataConfig) -> Path:
    """The corpus of cfg.corpus, with Multi30k where its domains name it."""
    if (cfg.src_lang, cfg.tgt_lang) != ("en", "de"):
        raise ValueError("data.source=debian is English-German: data.src_lang=en, tgt_lang=de")
    multi30k = None
    if cfg.corpus.domains.get("multi30k", 0) > 0:
        multi30k = (
            local_multi30k(cfg)
            or [download_multi30k(cfg, split) for split in ("train", "val", "test_2016_flickr")][0]
        )
    return corpus_folder(cfg.corpus, multi30k, cache_root(cfg.corpus.cache_dir))


def provenance(cfg: DataConfig) -> dict[str, Any]:
    """What model.pt records of its data: for a built corpus, its packages' versions."""
    if cfg.source != "debian":
        return {}
    folder = debian_corpus(cfg)
    manifest = json.loads((folder / "manifest.json").read_text())
    return {"corpus": folder.name, "packages": manifest["packages"]}


# shared/data/multi30k beside the project's folder (a checkout's ../shared, as in CI)
BESIDE_PROJECT = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"


def cache_root(cache_dir: str | None) -> Path:
    """Where downloads and built corpora go: `cache_dir`, else ~/.cache/nmt."""
    return Path(cache_dir) if cache_dir else Path.home() / ".cache" / "nmt"


def local_multi30k(cfg: DataConfig) -> Path | None:
    """Where Multi30k is read from, for every command and the tests alike: data.dir, else
    $NMT_DATA_DIR, else BESIDE_PROJECT where it holds train.{src,tgt}; None: download it."""
    if cfg.dir is not None:
        return Path(cfg.dir)
    if "NMT_DATA_DIR" in os.environ:
        return Path(os.environ["NMT_DATA_DIR"])
    if all((BESIDE_PROJECT / f"train.{lang}").is_file() for lang in (cfg.src_lang, cfg.tgt_lang)):
        return BESIDE_PROJECT
    return None


def download_multi30k(cfg: DataConfig, split: str) -> Path:
    """Fetch and gunzip `{cfg.url}/{split}.{lang}.gz` once per URL; returns the folder.

    urllib, so a file:// URL works too. Files are written atomically: a concurrent reader (another
    rank) never sees half a file.
    """
    root = cache_root(cfg.cache_dir)
    folder = root / "downloads" / hashlib.sha256(cfg.url.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    for lang in (cfg.src_lang, cfg.tgt_lang):
        target = folder / f"{split}.{lang}"
        if target.exists():
            continue
        url = f"{cfg.url.rstrip('/')}/{split}.{lang}.gz"
        log.info("Downloading %s to %s", url, target)
        with atomic_path(target) as tmp, open(tmp, "wb") as out:
            with urllib.request.urlopen(url) as response, gzip.GzipFile(fileobj=response) as gz:
                shutil.copyfileobj(gz, out)
    return folder


def _load_text_pair(src_path: Path, tgt_path: Path, cache_dir: str | None) -> datasets.Dataset:
    """Two line-aligned files -> Dataset(src, tgt): an Arrow file in the datasets cache,
    written once and memory-mapped.

    Lines go to Arrow in blocks of `_BLOCK_LINES` (no Python object per pair, so a million
    pairs take seconds). The cache file is named by the files' paths, sizes and modification
    times: an edited file is read again. It is written to a temporary name and renamed, so a
    concurrent reader (another rank) never sees half a file.
    """
    for path in (src_path, tgt_path):
        if not path.is_file():
            raise FileNotFoundError(f"data file not found: {path}")
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    if n_src != n_tgt:
        raise ValueError(
            f"parallel files differ in length: {src_path} has {n_src} lines, {tgt_path} has {n_tgt}"
        )
    stats = [
        (str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in (src_path, tgt_path)
    ]
    key = hashlib.sha256(json.dumps([_READER_VERSION, *stats]).encode()).hexdigest()[:32]
    folder = Path(cache_dir or datasets.config.HF_DATASETS_CACHE) / "nmt_text"
    path = folder / f"pairs-{key}.arrow"
    if not path.exists():
        schema = PAIR_FEATURES.arrow_schema
        with atomic_path(path) as tmp:
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
                for src, tgt in zip(_blocks(src_path), _blocks(tgt_path), strict=True):
                    writer.write_batch(pa.record_batch([src, tgt], schema=schema))
    return datasets.Dataset.from_file(str(path))


_BLOCK_LINES = 100_000


def _blocks(path: Path) -> Iterator[pa.Array]:
    """The lines of a file (as `read_lines` gives them) in Arrow string arrays."""
    block: list[str] = []
    for line in read_lines(path):
        block.append(line)
        if len(block) == _BLOCK_LINES:
            yield pa.array(block, type=pa.string())
            block = []
    if block or count_lines(path) == 0:
        yield pa.array(block, type=pa.string())


# --- datasets with a translation column (hub) ---


def _load_hub(cfg: DataConfig, split: str) -> datasets.Dataset:
    """`load_dataset(...)[split]`, its `translation` column mapped to src, tgt."""
    ds = datasets.load_dataset(
        cfg.path,
        cfg.config_name,
        data_files=_given(cfg.data_files) or None,
        split=split,
        cache_dir=cfg.cache_dir,
    )
    languages = _translation_languages(ds.features)
    missing = {cfg.src_lang, cfg.tgt_lang} - languages
    if missing:
        raise ValueError(f"{cfg.path} has no {sorted(missing)} in its translation column")
    return ds.map(
        _translation_to_pair,
        batched=True,
        fn_kwargs={"src_lang": cfg.src_lang, "tgt_lang": cfg.tgt_lang},
        remove_columns=ds.column_names,
        features=PAIR_FEATURES,
        desc="src/tgt columns",
    )


def _translation_languages(features: datasets.Features) -> set[str]:
    """The languages of a `translation` column: a Translation feature or a struct of strings."""
    if "translation" not in features:
        raise ValueError(f"a hub dataset needs a 'translation' column, found {list(features)}")
    column = features["translation"]
    if isinstance(column, datasets.Translation):
        return set(column.languages)
    return set(column)


def _translation_to_pair(
    batch: dict[str, list], src_lang: str, tgt_lang: str
) -> dict[str, list[str]]:
    pairs = batch["translation"]
    return {"src": [p[src_lang] for p in pairs], "tgt": [p[tgt_lang] for p in pairs]}


def _given(data_files: Any) -> dict:
    """data_files without the splits left unset (null) in the YAML, which lists every split so
    that command-line overrides can fill them in."""
    return {split: files for split, files in _plain(data_files).items() if files is not None}


def _plain(data_files: Any) -> Any:
    """data_files as plain dicts and lists: Hydra hands over DictConfig/ListConfig."""
    if isinstance(data_files, DictConfig | ListConfig):
        return OmegaConf.to_container(data_files, resolve=True)
    return data_files
