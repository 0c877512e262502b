"""Shared fixtures. Keep each group under its own heading."""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path

import pytest

from nmt.config import TokenizerConfig
from nmt.tokenizer import Tokenizer, train_or_load

# --- data: the real Multi30k files and a tiny tokenizer trained on them ---

MULTI30K_FILES = [
    f"{split}.{lang}" for split in ("train", "val", "test_2016_flickr") for lang in ("en", "de")
]


def _multi30k_candidates() -> list[Path]:
    """$NMT_DATA_DIR, then ../shared/data/multi30k beside the repository."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
    env = os.environ.get("NMT_DATA_DIR")
    return [Path(env), shared] if env else [shared]


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The folder of Multi30k's {train,val,test_2016_flickr}.{en,de} raw text files."""
    for folder in _multi30k_candidates():
        if all((folder / name).is_file() for name in MULTI30K_FILES):
            return folder
    pytest.skip(
        "Multi30k not found: set NMT_DATA_DIR or place the raw files in ../shared/data/multi30k "
        f"(looked in {', '.join(map(str, _multi30k_candidates()))})"
    )


def _head(path: Path, n: int) -> list[str]:
    """The first n lines of a text file, without their newline."""
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.removesuffix("\n") for line in islice(f, n)]


@pytest.fixture(scope="session")
def tiny_tokenizer(multi30k_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """A 1000-piece joint BPE model over the first 3000 Multi30k training pairs (about 1 s)."""
    texts = _head(multi30k_dir / "train.en", 3000) + _head(multi30k_dir / "train.de", 3000)
    cfg = TokenizerConfig(
        name="tiny", dir=str(tmp_path_factory.mktemp("tokenizer")), vocab_size=1000
    )
    return train_or_load(cfg, texts, "multi30k train[:3000] en+de")
