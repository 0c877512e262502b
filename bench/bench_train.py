"""Training step throughput: our Transformer vs Hugging Face MarianMTModel of the same shape.

Same real Multi30k batches (~4,096 target tokens, bucketed by length), same label-smoothed
loss and Adam; one step = forward, loss, backward, optimizer step. Each (system, shape,
precision) runs in its own subprocess so peak memory is its own. The two systems are timed
back to back for several rounds, alternating which goes first, and the round with the median
ratio is reported: a shared machine's speed drifts within minutes, and a pair timed back to
back shares the drift.

Each worker runs its batches once untimed, then times them: the second epoch of a run, when
every batch shape has been seen. With native bf16, oneDNN compiles a kernel for each new
product shape (~2 ms each); a run pays that in its first epoch only (the sampler's batch
shapes recur every epoch), and both systems get the same kernel cache (nmt.cpu).

    python bench/bench_train.py [--rounds 3] [--steps N] [--shapes base tiny]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from common import Record, default_precisions, multi30k_tokenizer, peak_rss_mib, save_records

from nmt.config import TrainConfig
from nmt.cpu import set_onednn_kernel_cache
from nmt.training.losses import projected_label_smoothed_loss

SHAPES = {
    "base": dict(d_model=512, n_heads=8, d_ff=2048, layers=6),
    "tiny": dict(d_model=128, n_heads=4, d_ff=256, layers=4),  # the multi30k_cpu recipe
}
# Timed steps per round: ~30 s per system at either shape (a tiny step takes ~0.7 s, a base
# step ~9 s), long enough that a few slow steps do not decide the figure; the untimed pass
# before them doubles a worker's time.
DEFAULT_STEPS = {"base": 4, "tiny": 40}


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


def build_hf(shape: dict, vocab: int, activation: str = "relu"):
    from transformers import MarianConfig, MarianMTModel

    cfg = MarianConfig(
        vocab_size=vocab,
        decoder_vocab_size=vocab,
        d_model=shape["d_model"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
        encoder_attention_heads=shape["n_heads"],
        decoder_attention_heads=shape["n_heads"],
        encoder_ffn_dim=shape["d_ff"],
        decoder_ffn_dim=shape["d_ff"],
        activation_function=activation,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=1024,
        pad_token_id=0,
        forced_eos_token_id=3,  # generate ends a sentence held to its maximum length with EOS
        eos_token_id=3,
        decoder_start_token_id=2,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    model = MarianMTModel(cfg)

    def loss_sum(batch):  # the same label-smoothed loss, the way HF users compute it
        logits = model(
            input_ids=batch.src, attention_mask=batch.src.ne(0), decoder_input_ids=batch.tgt_in
        ).logits
        return F.cross_entropy(
            logits.flatten(0, 1),
            batch.tgt_out.flatten(),
            ignore_index=0,
            label_smoothing=0.1,
            reduction="sum",
        )

    return model, loss_sum


def worker(system: str, shape_name: str, precision: str, steps: int) -> dict:
    set_onednn_kernel_cache(TrainConfig.onednn_kernel_cache)  # as nmt.train; before any product
    torch.manual_seed(0)
    tokenizer = multi30k_tokenizer()
    batches = real_batches(tokenizer, steps)
    build = build_ours if system == "ours" else build_hf
    model, loss_of = build(SHAPES[shape_name], tokenizer.vocab_size)
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
    return {"tok_per_s": tokens / elapsed, "peak_mib": peak_rss_mib()}


def run(system: str, shape: str, precision: str, steps: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        system,
        shape,
        precision,
        "--steps",
        str(steps),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def median_round(shape: str, precision: str, steps: int, rounds: int):
    """Time both systems `rounds` times, alternating which goes first; return (ours, peer) of
    the round whose ratio is the median."""
    timed = []
    for round_index in range(rounds):
        order = ("ours", "hf") if round_index % 2 == 0 else ("hf", "ours")
        result = {system: run(system, shape, precision, steps) for system in order}
        ratio = result["ours"]["tok_per_s"] / result["hf"]["tok_per_s"]
        print(
            f"  {shape}/{precision} round {round_index + 1}/{rounds}: "
            f"ours {result['ours']['tok_per_s']:.0f}  peer {result['hf']['tok_per_s']:.0f} "
            f"tgt tok/s  ratio {ratio:.2f}x",
            flush=True,
        )
        timed.append((ratio, result["ours"], result["hf"]))
    timed.sort(key=lambda entry: entry[0])
    _, ours, peer = timed[len(timed) // 2]
    return ours, peer


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs=3, metavar=("SYSTEM", "SHAPE", "PRECISION"))
    parser.add_argument("--steps", type=int, help="timed steps (default: per shape)")
    parser.add_argument("--rounds", type=int, default=3, help="pairs timed; median reported")
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
            ours, peer = median_round(shape, precision, steps, args.rounds)
            for record in (
                Record(
                    f"train/{shape}/{precision}/tokens_per_s",
                    ours["tok_per_s"],
                    peer["tok_per_s"],
                    "tgt tok/s",
                ),
                Record(
                    f"train/{shape}/{precision}/peak_memory",
                    ours["peak_mib"],
                    peer["peak_mib"],
                    "MiB",
                    False,
                ),
            ):
                print(record.line(), flush=True)
                records.append(record)
    save_records(records, "train")


if __name__ == "__main__":
    main()
