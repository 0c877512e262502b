"""Data pipeline: tokenizing and batching 1,000,000 pairs (Multi30k train repeated).

Ours: the `nmt.data` pipeline (text files -> Arrow via `datasets`, batched sentencepiece
encoding through Dataset.map, cleaning, token-bucketed batches of one epoch), from a cold
cache. Peer: the plain-Python way (read both files into lists, encode with sentencepiece,
sort and pack batches in Python). Each runs in its own subprocess, so peak memory is its own.

    python bench/bench_data.py [--pairs 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Record, multi30k_tokenizer, peak_rss_mib, read_lines, save_records


def write_corpus(folder: Path, pairs: int) -> None:
    """train.{en,de} with `pairs` lines (Multi30k train repeated), and tiny val/test files."""
    for lang in ("en", "de"):
        lines = read_lines(f"train.{lang}")
        repeated = (lines * (pairs // len(lines) + 1))[:pairs]
        (folder / f"train.{lang}").write_text("\n".join(repeated) + "\n", encoding="utf-8")
        for split in ("val", "test_2016_flickr"):
            (folder / f"{split}.{lang}").write_text("\n".join(lines[:10]) + "\n", encoding="utf-8")


def ours(folder: Path) -> dict:
    from nmt.config import DataConfig
    from nmt.data.batching import TokenBatchSampler
    from nmt.data.encoding import clean_train, encode_split, token_lengths
    from nmt.data.sources import load_split

    tokenizer = multi30k_tokenizer()
    cfg = DataConfig(
        source="multi30k",
        name="bench",
        dir=str(folder),
        cache_dir=str(folder / "cache"),
        num_proc=2,
    )
    start = time.perf_counter()
    train = clean_train(
        encode_split(load_split(cfg, "train"), tokenizer, cfg.num_proc),
        cfg.max_len,
        cfg.max_len_ratio,
    )
    src_lens, tgt_lens = token_lengths(train)
    batches = list(TokenBatchSampler(src_lens + 1, tgt_lens + 1, 4096, shuffle=True, seed=0))
    seconds = time.perf_counter() - start
    return {
        "pairs": len(train),
        "seconds": seconds,
        "batches": len(batches),
        "peak_mib": peak_rss_mib(),
    }


def peer(folder: Path) -> dict:
    tokenizer = multi30k_tokenizer()
    start = time.perf_counter()
    src = tokenizer.sp.encode((folder / "train.en").read_text(encoding="utf-8").split("\n")[:-1])
    tgt = tokenizer.sp.encode((folder / "train.de").read_text(encoding="utf-8").split("\n")[:-1])
    order = sorted(range(len(src)), key=lambda i: (len(src[i]), len(tgt[i])))
    batches, current, width = [], [], 0
    for i in order:
        width = max(width, len(src[i]) + 1, len(tgt[i]) + 1)
        if current and width * (len(current) + 1) > 4096:
            batches.append(current)
            current, width = [], max(len(src[i]), len(tgt[i])) + 1
        current.append(i)
    batches.append(current)
    seconds = time.perf_counter() - start
    return {
        "pairs": len(src),
        "seconds": seconds,
        "batches": len(batches),
        "peak_mib": peak_rss_mib(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--worker", choices=["ours", "peer"])
    parser.add_argument("--folder")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps((ours if args.worker == "ours" else peer)(Path(args.folder))))
        return
    multi30k_tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        write_corpus(Path(tmp), args.pairs)
        results = {}
        for system in ("ours", "peer"):
            cmd = [sys.executable, __file__, "--worker", system, "--folder", tmp]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[system] = json.loads(out.strip().splitlines()[-1])
    o, p = results["ours"], results["peer"]
    records = [
        Record("data/pairs_per_s", o["pairs"] / o["seconds"], p["pairs"] / p["seconds"], "pairs/s"),
        Record("data/peak_memory", o["peak_mib"], p["peak_mib"], "MiB", False),
    ]
    for record in records:
        print(record.line())
    save_records(records, "data")


if __name__ == "__main__":
    main()
