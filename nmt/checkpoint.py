"""Inference checkpoints: everything `translate` needs, in one file.

Format (a plain dict, loadable with `torch.load(weights_only=True)`):
  format: "nmt-inference-1"; model_config: ModelConfig as a dict; state_dict: the weights;
  src_lang, tgt_lang: the direction; sentencepiece: the tokenizer model as a uint8 tensor
  (an imported model's source model, with target_sentencepiece, vocabulary and unk_id:
  nmt.split_tokenizer);
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

from nmt.decoding.settings import DecodeConfig
from nmt.files import atomic_path
from nmt.model import Ensemble, ModelConfig, Transformer
from nmt.split_tokenizer import SplitTokenizer, tokenizer_from_payload
from nmt.tokenizer import Tokenizer

CHECKPOINT_FORMAT = "nmt-inference-1"


@dataclass
class Checkpoint:
    """What an inference checkpoint holds, as objects: a model (or an ensemble, once an engine
    has built one) with its tokenizer, direction, provenance and search."""

    model: Transformer | Ensemble
    tokenizer: Tokenizer | SplitTokenizer
    src_lang: str
    tgt_lang: str
    info: dict[str, Any]
    search: DecodeConfig | None = None  # the search chosen for this model; None: not stored


def inference_payload(
    model_cfg: ModelConfig,
    tokenizer: Tokenizer | SplitTokenizer,
    src_lang: str,
    tgt_lang: str,
    info: dict,
    search: DecodeConfig | None = None,
) -> dict[str, Any]:
    """Everything an inference checkpoint holds but the weights. A Lightning checkpoint carries
    it too (TranslationModule.on_save_checkpoint), so translate and nmt.average read both."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "model_config": asdict(model_cfg),
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        **tokenizer.payload(),
        "info": info,
    }
    if search is not None:
        payload["search"] = asdict(search)
    return payload


def save_checkpoint(path: str | Path, checkpoint: Checkpoint) -> None:
    payload = inference_payload(
        checkpoint.model.cfg,
        checkpoint.tokenizer,
        checkpoint.src_lang,
        checkpoint.tgt_lang,
        checkpoint.info,
        checkpoint.search,
    )
    payload["state_dict"] = {k: v.detach().cpu() for k, v in checkpoint.model.state_dict().items()}
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


class CheckpointError(ValueError):
    """A file that cannot be loaded as a checkpoint; the message is one line."""


def check_combinable(
    first_path, first: Checkpoint, path, other: Checkpoint, what: str, same_shape: bool = False
) -> None:
    """CheckpointError (one line) if `other` cannot join `first` in `what` ("ensemble members",
    "averaged checkpoints"): another tokenizer or direction, or with `same_shape` weights of
    other names or shapes."""
    if other.tokenizer.identity != first.tokenizer.identity:
        raise CheckpointError(
            f"{path} has another tokenizer than {first_path}: {what} must share one"
        )
    if (other.src_lang, other.tgt_lang) != (first.src_lang, first.tgt_lang):
        raise CheckpointError(
            f"{path} translates {other.src_lang}->{other.tgt_lang} but {first_path} "
            f"{first.src_lang}->{first.tgt_lang}"
        )
    if not same_shape:
        return
    mine = {k: tuple(v.shape) for k, v in first.model.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in other.model.state_dict().items()}
    if mine != theirs:
        name = next(k for k in sorted(mine.keys() | theirs.keys()) if mine.get(k) != theirs.get(k))
        raise CheckpointError(
            f"{path} has another model shape than {first_path} ({name}: {theirs.get(name)} "
            f"against {mine.get(name)}): {what} must share one"
        )


def load_checkpoint(path: str | Path) -> Checkpoint:
    """An inference checkpoint or a Lightning checkpoint of `nmt.train`, its model in float32
    on the CPU (engines place it: nmt.inference).

    Only tensors and plain values are unpickled (`weights_only=True`): a file that would run
    code when loaded is refused. Raises FileNotFoundError or CheckpointError, one line each.
    """
    path = Path(path)
    payload = read_inference_payload(path)
    try:
        model = Transformer(ModelConfig(**payload["model_config"]))
        model.load_state_dict(payload["state_dict"])
        tokenizer = tokenizer_from_payload(payload, model.cfg.special_ids)
        search = DecodeConfig(**payload["search"]) if "search" in payload else None
        checkpoint = Checkpoint(
            model,
            tokenizer,
            payload["src_lang"],
            payload["tgt_lang"],
            dict(payload["info"]),
            search,
        )
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{path} is damaged: {_first_line(error)}") from None
    if (tokenizer.vocab_size, tokenizer.special_ids) != (
        model.cfg.vocab_size,
        model.cfg.special_ids,
    ):
        raise CheckpointError(
            f"{path}: its tokenizer has {tokenizer.vocab_size} pieces and special ids "
            f"{tokenizer.special_ids} but its model {model.cfg.vocab_size} and "
            f"{model.cfg.special_ids}: they were not trained together"
        )
    model.eval()
    return checkpoint


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
    return payload if payload.get("format") == CHECKPOINT_FORMAT else _from_lightning(payload, path)


def store_search(path: str | Path, search: DecodeConfig) -> None:
    """Write `search` into a checkpoint (inference or Lightning) as the one chosen for it."""
    _update(path, "a search", lambda target: target.update(search=asdict(search)))


def store_info(path: str | Path, key: str, value: Any) -> None:
    """Write `value` under `key` of a checkpoint's (inference or Lightning) info."""
    _update(path, key, lambda target: target.setdefault("info", {}).update({key: value}))


def _update(path: str | Path, what: str, change) -> None:
    path = Path(path)
    payload = read_checkpoint(path)
    target = payload if payload.get("format") == CHECKPOINT_FORMAT else payload.get("nmt")
    if target is None:
        raise CheckpointError(f"{path} is not an nmt checkpoint: cannot store {what} in it")
    change(target)
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
