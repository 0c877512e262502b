"""`python -m nmt.score ckpt=PATH src=FILE tgt=FILE [output=FILE] [backend=ctranslate2]`.

Force-decodes each translation of tgt given its source line of src and writes, per pair, one
line of four tab-separated columns: the log-prob per token (EOS included), the log-prob,
each word's log-prob, space-separated, one per word of the translation's `text.split()`,
and the confidence, calibrated by `nmt.calibrate` (empty for a model not calibrated)
(nmt.inference.scores; the columns `translate scores=true` adds). Batched as
`translate` batches, on either engine; an empty source line gives empty columns. The two
files must have as many lines. For scoring references (fairseq's --score-reference), for
filtering back-translations, for comparing systems' outputs under one model.
"""

from __future__ import annotations

import logging
import sys
from contextlib import ExitStack
from pathlib import Path

import hydra
from omegaconf import OmegaConf

from nmt.cli import before_hydra, one_line_errors, progress_bar, setup_logging, show_progress
from nmt.config import ScoreConfig, register_configs
from nmt.errors import UsageError
from nmt.files import atomic_path, paired_chunks, read_chunks
from nmt.inference.loading import check_model, load
from nmt.inference.output_text import score_columns

log = logging.getLogger("nmt.score")
EXAMPLE = "python -m nmt.score ckpt=outputs/<run>/model.pt src=test.en tgt=test.de"


def run(cfg: ScoreConfig) -> int:
    """Score every pair of cfg.src and cfg.tgt; returns the number of pairs."""
    check_model(cfg)
    for name in ("src", "tgt"):
        if not Path(getattr(cfg, name)).is_file():
            raise UsageError(f"{name}={getattr(cfg, name)} not found")
    engine = load(cfg)
    log.info("scoring %s -> %s with %s (%s)", cfg.src, cfg.tgt, cfg.ckpt, engine.describe())
    total = 0
    with ExitStack() as stack:
        sources = read_chunks(stack.enter_context(open(cfg.src, "rb")), cfg.chunk_lines, cfg.src)
        targets = read_chunks(stack.enter_context(open(cfg.tgt, "rb")), cfg.chunk_lines, cfg.tgt)
        if cfg.output:
            written = stack.enter_context(atomic_path(cfg.output))
            sink = stack.enter_context(open(written, "w", encoding="utf-8", newline="\n"))
        else:
            sys.stdout.reconfigure(encoding="utf-8", newline="\n")
            sink = sys.stdout
        show = show_progress(cfg.progress, default=True)
        with progress_bar(show, desc="scoring", unit=" pairs") as bar:
            for lines, wanted in paired_chunks(
                sources, targets, f"src={cfg.src}", f"tgt={cfg.tgt}"
            ):
                for scores in engine.score(lines, wanted, total + 1):
                    sink.write(score_columns(scores) + "\n")
                total += len(lines)
                bar.update(len(lines))
    return total


register_configs("score")


@hydra.main(version_base=None, config_path="conf", config_name="score")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.score", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg))


if __name__ == "__main__":
    before_hydra("score")
    main()
