"""Shared pieces of the benchmarks: the machine, Multi30k and its tokenizer, bench/results.json."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
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
    env = os.environ.get("NMT_DATA_DIR")
    path = Path(env) if env else ROOT.parent / "shared" / "data" / "multi30k"
    if not (path / "train.en").is_file():
        raise SystemExit(f"Multi30k not found at {path}: set NMT_DATA_DIR")
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
    "name" under `section`/) into bench/results.json."""
    existing = (
        json.loads(RESULTS.read_text())
        if RESULTS.exists()
        else {"machine": machine(), "records": []}
    )
    kept = [r for r in existing["records"] if not r["name"].startswith(section + "/")]
    existing["records"] = kept + records
    existing["machine"] = machine()
    RESULTS.write_text(json.dumps(existing, indent=2))
