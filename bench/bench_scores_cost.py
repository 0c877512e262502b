"""What scores and alignments cost (#40): the same 1,000 test_2016_flickr lines translated by
a trained model with its own search, plain, and with `alignments=true` plus `scores=true`
(the attention of the alignment head recorded during the search; the scores from the
search's own token log-probs on torch, from a force-decoding pass on CTranslate2), on each
engine, alternating (bench/harness.py). Target: at most 10% more time.

Training: one step of the guided-alignment loss (the alignment head's attention written out,
the cross-entropy against links) against one without, on the same real batches with links
made up as a diagonal (the cost does not depend on which links), the multi30k_cpu shape.
Target: at most 5% more time.

    python bench/bench_scores_cost.py --ckpt model.pt [--export DIR]
"""

from __future__ import annotations

import statistics
import time

import torch
from common import multi30k_tokenizer, read_lines, save_records, trained_engines, trained_model_args
from harness import Run, Side, alternate


def decoding(engine, search, lines: list[str], extras: bool):
    def run() -> Run:
        found = engine.translate(lines, search, alignments=extras, scores=extras)
        if extras:  # as translate scores=true: from the search where it kept them
            engine.rate(lines, found)
        return Run(len(lines), None, [h[0].tokens if h else [] for h in found])

    return run


def training(guided: bool, steps: int):
    """A worker-less training run of the tiny shape: `steps` timed steps after a warm pass."""
    from bench_train import SHAPES, build_ours, real_batches

    from nmt.training.losses import alignment_loss, projected_label_smoothed_loss

    torch.manual_seed(0)
    tokenizer = multi30k_tokenizer()
    batches = real_batches(tokenizer, steps)
    model, _ = build_ours(SHAPES["tiny"], tokenizer.vocab_size)
    model.cfg.alignment_heads = 1
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    links = []
    for batch in batches:  # a diagonal: target piece t with source piece min(t, S - 1)
        rows, length = batch.tgt_out.shape
        t = torch.arange(length)
        s = t.clamp(max=batch.src.size(1) - 1)
        links.append(
            torch.stack(
                [torch.arange(rows).repeat_interleave(length), t.repeat(rows), s.repeat(rows)], 1
            )
        )

    def run() -> Run:
        start = time.perf_counter()
        tokens = 0
        for batch, link in zip(batches, links, strict=True):
            states, attention = model.teacher_forced_states_and_alignment(
                batch.src, batch.tgt_in, guided
            )
            loss, _ = projected_label_smoothed_loss(
                states, model.output_weight, batch.tgt_out, 0.1, 0
            )
            if guided:
                loss = loss + 0.05 * alignment_loss(attention, link)
            (loss / batch.num_tgt_tokens).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tokens += batch.num_tgt_tokens
        return Run(tokens, None, None, time.perf_counter() - start)

    return run


def main() -> None:
    args = trained_model_args(__doc__, steps=12)
    lines = read_lines("test_2016_flickr.en")[:1000]
    records = []
    for backend, engine, search in trained_engines(args):
        sides = [
            Side("plain", "translate", decoding(engine, search, lines, False)),
            Side("extras", "alignments + scores", decoding(engine, search, lines, True)),
        ]
        timings = alternate(sides, "sent/s", args.rounds, same_work=False)
        ratio = timings.ratio("plain", "extras", f"cost/{backend}/decoding")
        cost = statistics.median(ratio.ratios) - 1
        print(f"  {ratio.line()}  cost {cost:+.1%} (target at most +10%)", flush=True)
        records.append(ratio.record() | {"cost": cost, "target": 0.10})
    sides = [
        Side("plain", "tiny shape", training(False, args.steps)),
        Side("guided", "alignment loss", training(True, args.steps)),
    ]
    timings = alternate(sides, "tgt tok/s", args.rounds, same_work=False)
    ratio = timings.ratio("plain", "guided", "cost/training/guided_alignment")
    cost = statistics.median(ratio.ratios) - 1
    print(f"  {ratio.line()}  cost {cost:+.1%} (target at most +5%)", flush=True)
    records.append(ratio.record() | {"cost": cost, "target": 0.05})
    save_records(records, "cost")


if __name__ == "__main__":
    main()
