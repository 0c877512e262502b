"""How well the model's word alignments match an aligner's (#40): precision, recall and AER
on test_2016_flickr (source, reference), against eflomal run on train + test and symmetrised
with grow-diag-final-and (nmt/data/word_alignment.py; no gold English-German alignments can
be fetched here, so eflomal's stand in for gold, all links sure).

The model aligns each reference forced as its output (Engine.align), from the cross-attention
of one decoder layer: every layer in turn averaged over all heads (raw attention, what a model
without guided alignment gives), and the model's own alignment layer and heads.

    python bench/bench_alignment.py --ckpt model.pt [--backend ctranslate2]
"""

from __future__ import annotations

import argparse
import os
import time

from common import read_lines, save_records

from nmt.config import InferenceConfig
from nmt.data.word_alignment import align_corpus
from nmt.decoding.settings import DecodeConfig
from nmt.evaluation.alignment_error import alignment_error
from nmt.inference import loading
from nmt.inference.alignment import pharaoh


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", default=os.environ.get("NMT_BENCH_CKPT"))
    args = parser.parse_args()
    if not args.ckpt:
        raise SystemExit("--ckpt: a trained model.pt")
    engine = loading.load(InferenceConfig(ckpt=args.ckpt, decode=DecodeConfig()))
    train_src, train_ref = read_lines("train.en"), read_lines("train.de")
    src, ref = read_lines("test_2016_flickr.en"), read_lines("test_2016_flickr.de")
    start = time.perf_counter()
    links = align_corpus(train_src + src, train_ref + ref)[len(train_src) :]
    gold = [pharaoh(sorted(pairs)) for pairs in links]
    print(f"eflomal on {len(train_src) + len(src)} pairs: {time.perf_counter() - start:.1f} s")
    cfg = engine.model.cfg
    own = (cfg.alignment_layer_index, cfg.alignment_heads)
    settings = [(layer, 0) for layer in range(cfg.decoder_layers)]
    settings += [own] if own[1] else []
    records = []
    print(f"{'layer':>5} {'heads':>5} {'precision':>9} {'recall':>7} {'AER':>7}")
    for layer, heads in settings:
        cfg.alignment_layer, cfg.alignment_heads = layer, heads
        found = [pharaoh(a or []) for a in engine.align(src, ref)]
        result = alignment_error(gold, found)
        label = "all" if heads == 0 else str(heads)
        print(
            f"{layer:5d} {label:>5} {result.precision:9.4f} {result.recall:7.4f} {result.aer:7.4f}"
        )
        records.append(
            {
                "name": f"alignment/layer{layer}_heads{heads}",
                "aer": result.aer,
                "precision": result.precision,
                "recall": result.recall,
            }
        )
    save_records(records, "alignment")


if __name__ == "__main__":
    main()
