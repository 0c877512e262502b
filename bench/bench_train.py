"""Training step throughput: our Transformer vs Hugging Face MarianMTModel of the same shape.

Same real Multi30k batches (~4,096 target tokens, bucketed by length), same label-smoothed
loss and Adam; one step = forward, loss, backward, optimizer step. Each run is a subprocess
of its own, so its peak memory (its process tree's PSS, bench/harness.py) is its own.

HF first picks its attention (`eager` or `sdpa`) by a short run of each, printed; then both
systems are timed for `--rounds` rounds, the order rotating (bench/harness.py), and each
ratio is the median of the per-round ratios with their min and max. fp32 against fp32, and
bf16 autocast against bf16 autocast where the device multiplies bf16 natively. `--device cuda`
runs both on the GPU; each run's peak memory is then the GPU's (`max_memory_allocated`).

Each worker runs its batches once untimed, then times them: the second epoch of a run, when
every batch shape has been seen. With native bf16, oneDNN compiles a kernel for each new
product shape (~2 ms each); a run pays that in its first epoch only (the sampler's batch
shapes recur every epoch), and both systems get the same kernel cache (nmt.cpu).

    python bench/bench_train.py [--rounds 5] [--steps N] [--shapes tiny base] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import torch
from common import default_precisions, multi30k_tokenizer, save_records
from harness import ROUNDS, Run, Side, alternate, run_measured, sweep
from marian import build_hf, shape_config

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
GPU_STEPS = 60  # a base step takes ~30 ms on an H100: a few seconds per system
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
    from nmt.model import Transformer

    model = Transformer(shape_config(shape, vocab))

    def loss_sum(batch):  # our training step's loss: projection fused with the loss
        states = model.teacher_forced_states(batch.src, batch.tgt_in)
        return projected_label_smoothed_loss(states, model.output_weight, batch.tgt_out, 0.1, 0)[0]

    return model, loss_sum


def worker(system: str, shape_name: str, precision: str, steps: int, device: str) -> dict:
    set_onednn_kernel_cache(TrainConfig.onednn_kernel_cache)  # as nmt.train; before any product
    torch.manual_seed(0)
    tokenizer = multi30k_tokenizer()
    batches = [
        replace(b, src=b.src.to(device), tgt_in=b.tgt_in.to(device), tgt_out=b.tgt_out.to(device))
        for b in real_batches(tokenizer, steps)
    ]
    if system == "ours":
        model, loss_of = build_ours(SHAPES[shape_name], tokenizer.vocab_size)
    else:  # hf-eager or hf-sdpa
        attention = system.removeprefix("hf-")
        model, loss_of = build_hf(SHAPES[shape_name], tokenizer.vocab_size, attention=attention)
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    autocast = torch.autocast(
        torch.device(device).type, dtype=torch.bfloat16, enabled=precision == "bf16"
    )
    gpu = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if gpu else lambda: None
    tokens, elapsed = 0, 0.0
    for timed in (False, True):  # a warm pass over the batches, then the timed one
        sync()
        for batch in batches:
            start = time.perf_counter()
            with autocast:
                loss = loss_of(batch)
            (loss / batch.num_tgt_tokens).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            sync()
            if timed:
                elapsed += time.perf_counter() - start
                tokens += batch.num_tgt_tokens
    gpu_mib = torch.cuda.max_memory_allocated() / 2**20 if gpu else None
    return {"tokens": tokens, "seconds": elapsed, "gpu_mib": gpu_mib}


def run(system: str, shape: str, precision: str, steps: int, device: str) -> Run:
    """One worker subprocess: its target tokens, the seconds its timed steps took, and its
    peak memory (PSS of the process and any children; on a GPU, the GPU's)."""
    cmd = [sys.executable, __file__, "--worker", system, shape, precision, "--steps", str(steps)]
    out, peak_mib = run_measured(cmd + ["--device", device])
    result = json.loads(out.strip().splitlines()[-1])
    return Run(result["tokens"], None, None, result["seconds"], result["gpu_mib"] or peak_mib)


def compare(shape: str, precision: str, steps: int, rounds: int, device: str) -> list[dict]:
    prefix = "train" if device == "cpu" else f"train_{device}"
    attention = sweep(
        f"{shape}/{precision} hf attention",
        {
            a: lambda a=a: run(f"hf-{a}", shape, precision, max(1, steps // 2), device)
            for a in ATTENTION
        },
        warm=False,  # each worker warms itself
    )
    sides = [
        Side("ours", "", lambda: run("ours", shape, precision, steps, device)),
        Side("hf", attention, lambda: run(f"hf-{attention}", shape, precision, steps, device)),
    ]
    timings = alternate(sides, "tgt tok/s", rounds, same_work=False, warm=False)
    name = f"{prefix}/{shape}/{precision}"
    return timings.report_speed_and_memory(
        "ours", "hf", f"{name}/tokens_per_s", f"{name}/peak_memory"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs=3, metavar=("SYSTEM", "SHAPE", "PRECISION"))
    parser.add_argument("--steps", type=int, help="timed steps (default: per shape)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--shapes", nargs="+", default=["tiny", "base"])
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    if args.rounds < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--rounds and --steps must be at least 1")
    if args.worker:
        print(json.dumps(worker(*args.worker, args.steps, args.device)))
        return
    multi30k_tokenizer()  # train it once, outside the timed workers
    gpu = args.device != "cpu"
    precisions = args.precisions or (["fp32", "bf16"] if gpu else default_precisions())
    records = []
    for shape in args.shapes:
        for precision in precisions:
            steps = args.steps or (GPU_STEPS if gpu else DEFAULT_STEPS[shape])
            records += compare(shape, precision, steps, args.rounds, args.device)
    save_records(records, "train" if not gpu else f"train_{args.device}")


if __name__ == "__main__":
    main()
