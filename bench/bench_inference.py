"""Translating: ours (torch), CTranslate2 (float32, int8) and Hugging Face `generate`, the same
weights, the same test_2016_flickr lines end to end (tokenize, search, detokenize).

Every system first finds its best settings on a slice of the lines (the sweep is printed):
ours and CTranslate2 their batch budget in tokens and 2 single-threaded workers (ours: threads
of one process, `TorchEngine(workers=2)`, as `nmt.translate` runs on 2 cores) or 1 worker
on 2 threads, HF its sentences per `generate` call and attention (`eager`,
`sdpa`). Then all systems are warmed up on the whole work and timed `--rounds` times, the
order rotating (bench/harness.py); each ratio is the median of the per-round ratios with
their min and max. Precision: fp32 against fp32, bf16 against bf16 where the CPU multiplies
bf16 natively; ours in bf16 against HF in fp32 is an extra line, labelled so. `--device cuda`
runs every system on the GPU (CTranslate2 there in float32, bfloat16 and int8_float16).

Two models:
- base: the paper's base shape (6+6 layers, d_model 512, 5k vocabulary), random weights;
  every sentence in every system takes exactly `--steps` decoder steps (the last one EOS
  where the system forces it), checked from the outputs: equal work.
- recipe: a trained model.pt (`--ckpt`), free to stop; BLEU beside every speed, since then
  outputs differ. Beam 4 uses the power-law length penalty (`--alpha`) in every system, the
  one form all three share.

    python bench/bench_inference.py [--ckpt outputs/<run>/model.pt] [--sentences 1000]
                                    [--device cuda] [--searches beam4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch
from common import default_precisions, multi30k_tokenizer, read_lines, save_records
from harness import ROUNDS, Run, Side, alternate, sweep

from nmt.checkpoint import Checkpoint, load_checkpoint
from nmt.ct2.model_dir import export
from nmt.decoding.settings import DecodeConfig
from nmt.hf.marian import marian_model as marian_with_our_weights
from nmt.inference.ct2_engine import CTranslate2Engine
from nmt.inference.torch_engine import TorchEngine
from nmt.model import ModelConfig, Transformer
from nmt.vocabulary import BOS_ID, EOS_ID, PAD_ID

BASE = ModelConfig(vocab_size=5000, dropout=0.0)  # the base shape, our Multi30k 5k vocabulary
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TORCH_BUDGETS = [4096, 8192, 16384, 32768]  # tokens per batch
CT2_BUDGETS = [512, 1024, 2048, 4096]
LAYOUTS = {"2x1": 2, "1x2": 1}  # workers x threads on 2 cores -> workers (both engines)
HF_BATCHES = [64, 128, 256]  # sentences per generate call
HF_ATTENTION = ["eager", "sdpa"]
CT2_QUANTIZATION = {"fp32": "float32", "int8": "int8", "bf16": "float32"}  # -> nmt.export's
# compute types: the weights' own on the CPU; on a GPU, int8 weights with float16 activations
CT2_COMPUTE = {
    "cpu": {"fp32": "default", "int8": "default", "bf16": "bfloat16"},
    "cuda": {"fp32": "float32", "int8": "int8_float16", "bf16": "bfloat16"},
}
# Targets (#39): CT2 int8 over ours fp32 and over HF fp32; ours over HF at equal precision.
TARGETS = {"ct2_int8_vs_ours_fp32": 3.0, "ct2_int8_vs_hf_fp32": 4.0}
TARGETS.update({f"ours_{p}_vs_hf_{p}": 1.3 for p in DTYPES})


class Ours:
    """One of our engines: `steps` decoder steps per sentence, or free. `ct2`: the engine stops
    a sentence at its length limit without an EOS step (CTranslate2), rather than forcing one."""

    def __init__(self, engine, ct2: bool = False):
        self.engine, self.ct2 = engine, ct2

    def decode(self, lines: list[str], search: DecodeConfig, steps: int | None) -> Run:
        ct2 = self.ct2
        if steps is not None:
            # ours ends a sentence held to its limit with a forced EOS step; CTranslate2 stops
            # at its limit without one, so it gets one more token to take the same steps
            tokens = steps if ct2 else steps - 1
            search = replace(search, max_len_a=0.0, max_len_b=tokens, min_len=tokens)
        best = [nbest[0].tokens for nbest in self.engine.translate(lines, search)]
        taken = tuple(len(t) if ct2 and steps == len(t) else len(t) + 1 for t in best)
        return Run(len(lines), taken if steps is not None else None, best)


class HF:
    """`MarianMTModel.generate` with our weights, `batch` length-sorted sentences per call."""

    def __init__(self, model: Transformer, tokenizer, batch: int, attention: str, dtype, device):
        self.hf = marian_with_our_weights(model).to(device, dtype)
        self.hf.set_attn_implementation(attention)
        self.tokenizer, self.batch = tokenizer, batch

    @torch.inference_mode()
    def decode(self, lines: list[str], search: DecodeConfig, steps: int | None) -> Run:
        ids = [s + [EOS_ID] for s in self.tokenizer.encode(lines)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        best: list[list[int]] = [[] for _ in lines]
        taken = [0] * len(lines)
        for start in range(0, len(order), self.batch):
            chunk = order[start : start + self.batch]
            src = torch.full((len(chunk), max(len(ids[i]) for i in chunk)), PAD_ID)
            for row, i in enumerate(chunk):
                src[row, : len(ids[i])] = torch.tensor(ids[i])
            if steps is None:
                most = int(search.max_len_a * src.size(1) + search.max_len_b)
                limits = dict(max_new_tokens=most + 1)
            else:
                limits = dict(min_new_tokens=steps, max_new_tokens=steps)
            beam = search.strategy == "beam"
            src = src.to(self.hf.device)
            generated = self.hf.generate(
                input_ids=src,
                attention_mask=src.ne(PAD_ID),
                num_beams=search.beam_size if beam else 1,
                do_sample=False,
                length_penalty=search.len_penalty if beam else 1.0,
                early_stopping=False,
                suppress_tokens=[PAD_ID, BOS_ID],  # which our searches never choose
                **limits,
            )
            for i, row in zip(chunk, generated[:, 1:].tolist(), strict=True):  # past BOS
                end = row.index(EOS_ID) if EOS_ID in row else len(row)
                best[i], taken[i] = row[:end], min(end + 1, len(row))
        return Run(len(lines), tuple(taken) if steps is not None else None, best)


def candidates(name: str, model: Transformer, tokenizer, folder: Path, device: str, search) -> dict:
    """Every setting the sweep tries for system `name`, as label -> a system object maker."""
    kind, precision = name.split()
    if kind == "ours":
        copy = Transformer(model.cfg)
        copy.load_state_dict(model.state_dict())
        copy = copy.to(device, DTYPES[precision]).eval()
        checkpoint = Checkpoint(copy, tokenizer, "en", "de", {})
        layouts = LAYOUTS if device == "cpu" else {"1 GPU": 1}
        return {
            f"{layout} max_tokens={b}": lambda b=b, w=workers: Ours(
                TorchEngine(checkpoint, b, workers=w)
            )
            for layout, workers in layouts.items()
            for b in TORCH_BUDGETS
        }
    if kind == "ct2":
        fp32 = Checkpoint(model.float().eval(), tokenizer, "en", "de", {})
        path = folder / precision
        if not path.exists():
            export(fp32, path, CT2_QUANTIZATION[precision], False)
        compute = CT2_COMPUTE["cpu" if device == "cpu" else "cuda"][precision]
        try:  # CTranslate2's wheel may lack the CUDA libraries of the machine at hand
            ct2_engine(path, CT2_BUDGETS[0], 1, device, compute).decode(["A dog."], search, None)
        except (RuntimeError, ValueError) as error:
            print(f"{name} unavailable on {device}: {error}", flush=True)
            return {}
        layouts = LAYOUTS if device == "cpu" else {"1 GPU": 1}
        out = {}
        for layout, workers in layouts.items():
            for b in CT2_BUDGETS if device == "cpu" else TORCH_BUDGETS:
                out[f"{layout} max_tokens={b}"] = lambda b=b, w=workers: ct2_engine(
                    path, b, w, device, compute
                )
        return out
    return {
        f"{attention} batch={b}": lambda b=b, a=attention: HF(
            model, tokenizer, b, a, DTYPES[precision], device
        )
        for attention in HF_ATTENTION
        for b in HF_BATCHES
    }


def ct2_engine(path: Path, budget: int, workers: int, device: str, compute: str) -> Ours:
    threads = torch.get_num_threads()
    engine = CTranslate2Engine(path, device, compute, threads, budget)
    if device == "cpu" and workers != threads:
        engine.engine = engine.new_engine(workers=workers)
    return Ours(engine, ct2=True)


def compare(model, tokenizer, lines, refs, search_name, search, steps, names, args) -> list:
    """Sweep each system, then alternate them; the ratios (and BLEU when outputs are free)."""
    label = "base" if steps else "recipe"
    section = "inference" if args.device == "cpu" else f"inference_{args.device}"
    sides = []
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            makers = candidates(name, model, tokenizer, Path(folder), args.device, search)
            if not makers:
                continue
            sample = lines[: args.sweep_sentences]
            built = {}

            def trial(label, sample=sample, makers=makers, built=built):
                if label not in built:  # built once, before the sweep times its first trial
                    built[label] = makers[label]()
                return built[label].decode(sample, search, steps)

            best = sweep(f"{label} {search_name} {name}", {k: lambda k=k: trial(k) for k in makers})
            system = built[best]
            built.clear()
            sides.append(Side(name, best, lambda s=system: s.decode(lines, search, steps)))
        timings = alternate(sides, "sent/s", args.rounds, same_work=steps is not None)
    pairs = [("ct2 int8", "ours fp32"), ("ct2 int8", "hf fp32"), ("ours fp32", "ct2 fp32")]
    pairs += [(f"ours {p}", f"hf {p}") for p in DTYPES]
    pairs += [("ours bf16", "ct2 bf16"), ("ours bf16", "hf fp32")]  # the last: an extra line
    pairs = [(a, b) for a, b in pairs if a in timings.rates and b in timings.rates]
    results = []
    print(f"\n{label}, {search_name}, {len(lines)} lines:", flush=True)
    for ours, peer in pairs:
        tag = f"{ours.replace(' ', '_')}_vs_{peer.replace(' ', '_')}"
        ratio = timings.ratio(ours, peer, f"{section}/{label}/{search_name}/{tag}")
        target = TARGETS.get(tag) if (label, search_name) == ("base", "beam4") else None
        extra = ours.split()[1] != peer.split()[1] and "int8" not in ours
        results.append(ratio.record() | {"target": target, "unequal_precision": extra})
        note = "  (extra: unequal precision)" if extra else ""
        if target:
            met = "met" if statistics.median(ratio.ratios) >= target else "NOT met"
            note += f"  target {target}x: {met}"
        print("  " + ratio.line() + note, flush=True)
    if steps is None:
        for name in timings.outputs:
            texts = tokenizer.decode(timings.outputs[name])
            bleu = sacrebleu.corpus_bleu(texts, [refs]).score
            print(f"  {name:<12} test BLEU {bleu:6.2f}", flush=True)
            results.append({"name": f"{section}/{label}/{search_name}/{name}_bleu", "bleu": bleu})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ckpt",
        default=os.environ.get("NMT_BENCH_CKPT"),
        help="a trained model.pt for the BLEU figures (default: $NMT_BENCH_CKPT)",
    )
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--sweep-sentences", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--steps", type=int, default=25, help="decoder steps per sentence, base")
    parser.add_argument("--alpha", type=float, default=1.0, help="beam 4's power-law penalty")
    parser.add_argument("--precisions", nargs="+", choices=list(DTYPES))
    parser.add_argument("--skip-base", action="store_true")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--searches", nargs="+", choices=["greedy", "beam4"])
    args = parser.parse_args()
    gpu = args.device != "cpu"
    precisions = args.precisions or (["fp32", "bf16"] if gpu else default_precisions())
    names = [f"{kind} {p}" for p in precisions for kind in ("ours", "hf")]
    names += ["ct2 fp32", "ct2 int8"] + (["ct2 bf16"] if "bf16" in precisions else [])
    lines = read_lines("test_2016_flickr.en")[: args.sentences]
    refs = read_lines("test_2016_flickr.de")[: args.sentences]
    beam = DecodeConfig(strategy="beam", beam_size=4, len_penalty=args.alpha, length_norm="power")
    searches = [("greedy", DecodeConfig()), ("beam4", beam)]
    searches = [(n, s) for n, s in searches if n in (args.searches or [n])]
    records = []
    if not args.skip_base:
        torch.manual_seed(0)
        model, tokenizer = Transformer(BASE).eval(), multi30k_tokenizer()
        for name, search in searches:
            records += compare(model, tokenizer, lines, refs, name, search, args.steps, names, args)
    if args.ckpt:
        trained = load_checkpoint(args.ckpt)
        model, tokenizer = trained.model, trained.tokenizer
        for name, search in searches:
            records += compare(model, tokenizer, lines, refs, name, search, None, names, args)
    else:
        print("no --ckpt (or NMT_BENCH_CKPT): speed only, no BLEU figures", flush=True)
    save_records(records, "inference" if not gpu else f"inference_{args.device}")


if __name__ == "__main__":
    main()
