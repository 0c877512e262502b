"""The two engines that translate lines: our torch model (a .pt or .ckpt, possibly an
ensemble) and an exported CTranslate2 directory. Both have `translate(lines, search,
max_tokens, first_line_number, prefixes)`, `tokenizer`, `src_lang`, `tgt_lang`, `search` (the
one stored with the model, or None), `info` and `describe()`; translate, evaluate and serve
pick one with `backend=`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nmt.checkpoint import load_ensemble, pick_device
from nmt.cli import UsageError
from nmt.config import (
    DecodeConfig,
    InferenceConfig,
    chosen_search,
    describe_search,
    search_problem,
)

BACKENDS = ("torch", "ctranslate2")


def check_model(cfg: InferenceConfig) -> None:
    """Refuse, before loading anything, a backend we do not have, an ensemble CTranslate2
    cannot search, or model paths that are not there."""
    if cfg.backend not in BACKENDS:
        raise UsageError(f"backend must be one of {', '.join(BACKENDS)}, not {cfg.backend!r}")
    if cfg.backend == "ctranslate2" and cfg.ensemble:
        raise UsageError("backend=ctranslate2 translates one exported model: drop ensemble=")
    for path in (cfg.ckpt, *cfg.ensemble):
        if not Path(path).exists():
            raise UsageError(f"ckpt={path} not found" if path == cfg.ckpt else f"{path} not found")


def load_backend(cfg: InferenceConfig):
    """A Translator (torch) or a CTranslate2Translator of `cfg.ckpt`, ready to translate."""
    check_model(cfg)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    if cfg.backend == "torch":
        return load_ensemble([cfg.ckpt, *cfg.ensemble], pick_device(cfg.device), cfg.dtype)
    from nmt.ct2.translator import CTranslate2Translator

    threads = cfg.threads or torch.get_num_threads()
    return CTranslate2Translator(cfg.ckpt, cfg.device, cfg.compute_type, threads)


def search_for(translator, command: DecodeConfig, overrides: list[str]) -> tuple[DecodeConfig, str]:
    """The search to run (`chosen_search`) and a line saying what it is and where it comes
    from (`translator` needs only `search` and `backend`); for CTranslate2, a GNMT length
    penalty is replaced by its power-law counterpart, and the line says so."""
    search, where = chosen_search(command, translator.search, overrides)
    search, note = runnable_search(translator.backend, search)
    return search, f"Search: {describe_search(search)} ({where}{note})"


def runnable_search(backend: str, search: DecodeConfig) -> tuple[DecodeConfig, str]:
    """`search` as `backend` runs it, and a note ("" if unchanged): CTranslate2 has no GNMT
    length penalty, so it runs the power law's counterpart."""
    if backend != "ctranslate2":
        return search, ""
    from nmt.ct2.translator import with_power_penalty

    converted = with_power_penalty(search)
    if converted is search:
        return search, ""
    return converted, (
        f"; CTranslate2 has no GNMT penalty: alpha {search.len_penalty} runs as the "
        f"power law's {converted.len_penalty} (tune it on val with decode.length_norm=power)"
    )


def check_search(search: DecodeConfig) -> None:
    """Refuse a search no backend can run as asked (`config.search_problem`)."""
    problem = search_problem(search)
    if problem:
        raise UsageError(problem)
