"""The data pipeline at WMT14 size: 4.5M synthetic pairs through `data=files`, in bounded
memory.

The corpus is built once from Multi30k: each pair joins 1-4 random training pairs (source with
source, target with target), so lengths spread wider than Multi30k's. Then, each in a fresh
process so its memory is its own:
- cold: an empty cache and no tokenizer: text -> Arrow, the tokenizer trained on a streamed
  sample (input_sentence_size), encoding (Dataset.map, num_proc), cleaning, the first batch;
- warm: the same again: the tokenizer reused by fingerprint, every table read from the cache;
- 2 ranks: two warm processes at once, as DDP ranks 0 and 1 of 2, each to its first batch;
  peak RSS, and PSS (shared pages split between the processes that map them) at that batch.
Memory is the peak PSS of each run's whole process tree (its map workers too), summed over
the two ranks for the 2-rank run (bench/harness.py). The comparison with the plain-Python way
is bench_data.py's, on a corpus whose vocabulary grows (this one repeats Multi30k's words).

    python bench/bench_scale.py [--pairs 4500000] [--dir /tmp/nmt_scale]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import ROOT, read_lines, save_records
from harness import TreeMemory

HERE = Path(__file__).resolve().parent
PARTS = [1, 2, 3, 4]  # Multi30k pairs joined into one
WEIGHTS = [0.4, 0.3, 0.2, 0.1]


def build_corpus(folder: Path, pairs: int, seed: int = 0) -> float:
    """train.{en,de} of `pairs` joined pairs, val/test from Multi30k; seconds taken."""
    start = time.perf_counter()
    en, de = read_lines("train.en"), read_lines("train.de")
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "train.en", "w") as f_en, open(folder / "train.de", "w") as f_de:
        for first in range(0, pairs, 100_000):
            n = min(100_000, pairs - first)
            counts = rng.choice(PARTS, size=n, p=WEIGHTS)
            picks = rng.integers(0, len(en), size=int(counts.sum()))
            at = 0
            lines_en, lines_de = [], []
            for k in counts.tolist():
                chosen = picks[at : at + k].tolist()
                at += k
                lines_en.append(" ".join(en[i] for i in chosen))
                lines_de.append(" ".join(de[i] for i in chosen))
            f_en.write("\n".join(lines_en) + "\n")
            f_de.write("\n".join(lines_de) + "\n")
    for split in ("val", "test_2016_flickr"):
        for lang in ("en", "de"):
            (folder / f"{split}.{lang}").write_text("\n".join(read_lines(f"{split}.{lang}")) + "\n")
    return time.perf_counter() - start


def configs(folder: Path, num_proc: int):
    from nmt.config import DataConfig, TokenizerConfig

    files = {
        split: {lang: str(folder / f"{split}.{lang}") for lang in ("en", "de")}
        for split in ("train", "val", "test_2016_flickr")
    }
    data = DataConfig(
        source="files",
        name="scale",
        data_files=files,
        cache_dir=str(folder / "cache"),
        num_proc=num_proc,
        max_tokens=6250,
    )
    tokenizer = TokenizerConfig(name="scale_bpe37k", dir=str(folder / "tok"), vocab_size=37000)
    return data, tokenizer


def worker(folder: Path, num_proc: int, rank: int, world: int) -> dict:
    """One process: every data step to its first training batch, timed; its memory."""
    import psutil

    from nmt.data.datamodule import TranslationDataModule
    from nmt.data.encoding import clean_train, encode_split, tokenizer_for
    from nmt.data.sources import load_splits

    data_cfg, tok_cfg = configs(folder, num_proc)
    times, start = {}, time.perf_counter()

    rss = {}

    def lap(name: str) -> None:
        times[name] = round(time.perf_counter() - start - sum(times.values()), 2)
        rss[name] = round(psutil.Process().memory_info().rss / 2**20)

    splits = load_splits(data_cfg)
    lap("text to Arrow")
    tokenizer = tokenizer_for(data_cfg, tok_cfg, splits["train"])
    lap("tokenizer")
    encoded = {role: encode_split(ds, tokenizer, num_proc) for role, ds in splits.items()}
    lap("encoding")
    encoded["train"] = clean_train(encoded["train"], data_cfg.max_len, data_cfg.max_len_ratio)
    lap("cleaning")
    module = TranslationDataModule(data_cfg, tok_cfg, seed=0)
    module.splits, module.tokenizer, module.encoded = splits, tokenizer, encoded
    module.trainer = _Ranks(rank, world)
    batch = next(iter(module.train_dataloader()))
    lap("first batch")
    barrier(folder, "ready", rank, world)  # every rank measured while all are alive
    memory = psutil.Process().memory_full_info()
    barrier(folder, "measured", rank, world)
    return {
        "pairs": len(splits["train"]),
        "kept": len(encoded["train"]),
        "times": times,
        "to_first_batch": round(sum(times.values()), 2),
        "rss_mib_after": rss,
        "batch_pairs": int(batch.src.size(0)),
        "rss_mib_at_batch": round(memory.rss / 2**20),
        "pss_mib_at_batch": round(memory.pss / 2**20),
    }


def barrier(folder: Path, name: str, rank: int, world: int, timeout: float = 600) -> None:
    """Wait until all `world` ranks got here (files in `folder`)."""
    if world == 1:
        return
    (folder / f"{name}.{rank}").touch()
    deadline = time.monotonic() + timeout
    while not all((folder / f"{name}.{r}").exists() for r in range(world)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the others never reached {name}")
        time.sleep(0.05)


class _Ranks:
    """What train_dataloader reads of a Trainer: this process's rank among `world`."""

    def __init__(self, rank: int, world: int):
        self.global_rank, self.world_size, self.current_epoch = rank, world, 0


def run_worker(folder: Path, num_proc: int, rank: int = 0, world: int = 1) -> subprocess.Popen:
    command = [sys.executable, __file__, "--worker", "--dir", str(folder)]
    command += ["--num-proc", str(num_proc), "--rank", str(rank), "--world", str(world)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, stdout=subprocess.PIPE, env=env, cwd=HERE, text=True)


def results(processes: list[subprocess.Popen]) -> tuple[list[dict], float]:
    """Each worker's report, and the peak memory of all of them and their map workers
    together (summed PSS, bench/harness.py)."""
    with TreeMemory(*(p.pid for p in processes), interval=0.05) as memory:
        outs = [p.communicate()[0] for p in processes]
    if any(p.returncode for p in processes):
        raise SystemExit(f"a worker failed: {[p.returncode for p in processes]}")
    return [json.loads(out.strip().splitlines()[-1]) for out in outs], memory.peak_mib


def disk_mib(path: Path) -> int:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=4_500_000)
    parser.add_argument("--dir", default="/tmp/nmt_scale")
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world", type=int, default=1)
    args = parser.parse_args()
    folder = Path(args.dir)
    if args.worker:
        print(json.dumps(worker(folder, args.num_proc, args.rank, args.world)))
        return
    lines = sum(1 for _ in open(folder / "train.en")) if (folder / "train.en").exists() else 0
    if lines != args.pairs:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"building {args.pairs} pairs: {build_corpus(folder, args.pairs):.0f} s", flush=True)
    shutil.rmtree(folder / "cache", ignore_errors=True)
    shutil.rmtree(folder / "tok", ignore_errors=True)
    corpus_mib = disk_mib(folder)
    (cold,), cold_mib = results([run_worker(folder, args.num_proc)])
    print("cold", json.dumps(cold), flush=True)
    (warm,), warm_mib = results([run_worker(folder, args.num_proc)])
    print("warm", json.dumps(warm), flush=True)
    for stale in [*folder.glob("ready.*"), *folder.glob("measured.*")]:
        stale.unlink()
    ranks, ranks_mib = results([run_worker(folder, args.num_proc, rank, 2) for rank in (0, 1)])
    for rank, found in enumerate(ranks):
        print(f"rank {rank}/2", json.dumps(found), flush=True)
    cache_mib = disk_mib(folder / "cache")

    print(f"\n{args.pairs} pairs ({corpus_mib} MiB of text), num_proc {args.num_proc}")
    encoding = cold["times"]["encoding"]
    print(f"tokenizer training (cold): {cold['times']['tokenizer']} s")
    print(
        f"encoding: cold {args.pairs / encoding:,.0f} pairs/s ({encoding} s), "
        f"warm {warm['times']['encoding']} s (cache)"
    )
    print(
        f"to the first batch: cold {cold['to_first_batch']} s, warm {warm['to_first_batch']} s"
        " (target < 60 s)"
    )
    print(
        f"peak memory, the process and its map workers (summed PSS): cold {cold_mib:.0f} MiB, "
        f"warm {warm_mib:.0f} MiB (target < 4096); 2 ranks together {ranks_mib:.0f} MiB"
    )
    for rank, found in enumerate(ranks):
        print(
            f"rank {rank}/2: at its first batch RSS {found['rss_mib_at_batch']} / PSS "
            f"{found['pss_mib_at_batch']} MiB, {found['to_first_batch']} s"
        )
    print(f"cache on disk: {cache_mib} MiB")
    save_records(
        [
            {"name": "scale/peak_memory_cold", "mib": cold_mib, "target": 4096},
            {"name": "scale/peak_memory_2_ranks", "mib": ranks_mib},
            {"name": "scale/warm_to_first_batch", "seconds": warm["to_first_batch"], "target": 60},
        ],
        "scale",
    )


if __name__ == "__main__":
    main()
