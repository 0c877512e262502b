"""Which engine a command gets, checked before anything loads: `load(cfg)` returns it ready,
`read_card(cfg)` describes its model without loading weights."""

from __future__ import annotations

import gc
from pathlib import Path

from nmt.config import InferenceConfig
from nmt.decoding.settings import DecodeConfig
from nmt.errors import UsageError
from nmt.inference.engine import Engine, ModelCard

ENGINES = ("torch", "ctranslate2")


def engine_class(name: str) -> type[Engine]:
    """The class of the engine `backend=name` picks (CTranslate2 is imported only if asked)."""
    if name == "torch":
        from nmt.inference.torch_engine import TorchEngine

        return TorchEngine
    from nmt.inference.ct2_engine import CTranslate2Engine

    return CTranslate2Engine


def check_model(cfg: InferenceConfig) -> None:
    """Refuse, before loading anything, an engine we do not have, an ensemble CTranslate2
    cannot search, or model paths that are not there."""
    if cfg.backend not in ENGINES:
        raise UsageError(f"backend must be one of {', '.join(ENGINES)}, not {cfg.backend!r}")
    if cfg.backend == "ctranslate2" and cfg.ensemble:
        raise UsageError("backend=ctranslate2 translates one exported model: drop ensemble=")
    for path in (cfg.ckpt, *cfg.ensemble):
        if not Path(path).exists():
            raise UsageError(f"ckpt={path} not found" if path == cfg.ckpt else f"{path} not found")


def max_tokens(cfg: InferenceConfig) -> int:
    """The batch budget a command runs with: cfg.max_tokens if given, else the engine's own."""
    return cfg.max_tokens or engine_class(cfg.backend).default_max_tokens


def load(cfg: InferenceConfig) -> Engine:
    """The engine of `cfg.ckpt` (and `cfg.ensemble`), checked and ready to translate."""
    check_model(cfg)
    if cfg.backend == "torch":
        import torch

        from nmt.inference.torch_engine import TorchEngine

        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        paths = [cfg.ckpt, *cfg.ensemble]  # on the CPU, a batch at once on each thread
        workers = TorchEngine.cpu_threads()
        engine = TorchEngine.load(paths, cfg.device, cfg.dtype, max_tokens(cfg), workers=workers)
    else:
        from nmt.inference.ct2_engine import CTranslate2Engine

        threads = cfg.threads if cfg.threads > 0 else CTranslate2Engine.cpu_threads()
        engine = CTranslate2Engine(cfg.ckpt, cfg.device, cfg.compute_type, threads, max_tokens(cfg))
    engine.card.name = model_name(cfg, engine.card)
    # the imports' and the first model's objects live as long as the process: the cyclic
    # collector's full passes skip them (they took 4-5% of a CTranslate2 run over val:
    # docs/benchmarks.md). Only at the first load: a later engine's are collected as usual,
    # so a process that loads many (tests) keeps no garbage of theirs for good
    if not gc.get_freeze_count():
        gc.freeze()
    return engine


def model_name(cfg: InferenceConfig, card: ModelCard) -> str:
    """What the model is, in a few words: "experiment (file, step N)"."""
    if card.engine == "ctranslate2":
        engine = f"CTranslate2 {Path(cfg.ckpt).name}"
    else:
        engine = Path(cfg.ckpt).name + (f" + {len(cfg.ensemble)} more" if cfg.ensemble else "")
    step = f", step {card.info['global_step']}" if "global_step" in card.info else ""
    return f"{card.info.get('experiment', Path(cfg.ckpt).stem)} ({engine}{step})"


def read_card(cfg: InferenceConfig) -> ModelCard:
    """The model's card, read without loading its weights (a checkpoint's are mapped, not
    read); its name says what the model is: "experiment (file, step N)"."""
    if cfg.backend == "ctranslate2":
        from nmt.ct2.model_dir import read_model_dir
        from nmt.inference.ct2_engine import model_dir_card

        card = model_dir_card(read_model_dir(cfg.ckpt), "")
    else:
        from nmt.checkpoint import read_inference_payload

        payload = read_inference_payload(Path(cfg.ckpt), mmap=True)
        shape = payload["model_config"]
        search = DecodeConfig(**payload["search"]) if "search" in payload else None
        card = ModelCard(
            "",
            "torch",
            payload["src_lang"],
            payload["tgt_lang"],
            shape,
            shape["vocab_size"],
            dict(payload.get("info", {})),
            search,
        )
    card.name = model_name(cfg, card)
    return card
