"""The Hugging Face export (#42): what transformers' `generate` gives from the directory
`python -m nmt.export format=hf` writes, against our own search on the same model, both
scored with sacreBLEU on the same lines (val by default: this checks a conversion, not a
recipe).

- greedy: ours and `generate(num_beams=1)`, token for token (the count of equal lines).
- beam: ours with the checkpoint's search, `generate` with the exported generation config
  (the same beam; a GNMT alpha runs as its power-law counterpart, our exact stop as HF's
  heuristic one). Target: BLEU within 0.1. A third line, ours with HF's power-law alpha,
  tells the penalty's share of any gap from the stopping rule's.
- speed of the two beams, beside the quality: each side first picks its batch on a slice
  (ours: tokens per batch; HF: sentences per call and attention), then both are timed
  `--rounds` times, alternating (bench/harness.py), float32 both.

    python bench/bench_hf.py --ckpt outputs/<run>/model.pt [--split val] [--rounds 3]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch
from common import ROOT, read_lines, save_records, trained_model_args
from harness import Run, Side, alternate, sweep

from nmt.checkpoint import load_checkpoint
from nmt.decoding.penalties import gnmt_as_power
from nmt.decoding.settings import DecodeConfig
from nmt.inference.output_text import best_text
from nmt.inference.torch_engine import TorchEngine
from nmt.vocabulary import EOS_ID

OUR_BUDGETS = [4096, 8192]  # tokens per batch
HF_BATCHES = [32, 64, 128]  # sentences per generate call
HF_ATTENTION = ["eager", "sdpa"]


class Generate:
    """`generate` of the exported directory, `batch` sentences per call in length order."""

    def __init__(self, folder: Path, batch: int, attention: str):
        from transformers import MarianMTModel, MarianTokenizer

        self.tokenizer = MarianTokenizer.from_pretrained(folder)
        self.model = MarianMTModel.from_pretrained(folder, attn_implementation=attention).eval()
        self.batch = batch

    @torch.inference_mode()
    def tokens(self, lines: list[str], **overrides) -> list[list[int]]:
        order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
        out: list[list[int]] = [[] for _ in lines]
        for start in range(0, len(order), self.batch):
            chunk = order[start : start + self.batch]
            batch = self.tokenizer([lines[i] for i in chunk], return_tensors="pt", padding=True)
            for i, row in zip(
                chunk, self.model.generate(**batch, **overrides).tolist(), strict=True
            ):
                row = row[1:]  # past the start token
                out[i] = row[: row.index(EOS_ID)] if EOS_ID in row else row
        return out


def bleu(hyps: list[str], refs: list[str]) -> float:
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def main() -> None:
    args = trained_model_args(__doc__, split="val")
    sources, refs = read_lines(f"{args.split}.en"), read_lines(f"{args.split}.de")
    search = load_checkpoint(args.ckpt).search or DecodeConfig()
    engines = {n: TorchEngine.load([args.ckpt], "cpu", "float32", n) for n in OUR_BUDGETS}
    ours = engines[OUR_BUDGETS[0]]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "hf"
        export = [sys.executable, "-m", "nmt.export", f"ckpt={args.ckpt}", f"out={folder}"]
        subprocess.run([*export, "format=hf"], check=True, cwd=ROOT)
        peers = {
            f"{batch} {attention}": Generate(folder, batch, attention)
            for batch in HF_BATCHES
            for attention in HF_ATTENTION
        }
        peer = next(iter(peers.values()))
        decode = peer.tokenizer.batch_decode

        greedy_ours = [h[0].tokens for h in ours.translate(sources, DecodeConfig())]
        greedy_hf = peer.tokens(sources, num_beams=1)
        same = sum(a == b for a, b in zip(greedy_ours, greedy_hf, strict=True))
        print(f"greedy: {same}/{len(sources)} lines token for token", flush=True)

        def our_side(engine, lines):
            return lambda: Run(
                len(lines), None, best_text(engine.tokenizer, engine.translate(lines, search))
            )

        def hf_side(generate, lines):
            return lambda: Run(
                len(lines), None, decode(generate.tokens(lines), skip_special_tokens=True)
            )

        slice_ = sources[:200]
        our_pick = sweep("ours", {str(n): our_side(e, slice_) for n, e in engines.items()})
        hf_pick = sweep("hf", {label: hf_side(g, slice_) for label, g in peers.items()})
        sides = [
            Side("ours", f"max_tokens {our_pick}", our_side(engines[int(our_pick)], sources)),
            Side("hf", f"batch, attention: {hf_pick}", hf_side(peers[hf_pick], sources)),
        ]
        timings = alternate(sides, "sent/s", args.rounds)
        beams = {name: timings.outputs[name] for name in ("ours", "hf")}
        power = replace(
            search, length_norm="power", len_penalty=gnmt_as_power(search.len_penalty or 0)
        )
        if search.strategy == "beam" and search.length_norm == "gnmt":
            beams["ours, HF's power-law alpha"] = best_text(
                ours.tokenizer, ours.translate(sources, power)
            )
        scores = {name: bleu(hyps, refs) for name, hyps in beams.items()}
        for name, score in scores.items():
            print(f"  BLEU {name}: {score:.2f}", flush=True)
        gap = scores["hf"] - scores["ours"]
        print(f"  beam BLEU hf - ours: {gap:+.2f} (target within 0.1)", flush=True)
        ratio = timings.ratio("ours", "hf", "hf_export/beam_speed")
        print(f"  {ratio.line()}", flush=True)
        save_records(
            [
                ratio.record()
                | {
                    "split": args.split,
                    "greedy_equal": same,
                    "lines": len(sources),
                    "bleu": scores,
                    "bleu_gap_hf_minus_ours": gap,
                    "search": str(search),
                }
            ],
            "hf_export",
        )


if __name__ == "__main__":
    main()
