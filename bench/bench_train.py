"""Training step throughput: our Transformer vs Hugging Face MarianMTModel of the same shape.

Same real Multi30k batches (~4,096 target tokens, bucketed by length), same label-smoothed
loss and Adam; one step = forward, loss, backward, optimizer step. Each run is a subprocess
of its own, so its peak memory (its process tree's PSS, bench/harness.py) is its own.

HF first picks its attention (`eager` or `sdpa`) by a short run of each, printed; then both
systems are timed for `--rounds` rounds, the order rotating (bench/harness.py), and each
ratio is the median of the per-round ratios with their min and max. fp32 against fp32, and
bf16 autocast against bf16 autocast where the CPU multiplies bf16 natively.

Each worker runs its batches once untimed, then times them: the second epoch of a run, when
every batch shape has been seen. With native bf16, oneDNN compiles a kernel for each new
product shape (~2 ms each); a run pays that in its first epoch only (the sampler's batch
shapes recur every epoch), and both systems get the same kernel cache (nmt.cpu).

    python bench/bench_train.py [--rounds 5] [--steps N] [--shapes tiny base]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
from common import default_precisions, multi30k_tokenizer, save_records
from harness import ROUNDS, Run, Side, alternate, run_measured, sweep
from marian import build_hf

from nmt.config import TrainConfig
from nmt.cpu import set_onednn_kernel_cache
from nmt.training.losses import projected_label_smoothed_loss

SHAPES = {
    "base": dict(d_model=512, n_heads=8, d_ff=2048, layers=6),
    "tiny": dict(d_model=128, n_heads=4, d_ff=256, layers=4),  # the multi30k_cpu recipe
}
# Timed steps per run: ~15-25 s per system at either shape (a tiny step takes ~0.7 s, a base
# step ~7 s); the untimed pass before them doubles a worker's time, and 5 rounds of both
# systems keep the whole comparison near 10 minutes.
DEFAULT_STEPS = {"base": 3, "tiny": 24}
ATTENTION = ["eager", "sdpa"]  # HF's attention implementations, each tried


def real_batches(tokenizer, count: int, max_tokens: int = 4096):
    """`count` Multi30k training batches from our token-bucketed sampler (seed 0)."""
    from common import read_lines

    from nmt.data.batching import TokenBatchSampler, collate

    src = tokenizer.encode(read_lines("train.en"))
    tgt = tokenizer.encode(read_lines("train.de"))
    sampler = TokenBatchSampler(
        [len(s) + 1 for s in src], [len(t) + 1 for t in tgt], max_tokens, shuffle=True, seed=0
    )
    batches = []
    for indices in list(sampler)[:count]:
        batches.append(
            collate([{"index": i, "src_ids": src[i], "tgt_ids": tgt[i]} for i in indices])
        )
    return batches


def build_ours(shape: dict, vocab: int):
    from nmt.model import ModelConfig, Transformer

    cfg = ModelConfig(
        vocab_size=vocab,
        d_model=shape["d_model"],
        n_heads=shape["n_heads"],
        d_ff=shape["d_ff"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
    )
    model = Transformer(cfg)

    def loss_sum(batch):  # our training step's loss: projection fused with the loss
        states = model.teacher_forced_states(batch.src, batch.tgt_in)
        return projected_label_smoothed_loss(states, model.output_weight, batch.tgt_out, 0.1, 0)[0]

    return model, loss_sum


def worker(system: str, shape_name: str, precision: str, steps: int) -> dict:
    set_onednn_kernel_cache(TrainConfig.onednn_kernel_cache)  # as nmt.train; before any product
    torch.manual_seed(0)
    tokenizer = multi30k_tokenizer()
    batches = real_batches(tokenizer, steps)
    if system == "ours":
        model, loss_of = build_ours(SHAPES[shape_name], tokenizer.vocab_size)
    else:  # hf-eager or hf-sdpa
        attention = system.removeprefix("hf-")
        model, loss_of = build_hf(SHAPES[shape_name], tokenizer.vocab_size, attention=attention)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
    tokens, elapsed = 0, 0.0
    for timed in (False, True):  # a warm pass over the batches, then the timed one
        for batch in batches:
            start = time.perf_counter()
            with autocast:
                loss = loss_of(batch)
            (loss / batch.num_tgt_tokens).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if timed:
                elapsed += time.perf_counter() - start
                tokens += batch.num_tgt_tokens
    return {"tokens": tokens, "seconds": elapsed}


def run(system: str, shape: str, precision: str, steps: int) -> Run:
    """One worker subprocess: its target tokens, the seconds its timed steps took, and its
    peak memory (PSS of the process and any children)."""
    cmd = [sys.executable, __file__, "--worker", system, shape, precision, "--steps", str(steps)]
    out, peak_mib = run_measured(cmd)
    result = json.loads(out.strip().splitlines()[-1])
    return Run(result["tokens"], None, None, result["seconds"], peak_mib)


def compare(shape: str, precision: str, steps: int, rounds: int) -> list[dict]:
    attention = sweep(
        f"{shape}/{precision} hf attention",
        {a: lambda a=a: run(f"hf-{a}", shape, precision, max(1, steps // 2)) for a in ATTENTION},
        warm=False,  # each worker warms itself
    )
    sides = [
        Side("ours", "", lambda: run("ours", shape, precision, steps)),
        Side("hf", attention, lambda: run(f"hf-{attention}", shape, precision, steps)),
    ]
    timings = alternate(sides, "tgt tok/s", rounds, same_work=False, warm=False)
    ratios = [
        timings.ratio("ours", "hf", f"train/{shape}/{precision}/tokens_per_s"),
        timings.memory_ratio("ours", "hf", f"train/{shape}/{precision}/peak_memory"),
    ]
    for ratio in ratios:
        print("  " + ratio.line(), flush=True)
    return [ratio.record() for ratio in ratios]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs=3, metavar=("SYSTEM", "SHAPE", "PRECISION"))
    parser.add_argument("--steps", type=int, help="timed steps (default: per shape)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--shapes", nargs="+", default=["tiny", "base"])
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"])
    args = parser.parse_args()
    if args.rounds < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--rounds and --steps must be at least 1")
    if args.worker:
        print(json.dumps(worker(*args.worker, args.steps)))
        return
    multi30k_tokenizer()  # train it once, outside the timed workers
    precisions = args.precisions or default_precisions()
    records = []
    for shape in args.shapes:
        for precision in precisions:
            steps = args.steps if args.steps is not None else DEFAULT_STEPS[shape]
            records += compare(shape, precision, steps, args.rounds)
    save_records(records, "train")


if __name__ == "__main__":
    main()
