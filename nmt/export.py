"""`python -m nmt.export ckpt=PATH out=DIR [format=ctranslate2] [quantization=int8]`.

Writes the checkpoint as a CTranslate2 model directory (nmt.ct2): weights in `quantization`
(int8, int8_float32, int16, float32, ...), our sentencepiece model and the checkpoint's search
beside them. Translate with it through `python -m nmt.translate backend=ctranslate2 ckpt=DIR`
(or `nmt.evaluate`, `nmt.serve`). `out` appears whole or not at all.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from omegaconf import OmegaConf

from nmt.cli import UsageError, one_line_errors, progress_bar, setup_logging, show_progress
from nmt.config import ExportConfig, register_configs

log = logging.getLogger("nmt.export")
EXAMPLE = "python -m nmt.export ckpt=outputs/<run>/model.pt out=exported/int8 quantization=int8"
FORMATS = ("ctranslate2",)


def check_request(cfg: ExportConfig) -> None:
    """Refuse what cannot work before loading anything; nothing is written then."""
    from nmt.ct2.model_dir import QUANTIZATIONS

    if cfg.format not in FORMATS:
        raise UsageError(f"format={cfg.format!r}: the export knows {', '.join(FORMATS)}")
    if cfg.quantization not in QUANTIZATIONS:
        raise UsageError(
            f"quantization={cfg.quantization!r} is not one of {', '.join(QUANTIZATIONS)}"
        )
    if not Path(cfg.ckpt).is_file():
        raise UsageError(f"ckpt={cfg.ckpt} not found")
    if Path(cfg.out).exists() and not cfg.overwrite:
        raise UsageError(f"out={cfg.out} exists: choose a new directory or add overwrite=true")


def run(cfg: ExportConfig) -> Path:
    check_request(cfg)
    from nmt.checkpoint import load_checkpoint
    from nmt.ct2.model_dir import export
    from nmt.ct2.spec import unsupported

    show = show_progress(cfg.progress, default=sys.stderr.isatty())
    with progress_bar(show, desc="exporting", total=2, unit=" steps") as bar:
        bar.set_postfix_str("reading the checkpoint")
        checkpoint = load_checkpoint(cfg.ckpt)
        reason = unsupported(checkpoint.model.cfg)
        if reason:
            raise UsageError(f"cannot export {cfg.ckpt}: {reason}")
        if checkpoint.search is None:
            log.info("%s stores no search: the export carries none (commands fall back)", cfg.ckpt)
        bar.update()
        bar.set_postfix_str(f"converting to CTranslate2 {cfg.quantization}")
        out = export(checkpoint, cfg.out, cfg.quantization, cfg.overwrite)
        bar.update()
    log.info("Exported %s to %s (CTranslate2, %s)", cfg.ckpt, out, cfg.quantization)
    return out


register_configs()


@hydra.main(version_base=None, config_path="conf", config_name="export")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.export", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg))


if __name__ == "__main__":
    main()
