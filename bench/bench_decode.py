"""Decoding speed: our greedy and beam search vs Hugging Face `generate` on MarianMTModel.

Both models have the base shape; random weights would give different lengths, so
every sentence is forced to the same output length in both systems (24 decoder steps: our
23 tokens + forced EOS, HF's 24 new tokens), over test_2016_flickr (1,000 sentences)
sorted by length in batches of 64. Sentences per second, and the ratio, in float32 for both,
bfloat16 for both, and ours in bfloat16 (`translate dtype=bfloat16`) against HF's float32.

    python bench/bench_decode.py [--sentences 1000] [--length 24] [--batch 64]
"""

from __future__ import annotations

import argparse
import time

import torch
from bench_train import SHAPES, build_hf, build_ours
from common import Record, default_precisions, multi30k_tokenizer, read_lines, save_records

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def source_batches(tokenizer, sentences: int, batch_size: int) -> list[torch.Tensor]:
    ids = [
        s + [tokenizer.eos_id]
        for s in tokenizer.encode(read_lines("test_2016_flickr.en")[:sentences])
    ]
    ids.sort(key=len)
    batches = []
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        src = torch.zeros(len(chunk), max(map(len, chunk)), dtype=torch.long)
        for row, s in enumerate(chunk):
            src[row, : len(s)] = torch.tensor(s)
        batches.append(src)
    return batches


@torch.inference_mode()
def time_ours(model, batches, beam: int, length: int) -> float:
    from nmt.config import DecodeConfig
    from nmt.decoding.search import translate_batch

    cfg = DecodeConfig(
        strategy="beam" if beam > 1 else "greedy",
        beam_size=beam,
        len_penalty=0.6 if beam > 1 else None,
        max_len_a=0.0,
        max_len_b=length - 1,
        min_len=length - 1,
    )
    start = time.perf_counter()
    for src in batches:
        translate_batch(model, src, cfg)
    return time.perf_counter() - start


@torch.inference_mode()
def time_hf(model, batches, beam: int, length: int) -> float:
    start = time.perf_counter()
    for src in batches:
        model.generate(
            input_ids=src,
            attention_mask=src.ne(0),
            num_beams=beam,
            do_sample=False,
            min_new_tokens=length,
            max_new_tokens=length,
            length_penalty=0.6 if beam > 1 else 1.0,
        )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"])
    args = parser.parse_args()
    torch.manual_seed(0)
    tokenizer = multi30k_tokenizer()
    ours, _ = build_ours(SHAPES["base"], tokenizer.vocab_size)
    hf, _ = build_hf(SHAPES["base"], tokenizer.vocab_size)
    ours.eval(), hf.eval()
    batches = source_batches(tokenizer, args.sentences, args.batch)
    time_ours(ours, batches[:1], 1, 4), time_hf(hf, batches[:1], 1, 4)  # warm up both
    precisions = args.precisions or default_precisions()
    records = []
    for beam in args.beams:
        name = "greedy" if beam == 1 else f"beam{beam}"
        speed = {}
        for precision in precisions:
            dtype = DTYPES[precision]
            ours.to(dtype), hf.to(dtype)
            speed["ours", precision] = args.sentences / time_ours(ours, batches, beam, args.length)
            speed["hf", precision] = args.sentences / time_hf(hf, batches, beam, args.length)
        pairs = [(p, p) for p in precisions]
        if "bf16" in precisions and "fp32" in precisions:
            # What a user gets from `translate dtype=bfloat16` against HF's default generate.
            pairs.append(("bf16", "fp32"))
        for record in (
            Record(f"decode/{name}/{a}_vs_{b}", speed["ours", a], speed["hf", b], "sent/s")
            for a, b in pairs
        ):
            print(record.line(), flush=True)
            records.append(record)
    save_records(records, "decode")


if __name__ == "__main__":
    main()
