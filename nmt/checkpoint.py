"""Inference checkpoints: everything `translate` needs, in one file.

Format (a plain dict, loadable with `torch.load(weights_only=True)`):
  format: "nmt-inference-1"; model_config: ModelConfig as a dict; state_dict: the weights;
  src_lang, tgt_lang: the direction; sentencepiece: the tokenizer model as a uint8 tensor;
  info: free-form provenance (experiment, step, metrics); search (optional): the DecodeConfig
  chosen for this model as a dict, which translate and evaluate run unless told otherwise.
A Lightning training checkpoint (`*.ckpt` written by `nmt.train`) loads through the same call.
"""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from nmt import cpu
from nmt.config import DecodeConfig
from nmt.decoding.state import Hypothesis
from nmt.decoding.text import translate_lines
from nmt.files import atomic_path
from nmt.model import Ensemble, ModelConfig, Transformer, count_parameters
from nmt.tokenizer import Tokenizer

FORMAT = "nmt-inference-1"


@dataclass
class Translator:
    """A model (or an ensemble) with its tokenizer and direction: what decoding a raw sentence
    needs."""

    model: Transformer | Ensemble
    tokenizer: Tokenizer
    src_lang: str
    tgt_lang: str
    info: dict[str, Any]
    search: DecodeConfig | None = None  # the search chosen for this model; None: not stored

    backend = "torch"

    def translate(
        self,
        lines: list[str],
        cfg: DecodeConfig,
        max_tokens: int,
        first_line_number: int = 1,
        prefixes: list[str] | None = None,
    ) -> list[list[Hypothesis]]:
        """One n-best list per line (`nmt.decoding.text.translate_lines`)."""
        return translate_lines(
            self.model, self.tokenizer, lines, cfg, max_tokens, first_line_number, prefixes
        )

    @property
    def num_parameters(self) -> int:
        return count_parameters(self.model)

    def describe(self) -> str:
        return f"torch, weights in {str(self.dtype).removeprefix('torch.')}"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        """The weights' dtype (float32 unless loaded with another)."""
        return next(self.model.parameters()).dtype


def inference_payload(
    model_cfg: ModelConfig,
    tokenizer: Tokenizer,
    src_lang: str,
    tgt_lang: str,
    info: dict,
    search: DecodeConfig | None = None,
) -> dict[str, Any]:
    """Everything an inference checkpoint holds but the weights. A Lightning checkpoint carries
    it too (TranslationModule.on_save_checkpoint), so translate and nmt.average read both."""
    payload = {
        "format": FORMAT,
        "model_config": asdict(model_cfg),
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "sentencepiece": torch.frombuffer(bytearray(tokenizer.model_bytes), dtype=torch.uint8),
        "info": info,
    }
    if search is not None:
        payload["search"] = asdict(search)
    return payload


def save_inference_checkpoint(path: str | Path, translator: Translator) -> None:
    payload = inference_payload(
        translator.model.cfg,
        translator.tokenizer,
        translator.src_lang,
        translator.tgt_lang,
        translator.info,
        translator.search,
    )
    payload["state_dict"] = {k: v.detach().cpu() for k, v in translator.model.state_dict().items()}
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(name: str) -> torch.device:
    """ "auto" is the GPU when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def pick_dtype(name: str, device: torch.device) -> str:
    """ "auto" is bfloat16 where the device multiplies bf16 in hardware (a CUDA GPU with bf16,
    a CPU with AVX-512 BF16 or AMX), float32 elsewhere, where bf16 would be emulated."""
    if name != "auto":
        return name
    if device.type == "cuda":
        native = torch.cuda.is_bf16_supported()
    else:
        native = device.type == "cpu" and cpu.cpu_has_native_bf16()
    return "bfloat16" if native else "float32"


class CheckpointError(ValueError):
    """A file that cannot be loaded as a checkpoint; the message is one line."""


def load_translator(
    path: str | Path, device: str | torch.device = "cpu", dtype: str = "float32"
) -> Translator:
    """Load an inference checkpoint or a Lightning checkpoint of `nmt.train` for decoding,
    with the weights in `dtype` (bfloat16 about halves CPU decoding time on CPUs with AVX-512
    BF16/AMX, and GPU time too; search scores stay float32; "auto": see `pick_dtype`).

    Only tensors and plain values are unpickled (`weights_only=True`): a file that would run
    code when loaded is refused. Raises FileNotFoundError or CheckpointError, one line each.
    """
    if dtype != "auto" and dtype not in DTYPES:
        raise ValueError(f"dtype must be auto or one of {sorted(DTYPES)}, not {dtype!r}")
    path = Path(path)
    payload = read_inference_payload(path)
    try:
        model = Transformer(ModelConfig(**payload["model_config"]))
        model.load_state_dict(payload["state_dict"])
        tokenizer = Tokenizer(payload["sentencepiece"].numpy().tobytes())
        search = DecodeConfig(**payload["search"]) if "search" in payload else None
        translator = Translator(
            model,
            tokenizer,
            payload["src_lang"],
            payload["tgt_lang"],
            dict(payload["info"]),
            search,
        )
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{path} is damaged: {_first_line(error)}") from None
    if tokenizer.vocab_size != model.cfg.vocab_size:
        raise CheckpointError(
            f"{path}: its tokenizer has {tokenizer.vocab_size} pieces but its model "
            f"{model.cfg.vocab_size}: they were not trained together"
        )
    device = torch.device(device)
    dtype = pick_dtype(dtype, device)
    cpu.warn_if_emulated_bf16(device, dtype == "bfloat16", f"dtype={dtype}")
    model.to(device=device, dtype=DTYPES[dtype]).eval()
    return translator


def load_ensemble(
    paths: list[str], device: str | torch.device = "cpu", dtype: str = "float32"
) -> Translator:
    """One checkpoint, as `load_translator` loads it, or several searched as one `Ensemble`
    (the mean of their next-token probabilities). Members must share the tokenizer and the
    direction; the first one's info is kept, with the members' paths under "ensemble"."""
    members = [load_translator(path, device, dtype) for path in paths]
    first = members[0]
    if len(members) == 1:
        return first
    for path, member in zip(paths[1:], members[1:], strict=True):
        if member.tokenizer.model_bytes != first.tokenizer.model_bytes:
            raise CheckpointError(
                f"{path} has another tokenizer than {paths[0]}: ensemble members must share one"
            )
        if (member.src_lang, member.tgt_lang) != (first.src_lang, first.tgt_lang):
            raise CheckpointError(
                f"{path} translates {member.src_lang}->{member.tgt_lang} but {paths[0]} "
                f"{first.src_lang}->{first.tgt_lang}"
            )
    return Translator(
        Ensemble([member.model for member in members]),
        first.tokenizer,
        first.src_lang,
        first.tgt_lang,
        {**first.info, "ensemble": [str(Path(path).resolve()) for path in paths]},
        first.search,
    )


def read_checkpoint(path: Path, mmap: bool = False) -> dict:
    """The dict in a torch checkpoint file, unpickled with `weights_only=True`; with `mmap`,
    tensors are mapped from the file and read only when touched."""
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as error:
        if "unsupported global" in str(error).lower():  # a class or function to call
            raise CheckpointError(
                f"refusing to load {path}: it holds objects other than tensors and plain "
                "values, and unpickling them could run code"
            ) from None
        raise CheckpointError(f"{path} is not a torch checkpoint: {_first_line(error)}") from None
    except (RuntimeError, EOFError, OSError, ValueError) as error:
        raise CheckpointError(
            f"{path} is not a readable torch checkpoint (truncated or another format): "
            f"{_first_line(error)}"
        ) from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path} holds a {type(payload).__name__}, not a checkpoint")
    return payload


def read_inference_payload(path: Path, mmap: bool = False) -> dict:
    """The inference-format dict (see the module docstring) of an inference checkpoint or of a
    Lightning checkpoint of `nmt.train`."""
    payload = read_checkpoint(path, mmap)
    return payload if payload.get("format") == FORMAT else _from_lightning(payload, path)


def store_search(path: str | Path, search: DecodeConfig) -> None:
    """Write `search` into a checkpoint (inference or Lightning) as the one chosen for it."""
    path = Path(path)
    payload = read_checkpoint(path)
    target = payload if payload.get("format") == FORMAT else payload.get("nmt")
    if target is None:
        raise CheckpointError(f"{path} is not an nmt checkpoint: cannot store a search in it")
    target["search"] = asdict(search)
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def saved_info(path: str | Path) -> dict[str, Any]:
    """A checkpoint's (inference or Lightning) info: the step it was saved at, what it
    averages; the weights are mapped, not read, and no model is built."""
    return read_inference_payload(Path(path), mmap=True).get("info", {})


def saved_step(path: str | Path) -> int:
    """The training step a checkpoint was saved at, -1 if it does not say."""
    return int(saved_info(path).get("global_step", -1))


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def _from_lightning(ckpt: dict, path: Path) -> dict:
    """A Lightning checkpoint of TranslationModule carries the inference payload in its
    `nmt` entry (see TranslationModule.on_save_checkpoint) and the weights under `model.`."""
    if "nmt" not in ckpt or "state_dict" not in ckpt:
        raise CheckpointError(
            f"{path} is neither an nmt inference checkpoint nor an nmt training checkpoint"
        )
    payload = dict(ckpt["nmt"])
    prefix = "model."
    payload["state_dict"] = {
        k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)
    }
    return payload
