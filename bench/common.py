"""Shared pieces of the benchmarks: the machine, Multi30k and its tokenizer, bench/results.json."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
sys.path.insert(0, str(ROOT))


def machine() -> dict:
    """What the figures were measured on."""
    model = platform.processor()
    try:
        for line in subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=True
        ).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def default_precisions() -> list[str]:
    """fp32, and bf16 where the CPU multiplies it natively: emulated bf16 (AVX2-only CPUs) is
    ~24x slower than fp32 for both systems, so timing it there measures the emulation."""
    from nmt.cpu import cpu_has_native_bf16

    if cpu_has_native_bf16():
        return ["fp32", "bf16"]
    print("this CPU has no native bf16: fp32 only (ask for bf16 to time it anyway)", flush=True)
    return ["fp32"]


def data_dir() -> Path:
    """Multi30k's folder, found as every command finds it (nmt.data.sources.local_multi30k)."""
    from nmt.config import DataConfig
    from nmt.data.sources import local_multi30k

    path = local_multi30k(DataConfig(source="multi30k", name="multi30k"))
    if path is None or not (path / "train.en").is_file():
        raise SystemExit("Multi30k not found: set NMT_DATA_DIR")
    return path


def multi30k_tokenizer():
    """The Multi30k 5k joint BPE of the multi30k experiments (trained once, then reused)."""
    from nmt.config import DataConfig, TokenizerConfig
    from nmt.data.encoding import build_tokenizer

    data = DataConfig(source="multi30k", name="multi30k", dir=str(data_dir()))
    tok = TokenizerConfig(
        name="multi30k_ende_bpe5000", dir=str(ROOT / "tokenizers"), vocab_size=5000
    )
    return build_tokenizer(data, tok)


def read_lines(name: str) -> list[str]:
    return (data_dir() / name).read_text(encoding="utf-8").split("\n")[:-1]


def save_records(records: list[dict], section: str) -> None:
    """Merge this script's records (harness.Ratio.record() and the like: each a dict with a
    "name" under `section`/) into bench/results.json, each stamped with the machine, the
    accelerator and the time it was measured on (sections run on other days or hosts stay
    told apart)."""
    existing = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"records": []}
    existing.pop("machine", None)  # one machine for the whole file: not true once merged
    stamp = {
        "machine": machine()
        | {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None},
        "measured": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    kept = [r for r in existing["records"] if not r["name"].startswith(section + "/")]
    existing["records"] = kept + [stamp | record for record in records]
    RESULTS.write_text(json.dumps(existing, indent=2))


def trained_model_args(description: str, **extra) -> argparse.Namespace:
    """The command line of a benchmark of a trained model on each engine: --ckpt (or
    NMT_BENCH_CKPT), --export (its CTranslate2 directory, optional), --rounds; `extra`:
    further options, name=default."""
    from harness import ROUNDS

    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", default=os.environ.get("NMT_BENCH_CKPT"))
    parser.add_argument("--export", help="its CTranslate2 export (python -m nmt.export)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    for name, default in extra.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    args = parser.parse_args()
    if not args.ckpt:
        raise SystemExit("--ckpt: a trained model.pt")
    return args


def models_args(description: str, show: int, show_what: str) -> argparse.Namespace:
    """The command line of a benchmark of trained models on one engine: --ckpt (repeatable),
    --backend, --split, --show (how many of `show_what` to print)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--ckpt", action="append", required=True, help="a model (repeatable)")
    parser.add_argument("--backend", default="torch", choices=["torch", "ctranslate2"])
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--show", type=int, default=show, help=show_what)
    parser.add_argument("--sets", default="all", help="bench_robustness: all, or written")
    return parser.parse_args()


def model_engines(args: argparse.Namespace):
    """(ckpt, engine, the model's own search) for each --ckpt on --backend, each search
    logged."""
    from nmt.config import InferenceConfig
    from nmt.decoding.settings import DecodeConfig
    from nmt.inference import loading
    from nmt.inference.search_choice import choose_search

    for ckpt in args.ckpt:
        engine = loading.load(
            InferenceConfig(ckpt=ckpt, decode=DecodeConfig(), backend=args.backend)
        )
        search, line = choose_search(engine.card, DecodeConfig(), [])
        print(f"== {ckpt} ({args.backend}): {line}", flush=True)
        yield ckpt, engine, search


def trained_engines(args: argparse.Namespace):
    """(backend, engine, the model's own search as it runs) for torch and, with --export,
    CTranslate2; each search logged."""
    from nmt.config import InferenceConfig
    from nmt.decoding.settings import DecodeConfig
    from nmt.inference import loading
    from nmt.inference.search_choice import choose_search

    backends = [("torch", args.ckpt)] + ([("ctranslate2", args.export)] if args.export else [])
    for backend, path in backends:
        engine = loading.load(InferenceConfig(ckpt=path, decode=DecodeConfig(), backend=backend))
        search, line = choose_search(engine.card, DecodeConfig(), [])
        print(f"{backend}: {line}", flush=True)
        yield backend, engine, search
