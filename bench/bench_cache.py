"""The sentence cache (#42): a workload where 30% of the sentences repeat, translated with the
cache off and on (a cold cache each run), alternating, on each engine given: throughput and
the cache's hit rate. 700 distinct test_2016_flickr sentences and 300 repeats drawn from
them, shuffled (seed 0), sent in chunks of 16 lines as a server's requests come.

    python bench/bench_cache.py --ckpt model.pt [--export DIR]
"""

from __future__ import annotations

import random

from common import read_lines, save_records, trained_engines, trained_model_args
from harness import Run, Side, alternate

from nmt.inference.cache import TranslationCache
from nmt.inference.output_text import best_text

CHUNK = 16


def workload() -> list[str]:
    distinct = read_lines("test_2016_flickr.en")[:700]
    rng = random.Random(0)
    lines = distinct + [rng.choice(distinct) for _ in range(300)]
    rng.shuffle(lines)
    return lines


def way(engine, search, lines: list[str], cached: bool, hit_rates: list[float]):
    def run() -> Run:
        engine.cache = TranslationCache(10_000) if cached else None
        out = []
        for at in range(0, len(lines), CHUNK):
            found = engine.translate(lines[at : at + CHUNK], search)
            out += best_text(engine.tokenizer, found)
        if cached:
            hit_rates.append(engine.cache.hits / (engine.cache.hits + engine.cache.misses))
        engine.cache = None
        return Run(len(lines), out, out)  # the same outputs, cached or not (checked)

    return run


def main() -> None:
    args = trained_model_args(__doc__)
    lines = workload()
    print(f"{len(lines)} lines, {len(set(lines))} distinct", flush=True)
    records = []
    for backend, engine, search in trained_engines(args):
        hit_rates: list[float] = []
        sides = [
            Side("off", "no cache", way(engine, search, lines, False, hit_rates)),
            Side("on", "cache_sentences=10000", way(engine, search, lines, True, hit_rates)),
        ]
        timings = alternate(sides, "sent/s", args.rounds)
        ratio = timings.ratio("on", "off", f"cache/{backend}/on_vs_off")
        print(f"  {ratio.line()}  hit rate {max(hit_rates):.3f}", flush=True)
        records.append(ratio.record() | {"hit_rate": max(hit_rates)})
    save_records(records, "cache")


if __name__ == "__main__":
    main()
