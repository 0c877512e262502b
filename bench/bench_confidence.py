"""How far the confidence can be trusted (#40): the model's own translations of
test_2016_flickr, against their sentence chrF, with 95% bootstrap intervals (1,000 resamples
of the test lines, seed 0).

- Spearman correlation of the calibrated confidence with sentence chrF, beside a baseline
  that knows only the source length (its chrF fitted on val by isotonic regression,
  whichever direction fits better: a monotone map, so its Spearman is the length's own).
- Mean absolute error of the confidence as a prediction of chrF / 100, beside always
  predicting the val mean.
- Words: in each reference of 3 words or more, one word (chosen at random) replaced by a
  word of another reference; both force-decoded; the share of lines where the replaced
  word's probability is below the original word's.

    python bench/bench_confidence.py --ckpt model.pt   # calibrated: python -m nmt.calibrate
"""

from __future__ import annotations

import argparse
import os
import random

import numpy as np
import sacrebleu
from common import read_lines, save_records
from scipy.stats import spearmanr

from nmt.config import InferenceConfig
from nmt.decoding.settings import DecodeConfig
from nmt.inference import loading
from nmt.inference.calibration import Calibration
from nmt.inference.search_choice import choose_search

RESAMPLES = 1000


def translated(engine, search, lines: list[str], refs: list[str]):
    """(scores, sentence chrF / 100) of the model's translation of each line."""
    best = [h[0].tokens if h else [] for h in engine.translate(lines, search)]
    texts = engine.tokenizer.decode(best)
    chrf = [sacrebleu.sentence_chrf(t, [r]).score / 100 for t, r in zip(texts, refs, strict=True)]
    return engine.score(lines, best), np.array(chrf)


def interval(statistic, *columns) -> tuple[float, float, float]:
    """statistic on the lines, and its 95% bootstrap interval."""
    rng = np.random.default_rng(0)
    n = len(columns[0])
    draws = [statistic(*(c[idx] for c in columns)) for idx in rng.integers(0, n, (RESAMPLES, n))]
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(statistic(*columns)), float(low), float(high)


def spearman(a, b) -> float:
    return float(spearmanr(a, b).statistic)


def length_baseline(val_lengths, val_chrf):
    """The source-length predictor fitted on val: isotonic, in the better direction."""
    from sklearn.isotonic import IsotonicRegression

    fits = [
        IsotonicRegression(increasing=up, out_of_bounds="clip").fit(val_lengths, val_chrf)
        for up in (True, False)
    ]
    errors = [np.abs(f.predict(val_lengths) - val_chrf).mean() for f in fits]
    return fits[int(np.argmin(errors))]


def replaced_words(engine, lines, refs, seed: int = 0) -> tuple[int, int]:
    """(lines where the replaced word is less probable than the original, lines tried)."""
    rng = random.Random(seed)
    vocabulary = sorted({w for r in refs for w in r.split()})
    picked, corrupted, positions = [], [], []
    for i, ref in enumerate(refs):
        words = ref.split()
        if len(words) < 3 or not lines[i].strip():
            continue
        j = rng.randrange(len(words))
        other = words[j]
        while other == words[j]:
            other = rng.choice(vocabulary)
        picked.append(i)
        corrupted.append(" ".join([*words[:j], other, *words[j + 1 :]]))
        positions.append(j)
    sources = [lines[i] for i in picked]
    before = engine.score(sources, [refs[i] for i in picked])
    after = engine.score(sources, corrupted)
    lower = sum(
        a.word_log_probs[j] < b.word_log_probs[j]
        for a, b, j in zip(after, before, positions, strict=True)
    )
    return lower, len(picked)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", default=os.environ.get("NMT_BENCH_CKPT"))
    parser.add_argument("--backend", default="torch", choices=["torch", "ctranslate2"])
    args = parser.parse_args()
    if not args.ckpt:
        raise SystemExit("--ckpt: a trained model.pt, calibrated by python -m nmt.calibrate")
    engine = loading.load(
        InferenceConfig(ckpt=args.ckpt, decode=DecodeConfig(), backend=args.backend)
    )
    calibration: Calibration | None = engine.calibration
    if calibration is None:
        raise SystemExit(f"{args.ckpt} is not calibrated: python -m nmt.calibrate ckpt=... first")
    search, line = choose_search(engine.card, DecodeConfig(), [])
    print(line, "| calibrated on", calibration.fitted_on, flush=True)
    val_src, val_ref = read_lines("val.en"), read_lines("val.de")
    test_src, test_ref = read_lines("test_2016_flickr.en"), read_lines("test_2016_flickr.de")
    val_scores, val_chrf = translated(engine, search, val_src, val_ref)
    scores, chrf = translated(engine, search, test_src, test_ref)
    confidence = np.array([s.confidence for s in scores])
    lengths = np.array([len(ids) for ids in engine.tokenizer.encode(test_src)])
    val_lengths = np.array([len(ids) for ids in engine.tokenizer.encode(val_src)])
    by_length = length_baseline(val_lengths, val_chrf).predict(lengths)
    mean = np.full_like(chrf, val_chrf.mean())
    rows = {
        "spearman_confidence": interval(spearman, confidence, chrf),
        "spearman_source_length": interval(spearman, by_length, chrf),
        "mae_confidence": interval(lambda p, y: np.abs(p - y).mean(), confidence, chrf),
        "mae_val_mean": interval(lambda p, y: np.abs(p - y).mean(), mean, chrf),
    }
    lower, tried = replaced_words(engine, test_src, test_ref)
    print(f"\n{len(test_src)} test lines, {args.backend}, 95% bootstrap intervals")
    records = []
    for name, (value, low, high) in rows.items():
        print(f"  {name:24} {value:7.4f} [{low:.4f}-{high:.4f}]")
        records.append({"name": f"confidence/{name}", "value": value, "low": low, "high": high})
    print(f"  replaced word less probable than the original: {lower}/{tried} = {lower / tried:.1%}")
    records.append({"name": "confidence/replaced_word_lower", "lower": lower, "lines": tried})
    save_records(records, "confidence")


if __name__ == "__main__":
    main()
