"""Inference end to end: the same test_2016_flickr lines translated by each system in turn,
one model, one run (tokenize, search, detokenize).

Systems: ours (torch fp32, and bf16 where the CPU multiplies it natively), CTranslate2 float32
and int8 from `nmt.export` of the same weights, and Hugging Face `generate` on a
MarianMTModel holding the same weights (ours maps onto Marian exactly: post-norm, scaled
embeddings, our position table copied in). Greedy and beam 4; sentences/s and the ratio to
HF fp32.

Two models:
- speed: the base shape (6+6 layers, d_model 512) with random weights; random weights would
  stop at random lengths, so every system is held to the same output length (--length
  tokens, then EOS), which makes the work equal.
- quality: a trained checkpoint (--ckpt, the CPU recipe's model.pt), free to stop; BLEU of
  each system's output against the references, so speed is never bought with silent
  quality loss. Beam 4 uses one power-law length penalty (--alpha) in every system, the
  only form all three share.

    python bench/bench_inference.py [--ckpt outputs/<run>/model.pt] [--sentences 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch
from bench_train import build_hf
from common import ROOT, Record, default_precisions, multi30k_tokenizer, read_lines, save_records

from nmt.checkpoint import Checkpoint, load_checkpoint
from nmt.ct2.model_dir import export
from nmt.decoding.settings import DecodeConfig
from nmt.inference.ct2_engine import CTranslate2Engine
from nmt.inference.output_text import best_text
from nmt.inference.torch_engine import TorchEngine
from nmt.model import ModelConfig, Transformer

BASE = ModelConfig(vocab_size=5000)  # the paper's base shape, our Multi30k 5k vocabulary
HF_BATCH = 64  # sentences per generate call, length-sorted


def marian_with_our_weights(model: Transformer):
    """A MarianMTModel computing what `model` computes (post-norm only)."""
    cfg = model.cfg
    if cfg.norm != "post" or not cfg.tie_embeddings or cfg.encoder_layers != cfg.decoder_layers:
        raise SystemExit("the HF comparison needs post-norm, tied embeddings, equal stacks")
    shape = dict(d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff, layers=cfg.encoder_layers)
    hf, _ = build_hf(shape, cfg.vocab_size, cfg.activation)
    ours = model.state_dict()
    with torch.no_grad():
        hf.model.shared.weight.copy_(ours["src_embed.weight"])
        for stack in (hf.model.encoder, hf.model.decoder):
            stack.embed_positions.weight.copy_(model.positions)
        for i, layer in enumerate(hf.model.encoder.layers):
            copy_layer(layer, ours, f"encoder_layers.{i}.", cross=False)
        for i, layer in enumerate(hf.model.decoder.layers):
            copy_layer(layer, ours, f"decoder_layers.{i}.", cross=True)
    return hf.eval()


def copy_layer(layer, ours: dict, prefix: str, cross: bool) -> None:
    def linear(target, weight, bias):
        target.weight.copy_(weight)
        target.bias.copy_(bias)

    w, b = ours[prefix + "self_attn.qkv_proj.weight"], ours[prefix + "self_attn.qkv_proj.bias"]
    for name, wi, bi in zip(("q_proj", "k_proj", "v_proj"), w.chunk(3), b.chunk(3), strict=True):
        linear(getattr(layer.self_attn, name), wi, bi)
    linear(layer.self_attn.out_proj, *pair(ours, prefix + "self_attn.out_proj"))
    linear(layer.self_attn_layer_norm, *pair(ours, prefix + "self_attn_res.norm"))
    if cross:
        attention = layer.encoder_attn
        linear(attention.q_proj, *pair(ours, prefix + "cross_attn.q_proj"))
        w, b = pair(ours, prefix + "cross_attn.kv_proj")
        for name, wi, bi in zip(("k_proj", "v_proj"), w.chunk(2), b.chunk(2), strict=True):
            linear(getattr(attention, name), wi, bi)
        linear(attention.out_proj, *pair(ours, prefix + "cross_attn.out_proj"))
        linear(layer.encoder_attn_layer_norm, *pair(ours, prefix + "cross_attn_res.norm"))
    linear(layer.fc1, *pair(ours, prefix + "ffn.fc1"))
    linear(layer.fc2, *pair(ours, prefix + "ffn.fc2"))
    linear(layer.final_layer_norm, *pair(ours, prefix + "ffn_res.norm"))


def pair(state: dict, name: str):
    return state[name + ".weight"], state[name + ".bias"]


class HFSystem:
    """HF generate behind our `translate` contract (length-sorted batches of HF_BATCH)."""

    def __init__(self, model: Transformer, tokenizer):
        self.hf, self.tokenizer = marian_with_our_weights(model), tokenizer

    @torch.inference_mode()
    def translate_text(self, lines: list[str], cfg: DecodeConfig, forced: int | None) -> list[str]:
        ids = [s + [3] for s in self.tokenizer.encode(lines)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: list[str] = [""] * len(lines)
        for start in range(0, len(order), HF_BATCH):
            chunk = order[start : start + HF_BATCH]
            src = torch.zeros(len(chunk), max(len(ids[i]) for i in chunk), dtype=torch.long)
            for row, i in enumerate(chunk):
                src[row, : len(ids[i])] = torch.tensor(ids[i])
            if forced is None:
                limits = dict(max_new_tokens=int(cfg.max_len_a * src.size(1) + cfg.max_len_b) + 1)
            else:
                limits = dict(min_new_tokens=forced + 1, max_new_tokens=forced + 1)
            generated = self.hf.generate(
                input_ids=src,
                attention_mask=src.ne(0),
                num_beams=cfg.beam_size if cfg.strategy == "beam" else 1,
                do_sample=False,
                length_penalty=cfg.len_penalty if cfg.strategy == "beam" else 1.0,
                early_stopping=False,
                suppress_tokens=[0, 2],  # PAD and BOS, which our searches never choose
                **limits,
            )
            texts = self.tokenizer.decode([[t for t in row.tolist() if t > 3] for row in generated])
            for i, text in zip(chunk, texts, strict=True):
                out[i] = text
        return out


def translate_text(system, lines: list[str], cfg: DecodeConfig, forced: int | None) -> list[str]:
    """Raw lines -> raw translations by one of our backends; `forced`: every output is held
    to this many tokens (the speed runs), else free."""
    if isinstance(system, HFSystem):
        return system.translate_text(lines, cfg, forced)
    if forced is not None:
        cfg = replace(cfg, max_len_a=0.0, max_len_b=forced, min_len=forced)
    return best_text(system.tokenizer, system.translate(lines, cfg))  # each engine's own batch


def systems(model: Transformer, tokenizer, folder: Path, precisions: list[str]) -> dict:
    """Each system name -> an object translating with the same weights."""
    fp32 = Checkpoint(model.float().eval(), tokenizer, "en", "de", {})
    budget = TorchEngine.default_max_tokens
    out = {"ours fp32": TorchEngine(fp32, budget)}
    if "bf16" in precisions:
        bf16 = Transformer(model.cfg)
        bf16.load_state_dict(model.state_dict())
        bf16_checkpoint = Checkpoint(bf16.to(torch.bfloat16).eval(), tokenizer, "en", "de", {})
        out["ours bf16"] = TorchEngine(bf16_checkpoint, budget)
    threads = torch.get_num_threads()
    for quantization in ("float32", "int8"):
        path = export(fp32, folder / quantization, quantization, False)
        out[f"ct2 {quantization}"] = CTranslate2Engine(
            path, "cpu", "default", threads, CTranslate2Engine.default_max_tokens
        )
    out["hf fp32"] = HFSystem(model, tokenizer)
    return out


def run(model, tokenizer, lines, refs, searches, forced, precisions, label) -> list[Record]:
    records = []
    with tempfile.TemporaryDirectory() as folder:
        named = systems(model, tokenizer, Path(folder), precisions)
        for system in named.values():  # warm up: first calls pay one-off costs
            translate_text(system, lines[:8], searches[0][1], forced)
        for search_name, cfg in searches:
            speed, bleu = {}, {}
            for name, system in named.items():
                start = time.perf_counter()
                hyps = translate_text(system, lines, cfg, forced)
                speed[name] = len(lines) / (time.perf_counter() - start)
                bleu[name] = sacrebleu.corpus_bleu(hyps, [refs]).score
            print(f"\n{label}, {search_name}:", flush=True)
            for name in named:
                ratio = speed[name] / speed["hf fp32"]
                quality = "" if forced else f"  BLEU {bleu[name]:6.2f}"
                print(f"  {name:<10} {speed[name]:8.1f} sent/s  {ratio:5.2f}x HF fp32{quality}")
                if name != "hf fp32":
                    tag = name.replace(" ", "_")
                    records.append(
                        Record(
                            f"inference/{label}/{search_name}/{tag}_vs_hf_fp32",
                            speed[name],
                            speed["hf fp32"],
                            "sent/s",
                        )
                    )
            if not forced:
                for name in named:
                    records.append(
                        Record(
                            f"inference/{label}/{search_name}/{name.replace(' ', '_')}_bleu",
                            bleu[name],
                            bleu["ours fp32"],
                            "BLEU",
                        )
                    )
            ct2_vs_ours = speed["ct2 int8"] / speed["ours fp32"]
            print(f"  ct2 int8 / ours fp32: {ct2_vs_ours:.2f}x", flush=True)
    return records


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
    parser.add_argument("--length", type=int, default=24, help="output tokens, speed runs")
    parser.add_argument("--alpha", type=float, default=1.0, help="beam 4's power-law penalty")
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"])
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    precisions = args.precisions or default_precisions()
    lines = read_lines("test_2016_flickr.en")[: args.sentences]
    refs = read_lines("test_2016_flickr.de")[: args.sentences]
    beam = DecodeConfig(strategy="beam", beam_size=4, len_penalty=args.alpha, length_norm="power")
    searches = [("greedy", DecodeConfig()), ("beam4", beam)]
    records = []
    if not args.skip_speed:
        torch.manual_seed(0)
        model = Transformer(replace(BASE, dropout=0.0)).eval()
        records += run(
            model, multi30k_tokenizer(), lines, refs, searches, args.length, precisions, "base"
        )
    if args.ckpt:
        trained = load_checkpoint(args.ckpt)
        records += run(
            trained.model, trained.tokenizer, lines, refs, searches, None, precisions, "recipe"
        )
    if not args.ckpt:
        print("no --ckpt (or NMT_BENCH_CKPT): speed only, no BLEU figures", flush=True)
    save_records(records, "inference")
    print(f"\nrecords in {ROOT / 'bench' / 'results.json'}")


if __name__ == "__main__":
    main()
