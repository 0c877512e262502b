"""`python -m nmt.export ckpt=PATH out=DIR [format=ctranslate2|hf] [quantization=...]`.

format=ctranslate2 (default): a CTranslate2 model directory (nmt.ct2), weights in
`quantization` (int8 unless set; int8_float32, int16, float32, ...), our sentencepiece model
and the checkpoint's search beside them. Translate with it through
`python -m nmt.translate backend=ctranslate2 ckpt=DIR` (or `nmt.evaluate`, `nmt.serve`).

format=hf: a Hugging Face `MarianMTModel` directory (nmt.hf) that transformers loads with its
own classes, weights in float32 unless `quantization` says float16 or bfloat16, the search as
its generation config and a model card that reports `evaluation` (an evaluation.json).

`out` appears whole or not at all; overwrite=true replaces only an earlier export (one that
holds the `.nmt-export` every export gets) and refuses any other folder (nmt.files).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import hydra
from omegaconf import OmegaConf

from nmt.cli import before_hydra, one_line_errors, progress_bar, setup_logging, show_progress
from nmt.config import ExportConfig, register_configs
from nmt.errors import UsageError
from nmt.evaluation.runs_table import FINAL_EVALUATION
from nmt.files import check_replaceable

log = logging.getLogger("nmt.export")
EXAMPLE = "python -m nmt.export ckpt=outputs/<run>/model.pt out=exported/int8 quantization=int8"
EXPORT_FORMATS = {"ctranslate2": "int8", "hf": "float32"}  # -> the weights' default quantization


def weight_type(cfg: ExportConfig) -> str:
    """The quantization (ctranslate2) or dtype (hf) the weights are written in."""
    from nmt.ct2.model_dir import QUANTIZATIONS
    from nmt.hf.model_dir import HF_DTYPES

    chosen = cfg.quantization or EXPORT_FORMATS[cfg.format]
    allowed = QUANTIZATIONS if cfg.format == "ctranslate2" else HF_DTYPES
    if chosen not in allowed:
        raise UsageError(
            f"quantization={chosen!r} is not one of {', '.join(allowed)} (format={cfg.format})"
        )
    return chosen


def check_request(cfg: ExportConfig) -> str:
    """Refuse what cannot work before loading anything (nothing is written then); returns the
    weights' type."""
    if cfg.format not in EXPORT_FORMATS:
        raise UsageError(f"format={cfg.format!r}: the export knows {', '.join(EXPORT_FORMATS)}")
    chosen = weight_type(cfg)
    if not Path(cfg.ckpt).is_file():
        raise UsageError(f"ckpt={cfg.ckpt} not found")
    check_replaceable(cfg.out, cfg.overwrite)
    if cfg.evaluation is not None and not Path(cfg.evaluation).is_file():
        raise UsageError(f"evaluation={cfg.evaluation} not found")
    return chosen


def run(cfg: ExportConfig) -> Path:
    chosen = check_request(cfg)
    from nmt.checkpoint import load_checkpoint

    show = show_progress(cfg.progress, default=sys.stderr.isatty())
    with progress_bar(show, desc="exporting", total=2, unit=" steps") as bar:
        bar.set_postfix_str("reading the checkpoint")
        checkpoint = load_checkpoint(cfg.ckpt)
        reason = unsupported(cfg.format, checkpoint.model.cfg)
        if reason:
            raise UsageError(f"cannot export {cfg.ckpt}: {reason}")
        if checkpoint.search is None:
            log.info("%s stores no search: the export carries none (greedy)", cfg.ckpt)
        bar.update()
        if cfg.format == "hf":
            from nmt.hf.model_dir import export_hf

            bar.set_postfix_str(f"converting to MarianMTModel {chosen}")
            evaluation = model_evaluation(cfg, checkpoint.info)
            out = export_hf(checkpoint, cfg.out, chosen, cfg.overwrite, evaluation)
        else:
            from nmt.ct2.model_dir import export

            bar.set_postfix_str(f"converting to CTranslate2 {chosen}")
            out = export(checkpoint, cfg.out, chosen, cfg.overwrite)
        bar.update()
    log.info("Exported %s to %s (%s, %s)", cfg.ckpt, out, cfg.format, chosen)
    return out


def unsupported(format: str, model_cfg) -> str | None:
    """The first setting of the model the format cannot express, in one line, or None."""
    if format == "hf":
        from nmt.hf.marian import unsupported as hf_unsupported

        return hf_unsupported(model_cfg)
    from nmt.ct2.spec import unsupported as ct2_unsupported

    return ct2_unsupported(model_cfg)


def model_evaluation(cfg: ExportConfig, info: dict) -> dict | None:
    """The evaluation.json of this checkpoint for the model card: `cfg.evaluation`, or the one
    nmt.train wrote beside it. One of another model (its checkpoint info differs) is refused
    when named, skipped when found."""
    named = cfg.evaluation is not None
    beside = Path(cfg.ckpt).parent / FINAL_EVALUATION / "evaluation.json"
    path = Path(cfg.evaluation) if named else beside
    if not path.is_file():
        log.info("No evaluation.json beside %s: the model card reports no scores", cfg.ckpt)
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    evaluated = record.get("checkpoint", {}).get("info")
    if evaluated != json.loads(json.dumps(info, default=str)):
        if named:
            raise UsageError(f"evaluation={path} scores another model than ckpt={cfg.ckpt}")
        log.info("%s scores another model: the model card reports no scores", path)
        return None
    return record


register_configs("export")


@hydra.main(version_base=None, config_path="conf", config_name="export")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.export", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg))


if __name__ == "__main__":
    before_hydra("export")
    main()
