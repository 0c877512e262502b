"""The corpus as text files, one pair of `{split}.en` / `{split}.de` per split, built once.

Domains: `multi30k` (its train, val and test_2016_flickr), `everyday` (Ding's example
sentences), `words` (Ding's word pairs, training only), `software` (gettext catalogs) and
`docs` (documentation pages in both languages). Held-out units are whole: a dictionary
line's sentences all go to one split (its hash picks which), a package's messages all to one
(CorpusConfig names which), a documentation page's pairs all to one (its name's hash). A
training pair whose English is also the English of any held-out pair, or of a kept
package's catalogs (never trained on), is dropped as a twin. Training repeats each domain
by its weight (a fraction: that share of it, a seeded sample). Splits: `train`, `val` (every
domain's val, for choosing checkpoints), and `val_<domain>`, `test_<domain>` (test_multi30k
is test_2016_flickr).

The folder is named by a hash of the settings, the builder's version and every package's
version, and holds `manifest.json`: the versions, the cleaning report per domain and split
sizes. A build writes a temporary folder and renames it, so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from nmt.config import CorpusConfig
from nmt.corpus import catalogs, ding, documentation
from nmt.corpus.cleaning import cleaned
from nmt.corpus.packages import Unpacked, unpacked_all
from nmt.files import read_lines

log = logging.getLogger(__name__)

BUILDER_VERSION = "1"
Pairs = list[tuple[str, str]]
HELD_OUT = ("val", "test")


def corpus_folder(cfg: CorpusConfig, multi30k: Path | None, cache: Path) -> Path:
    """The built corpus's folder under cache/corpus, built first if it is not there.
    multi30k: the folder of Multi30k's files (needed if the domains name it). A domain of
    weight 0 is not built at all: a config of one domain sets the others' weights to 0, since
    its `domains` are merged into the default mix."""
    cfg = replace(cfg, domains={d: w for d, w in cfg.domains.items() if w > 0})
    packages = unpacked_all(named_packages(cfg), cache / "packages")
    settings = {k: v for k, v in asdict(cfg).items() if k != "cache_dir"}
    versions = {name: p.version for name, p in packages.items()}
    key = json.dumps([BUILDER_VERSION, settings, versions, multi30k_identity(cfg, multi30k)])
    folder = cache / "corpus" / hashlib.sha256(key.encode()).hexdigest()[:16]
    if (folder / "manifest.json").exists():
        return folder
    splits, report = build_splits(cfg, packages, multi30k)
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for name, pairs in splits.items():
        for side, lang in ((0, "en"), (1, "de")):
            (tmp / f"{name}.{lang}").write_text("".join(p[side] + "\n" for p in pairs))
    manifest = {
        "packages": versions,
        "settings": settings,
        "report": report,
        "splits": {name: len(pairs) for name, pairs in splits.items()},
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    if folder.exists():
        shutil.rmtree(tmp)  # another process built it meanwhile
    else:
        tmp.rename(folder)
    log.info("Corpus built in %s: %s", folder, manifest["splits"])
    return folder


def named_packages(cfg: CorpusConfig) -> list[str]:
    """Every package the domains read, the kept ones included."""
    names = []
    if {"everyday", "words"} & set(cfg.domains):
        names.append(cfg.dictionary)
    if "software" in cfg.domains:
        names += cfg.catalogs + cfg.val_catalogs + cfg.test_catalogs + cfg.kept_catalogs
    if "docs" in cfg.domains:
        names += [p for name in cfg.documentation for p in doc_set(name).packages]
    return list(dict.fromkeys(names))


def multi30k_identity(cfg: CorpusConfig, multi30k: Path | None) -> list:
    """Multi30k's files by size (they are read whole into the corpus)."""
    if "multi30k" not in cfg.domains or multi30k is None:
        return []
    return sorted((p.name, p.stat().st_size) for p in multi30k.iterdir() if p.is_file())


def build_splits(
    cfg: CorpusConfig, packages: dict[str, Unpacked], multi30k: Path | None
) -> tuple[dict[str, Pairs], dict]:
    """split name -> pairs, and the cleaning report per domain."""
    domains, report = {}, {}
    dictionary = dictionary_splits(
        cfg, packages, [d for d in cfg.domains if d in DICTIONARY_DOMAINS]
    )
    for domain in cfg.domains:
        if domain == "multi30k":
            if multi30k is None:
                raise ValueError("data.corpus.domains names multi30k, but no Multi30k folder")
            domains[domain] = multi30k_splits(multi30k)
        elif domain in DICTIONARY_DOMAINS:
            domains[domain], report[domain] = dictionary[domain]
        elif domain == "software":
            domains[domain], report[domain] = catalog_splits(cfg, packages)
        elif domain == "docs":
            domains[domain], report[domain] = documentation_splits(cfg, packages)
        else:
            raise ValueError(
                f"data.corpus.domains: {domain!r} is none of multi30k, everyday, words, "
                "software, docs"
            )
    held = {en for parts in domains.values() for s in HELD_OUT for en, _ in parts.get(s, [])}
    held |= kept_sources(cfg, packages)
    splits: dict[str, Pairs] = {"train": [], "val": []}
    for domain, parts in domains.items():
        train = [pair for pair in parts["train"] if pair[0] not in held]
        report.setdefault(domain, {})["twins of held-out text"] = len(parts["train"]) - len(train)
        splits["train"] += weighted(train, cfg.domains[domain], cfg.seed)
        for split in HELD_OUT:
            if split in parts:
                splits[f"{split}_{domain}"] = parts[split]
        splits["val"] += parts.get("val", [])
    return splits, report


def weighted(pairs: Pairs, weight: float, seed: int) -> Pairs:
    """The pairs repeated int(weight) times, then a seeded sample of the fraction left."""
    whole, part = int(weight), weight - int(weight)
    n = round(part * len(pairs))
    chosen = np.sort(np.random.default_rng(seed).permutation(len(pairs))[:n])
    return pairs * whole + [pairs[i] for i in chosen]


def multi30k_splits(folder: Path) -> dict[str, Pairs]:
    """Multi30k's train, val and test_2016_flickr, as they are."""
    names = {"train": "train", "val": "val", "test": "test_2016_flickr"}
    return {
        split: list(
            zip(read_lines(folder / f"{n}.en"), read_lines(folder / f"{n}.de"), strict=True)
        )
        for split, n in names.items()
    }


def held_out_split(unit: str, share: float) -> str:
    """train, val or test for a dictionary line, by its hash: `share` of lines each."""
    bucket = int(hashlib.sha256(unit.encode()).hexdigest()[:8], 16) / 16**8
    return "test" if bucket < share else "val" if bucket < 2 * share else "train"


DICTIONARY_DOMAINS = ("everyday", "words")  # the domains read from the dictionary


def dictionary_splits(
    cfg: CorpusConfig, packages: dict[str, Unpacked], domains: list[str]
) -> dict[str, tuple[dict[str, Pairs], dict]]:
    """domain -> (splits, cleaning report), for each of `domains` in one pass over the
    dictionary (its parsing is most of a build's time): Ding's sentences (everyday: train,
    val, test) or word pairs (words: train only, from the training lines), cleaned;
    held-out splits at most cfg.eval_pairs, a seeded sample."""
    if not domains:
        return {}
    raw: dict[str, dict[str, Pairs]] = {"everyday": {"train": [], "val": [], "test": []}}
    raw["words"] = {"train": []}
    for entry in ding.entries(packages[cfg.dictionary].root):
        split = held_out_split(entry.line, cfg.held_out_share)
        raw["everyday"][split] += entry.sentences
        if entry.words and split == "train":
            raw["words"]["train"].append(entry.words)
    return {domain: cleaned_splits(cfg, raw[domain]) for domain in domains}


def catalog_splits(
    cfg: CorpusConfig, packages: dict[str, Unpacked]
) -> tuple[dict[str, Pairs], dict]:
    """The catalogs' messages: training packages, val packages, test packages."""
    raw = {
        split: [pair for name in names for pair in catalogs.messages(packages[name].root)]
        for split, names in (
            ("train", cfg.catalogs),
            ("val", cfg.val_catalogs),
            ("test", cfg.test_catalogs),
        )
    }
    return cleaned_splits(cfg, raw)


def doc_set(name: str) -> documentation.DocSet:
    if name not in documentation.DOC_SETS:
        raise ValueError(
            f"data.corpus.documentation: {name!r} is none of {', '.join(documentation.DOC_SETS)}"
        )
    return documentation.DOC_SETS[name]


def documentation_splits(
    cfg: CorpusConfig, packages: dict[str, Unpacked]
) -> tuple[dict[str, Pairs], dict]:
    """The documentation sets' sentence pairs, each page's in the split its name's hash picks;
    the report counts the pages read and those skipped (their two languages' blocks differ)."""
    raw: dict[str, Pairs] = {"train": [], "val": [], "test": []}
    read = skipped = 0
    for name in cfg.documentation:
        found = doc_set(name)
        roots = [packages[p].root for p in found.packages]
        for page, pairs in documentation.pages(found, roots):
            read += 1
            if pairs is None:
                skipped += 1
            else:
                raw[held_out_split(f"{name}/{page}", cfg.page_share)] += pairs
    splits, report = cleaned_splits(cfg, raw)
    return splits, report | {"pages read": read, "pages skipped, blocks differ": skipped}


def cleaned_splits(cfg: CorpusConfig, raw: dict[str, Pairs]) -> tuple[dict[str, Pairs], dict]:
    """Each split cleaned, its report kept; held-out ones cut to cfg.eval_pairs."""
    splits, report = {}, {}
    for split, pairs in raw.items():
        kept, report[split] = cleaned(pairs, cfg.max_words, cfg.max_ratio)
        if split != "train" and len(kept) > cfg.eval_pairs:
            chosen = np.random.default_rng(cfg.seed).permutation(len(kept))[: cfg.eval_pairs]
            kept = [kept[i] for i in np.sort(chosen)]
        splits[split] = kept
    return splits, report


def kept_sources(cfg: CorpusConfig, packages: dict[str, Unpacked]) -> set[str]:
    """The English of the kept packages' catalogs: read only to keep it out of training."""
    if "software" not in cfg.domains:
        return set()
    return {
        " ".join(en.split())
        for name in cfg.kept_catalogs
        for en, _ in catalogs.messages(packages[name].root)
    }
