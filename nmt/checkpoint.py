"""Inference checkpoints: everything `translate` needs, in one file.

Format (a plain dict, loadable with `torch.load(weights_only=True)`):
  format: "nmt-inference-1"; model_config: ModelConfig as a dict; state_dict: the weights;
  src_lang, tgt_lang: the direction; sentencepiece: the tokenizer model as a uint8 tensor;
  info: free-form provenance (experiment, step, metrics).
A Lightning training checkpoint (`*.ckpt` written by `nmt.train`) loads through the same call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.model import ModelConfig, Transformer
from nmt.tokenizer import Tokenizer

FORMAT = "nmt-inference-1"


@dataclass
class Translator:
    """A model with its tokenizer and direction: what decoding a raw sentence needs."""

    model: Transformer
    tokenizer: Tokenizer
    src_lang: str
    tgt_lang: str
    info: dict[str, Any]


def save_inference_checkpoint(path: str | Path, translator: Translator) -> None:
    model_bytes = translator.tokenizer.model_bytes
    payload = {
        "format": FORMAT,
        "model_config": asdict(translator.model.cfg),
        "state_dict": {k: v.detach().cpu() for k, v in translator.model.state_dict().items()},
        "src_lang": translator.src_lang,
        "tgt_lang": translator.tgt_lang,
        "sentencepiece": torch.frombuffer(bytearray(model_bytes), dtype=torch.uint8),
        "info": translator.info,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(payload, tmp)
    tmp.replace(path)


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(name: str) -> torch.device:
    """ "auto" is the GPU when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def load_translator(
    path: str | Path, device: str | torch.device = "cpu", dtype: str = "float32"
) -> Translator:
    """Load an inference checkpoint or a Lightning checkpoint of `nmt.train` for decoding,
    with the weights in `dtype` (bfloat16 about halves CPU decoding time on CPUs with AVX-512
    BF16/AMX, and GPU time too; search scores stay float32)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, not {dtype!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if payload.get("format") != FORMAT:
        payload = _from_lightning(payload, path)
    model = Transformer(ModelConfig(**payload["model_config"]))
    model.load_state_dict(payload["state_dict"])
    model.to(device=device, dtype=DTYPES[dtype]).eval()
    tokenizer = Tokenizer(payload["sentencepiece"].numpy().tobytes())
    return Translator(
        model, tokenizer, payload["src_lang"], payload["tgt_lang"], dict(payload["info"])
    )


def _from_lightning(ckpt: dict, path: Path) -> dict:
    """A Lightning checkpoint of TranslationModule carries the inference payload in its
    `nmt` entry (see TranslationModule.on_save_checkpoint) and the weights under `model.`."""
    if "nmt" not in ckpt or "state_dict" not in ckpt:
        raise ValueError(
            f"{path} is neither an nmt inference checkpoint nor an nmt training checkpoint"
        )
    payload = dict(ckpt["nmt"])
    prefix = "model."
    payload["state_dict"] = {
        k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)
    }
    return payload
