"""Which sentence splitter `segment=sentences` uses: candidates measured on paragraphs built
from Multi30k's English sentences, whose boundaries are known.

Paragraphs are 3 to 6 consecutive sentences of val + test_2016_flickr joined by one space (a
fixed seed picks the lengths). Reported per splitter: boundary precision and recall (a cut
counts where it falls between two source sentences), the share of paragraphs split exactly,
and sentences per second. Three sets: all sentences; only those without final punctuation
(about 5% of the data: captions), where a punctuation-led splitter cannot see the boundaries;
and each sentence alone, where every cut is wrong. `ours` is
nmt.translation.sentences.SentenceSplitter: the chosen library plus its cut of runs longer
than max_words.

    python bench/bench_splitters.py [--data DIR]
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

from common import data_dir

ENDS = re.compile(r"[.!?][\"')\]]*$")


def paragraphs(sentences: list[str], seed: int = 0) -> list[list[str]]:
    """Consecutive runs of 3 to 6 sentences."""
    rng, out, i = random.Random(seed), [], 0
    while i + 3 <= len(sentences):
        n = rng.randint(3, 6)
        out.append(sentences[i : i + n])
        i += n
    return out


def cut_offsets(parts: list[str], joined: str) -> set[int]:
    """Where each part after the first starts in `joined` (parts found in order)."""
    cuts, at = set(), 0
    for k, part in enumerate(parts):
        at = joined.index(part.strip(), at)
        if k:
            cuts.add(at)
        at += len(part.strip())
    return cuts


def candidates() -> dict[str, Callable[[str], list[str]]]:
    import blingfire
    import pysbd
    import sentencex
    from segtok.segmenter import split_single

    from nmt.translation.sentences import SentenceSplitter

    sbd = pysbd.Segmenter(language="en", clean=False)
    ours = {n: SentenceSplitter("en", n) for n in (20, 25, 30)}
    return {
        "pysbd": sbd.segment,
        "sentencex": lambda text: list(sentencex.segment("en", text)),
        "blingfire": lambda text: blingfire.text_to_sentences(text).split("\n"),
        "segtok": lambda text: list(split_single(text)),
    } | {
        f"ours, max_words {n}": lambda text, s=s: [text[a:b] for a, b in s.spans(text)]
        for n, s in ours.items()
    }


def measure(split: Callable[[str], list[str]], paras: list[list[str]]) -> dict:
    found = right = truth = exact = 0
    texts = [" ".join(p) for p in paras]
    start = time.perf_counter()
    outputs = [split(text) for text in texts]
    seconds = time.perf_counter() - start
    for para, text, parts in zip(paras, texts, outputs, strict=True):
        gold = cut_offsets(para, text)
        got = cut_offsets([p for p in parts if p.strip()], text)
        found, right, truth = found + len(got), right + len(got & gold), truth + len(gold)
        exact += got == gold
    return {
        "precision": right / max(found, 1),
        "recall": right / max(truth, 1),
        "exact": exact / len(paras),
        "sent_per_s": sum(map(len, paras)) / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="default: common.data_dir()")
    args = parser.parse_args()
    args.data = args.data or data_dir()
    sentences = []
    for split in ("val", "test_2016_flickr"):
        sentences += (args.data / f"{split}.en").read_text(encoding="utf-8").splitlines()
    sets = {
        "all sentences": paragraphs(sentences),
        "no final punctuation": paragraphs([s for s in sentences if not ENDS.search(s)]),
        "single sentences": [[s] for s in sentences],
    }
    print("| splitter | set | paragraphs | boundary precision | recall | exact | sent/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, split in candidates().items():
        for label, paras in sets.items():
            m = measure(split, paras)
            print(
                f"| {name} | {label} | {len(paras)} | {m['precision']:.3f} | {m['recall']:.3f}"
                f" | {m['exact']:.3f} | {m['sent_per_s']:,.0f} |"
            )


if __name__ == "__main__":
    main()
