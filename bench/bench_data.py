"""Data pipeline: tokenizing, cleaning and batching 1,000,000 pairs whose vocabulary grows as
real text's does.

The corpus (`heaps_corpus`) is generated, not repeated: each sentence keeps the length of a
random Multi30k pair, and its words are drawn from the Zipf-Mandelbrot law over an unbounded
vocabulary, p(rank) ~ (rank + SHIFT) ** -ZIPF, so the count of distinct words grows with the
corpus as real text's does (Heaps' law, V ~ N ** (1 / ZIPF): ~22k distinct words in 650k
words, ~150k in 13M, the most frequent word 3% of all). The most frequent ranks are
Multi30k's own words in their frequency order; ranks past its vocabulary are made-up words
spelled from syllables, which sentencepiece splits into several pieces, as it does real rare
words. A repeated Multi30k
would hold ~10k distinct words whatever its size and flatter our encode-each-distinct-word-
once design; the distinct words of this one are printed.

Ours: the `nmt.data` pipeline (text files -> Arrow via `datasets`, batched sentencepiece
encoding through Dataset.map with num_proc=2, cleaning, token-bucketed batches of one epoch),
from a cold cache. Peer: the plain-Python way (read both files into lists, encode with
sentencepiece, sort and pack batches). Each run is a subprocess; memory is the peak PSS of
its whole process tree (ours: the map workers too), bench/harness.py. The two alternate for
`--rounds` rounds.

    python bench/bench_data.py [--pairs 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from common import multi30k_tokenizer, read_lines, save_records
from harness import ROUNDS, Run, Side, alternate, run_measured

ZIPF, SHIFT = 1.6, 20.0  # Heaps' exponent 1 / 1.6 = 0.62, in the range of real text's
CONSONANTS = "bdfghklmnprstvwz"
VOWELS = "aeiou"
SYLLABLES = [c + v for c in CONSONANTS for v in VOWELS] + [v + "n" for v in VOWELS]


def made_up_word(rank: int) -> str:
    """A pronounceable word for `rank`, unique per rank (its digits in base len(SYLLABLES))."""
    out = []
    while True:
        rank, digit = divmod(rank, len(SYLLABLES))
        out.append(SYLLABLES[digit])
        if rank == 0:
            return "".join(out)


def heaps_corpus(folder: Path, pairs: int, seed: int = 0) -> dict:
    """train.{en,de} of `pairs` generated pairs (module docstring) and small val/test files;
    the count of distinct words of each side."""
    rng = np.random.default_rng(seed)
    source = {lang: [line.split() for line in read_lines(f"train.{lang}")] for lang in ("en", "de")}
    picks = rng.integers(0, len(source["en"]), size=pairs)
    distinct = {}
    for lang, sentences in source.items():
        known = [w for w, _ in Counter(w for s in sentences for w in s).most_common()]
        lengths = np.array([len(s) for s in sentences])[picks]
        uniform = rng.random(int(lengths.sum()))  # inverse of the law's continuous form:
        ranks = np.floor(SHIFT * (uniform ** (-1 / (ZIPF - 1)) - 1)).astype(np.int64)  # 0 = top
        used, inverse = np.unique(ranks, return_inverse=True)
        spelled = [known[r] if r < len(known) else made_up_word(int(r)) for r in used.tolist()]
        words = [spelled[i] for i in inverse.tolist()]
        ends = np.cumsum(lengths).tolist()
        with open(folder / f"train.{lang}", "w", encoding="utf-8") as f:
            start = 0
            for end in ends:
                f.write(" ".join(words[start:end]) + "\n")
                start = end
        distinct[lang] = len(used)
        for split in ("val", "test_2016_flickr"):
            lines = read_lines(f"{split}.{lang}")[:10]
            (folder / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return distinct


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
    return {"pairs": len(train), "seconds": time.perf_counter() - start, "batches": len(batches)}


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
    return {"pairs": len(src), "seconds": time.perf_counter() - start, "batches": len(batches)}


def run(system: str, folder: Path) -> Run:
    """One cold run of `system` in a subprocess (ours: its Arrow cache removed first)."""
    shutil.rmtree(folder / "cache", ignore_errors=True)
    command = [sys.executable, __file__, "--worker", system, "--folder", str(folder)]
    out, peak_mib = run_measured(command)
    result = json.loads(out.strip().splitlines()[-1])
    return Run(result["pairs"], None, None, result["seconds"], peak_mib)


def compare(folder: Path, rounds: int) -> list[dict]:
    """Our pipeline against the plain-Python way on the corpus in `folder`."""
    sides = [
        Side("ours", "num_proc=2", lambda: run("ours", folder)),
        Side("plain", "one process", lambda: run("peer", folder)),
    ]
    timings = alternate(sides, "pairs/s", rounds, same_work=False, warm=False)
    return timings.report_speed_and_memory("ours", "plain", "data/pairs_per_s", "data/peak_memory")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--worker", choices=["ours", "peer"])
    parser.add_argument("--folder")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps((ours if args.worker == "ours" else peer)(Path(args.folder))))
        return
    multi30k_tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        distinct = heaps_corpus(Path(tmp), args.pairs)
        print(
            f"{args.pairs:,} generated pairs, distinct words: en {distinct['en']:,}, "
            f"de {distinct['de']:,}",
            flush=True,
        )
        records = compare(Path(tmp), args.rounds)
    save_records(records, "data")


if __name__ == "__main__":
    main()
