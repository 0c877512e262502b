"""An exported CTranslate2 model directory: written whole or not at all, and read back.

Layout: CTranslate2's `model.bin`, `config.json` and `shared_vocabulary.json`, plus ours:
`sentencepiece.model` (the tokenizer the model was trained with; an imported model's source
model, with `target_sentencepiece.model` beside it: nmt.split_tokenizer) and `nmt.json`:
  format: "nmt-ctranslate2-1"; src_lang, tgt_lang; quantization; model_config (the
  ModelConfig it was exported from);
  search: the DecodeConfig the model is meant to run with (the checkpoint's, or one written
  back by `nmt.evaluate save_search=true`); info: the checkpoint's provenance; vocabulary and
  unk_id for an imported model's tokenizer.
And `.nmt-export`, the mark of every export (nmt.files.staged_directory).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.config import ModelConfig
from nmt.decoding.settings import DecodeConfig
from nmt.files import staged_directory, write_text
from nmt.split_tokenizer import SplitTokenizer, read_tokenizer_files, write_tokenizer_files
from nmt.tokenizer import Tokenizer

if TYPE_CHECKING:
    from nmt.checkpoint import Checkpoint

EXPORT_FORMAT = "nmt-ctranslate2-1"
SETTINGS = "nmt.json"
QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)


@dataclass
class ModelDir:
    """What `nmt.json` and `sentencepiece.model` say about an exported directory."""

    path: Path
    tokenizer: Tokenizer | SplitTokenizer
    src_lang: str
    tgt_lang: str
    quantization: str
    model_config: ModelConfig
    search: DecodeConfig | None
    info: dict[str, Any]
    parameters: int | None  # the model's, recorded at export (None: an export from before)


def export(checkpoint: Checkpoint, out: str | Path, quantization: str, overwrite: bool) -> Path:
    """Write `checkpoint`'s model (float32 weights) as a CTranslate2 directory `out`.

    Built beside `out` and moved into place at the end (`staged_directory`): a failure leaves
    no half-written `out`; an existing `out` is replaced only with `overwrite`, and only if it
    is an earlier export.
    """
    from ctranslate2.converters import Converter

    from nmt.ct2.spec import transformer_spec
    from nmt.model import shape_parameters

    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization={quantization!r} is not one of {', '.join(QUANTIZATIONS)}")
    model = checkpoint.model
    tokenizer = checkpoint.tokenizer

    class _Converter(Converter):
        def _load(self):
            return transformer_spec(model, tokenizer)  # spec.array makes every weight float32

    with staged_directory(out, overwrite) as built:
        _Converter().convert(str(built), quantization=quantization, force=True)
        settings = {
            "format": EXPORT_FORMAT,
            "src_lang": checkpoint.src_lang,
            "tgt_lang": checkpoint.tgt_lang,
            "quantization": quantization,
            "model_config": asdict(model.cfg),
            "search": asdict(checkpoint.search) if checkpoint.search else None,
            "info": checkpoint.info,
            "parameters": shape_parameters(model.cfg),  # evaluate's record, read without torch
        }
        write_tokenizer_files(built, tokenizer, settings)
        write_text(built / SETTINGS, json.dumps(settings, indent=2, default=str) + "\n")
    return Path(out)


def read_model_dir(path: str | Path) -> ModelDir:
    """The settings and tokenizer of an exported directory; one-line errors otherwise."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path} is not a directory: backend=ctranslate2 reads a model directory written "
            "by python -m nmt.export"
        )
    settings_file = path / SETTINGS
    if not settings_file.is_file() or not (path / "model.bin").is_file():
        raise FileNotFoundError(
            f"{path} has no {SETTINGS} or model.bin: it is not a directory written by "
            "python -m nmt.export"
        )
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    if settings.get("format") != EXPORT_FORMAT:
        raise ValueError(f"{settings_file}: format {settings.get('format')!r}, not {EXPORT_FORMAT}")
    search = settings.get("search")
    model_config = ModelConfig(**settings["model_config"])
    return ModelDir(
        path=path,
        tokenizer=read_tokenizer_files(path, model_config.special_ids, settings),
        src_lang=settings["src_lang"],
        tgt_lang=settings["tgt_lang"],
        quantization=settings["quantization"],
        model_config=model_config,
        search=DecodeConfig(**search) if search else None,
        info=settings.get("info", {}),
        parameters=settings.get("parameters"),
    )


def store_dir_search(path: str | Path, search: DecodeConfig) -> None:
    """Write `search` into an exported directory's nmt.json as the one to run with."""
    _update(path, lambda settings: settings.update(search=asdict(search)))


def store_dir_info(path: str | Path, key: str, value: Any) -> None:
    """Write `value` under `key` of an exported directory's info (nmt.json)."""
    _update(path, lambda settings: settings.setdefault("info", {}).update({key: value}))


def _update(path: str | Path, change) -> None:
    settings_file = Path(path) / SETTINGS
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    change(settings)
    write_text(settings_file, json.dumps(settings, indent=2, default=str) + "\n")
