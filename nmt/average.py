"""`python -m nmt.average dir=RUN/checkpoints/periodic last=5 [output=FILE]`: average weights.

Averages the parameters of the last N checkpoints (by training step) of a folder, or of an
explicit list (`checkpoints=[a.ckpt,b.ckpt]`), into one inference checkpoint. The logic
lives in `nmt.training.averaging`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from omegaconf import OmegaConf

from nmt.checkpoint import save_checkpoint
from nmt.cli import before_hydra, fail, one_line_errors
from nmt.config import AverageConfig, register_configs
from nmt.training.averaging import average_checkpoints, select_checkpoints

log = logging.getLogger(__name__)
EXAMPLE = "python -m nmt.average dir=outputs/<run>/checkpoints/periodic last=5"

register_configs("average")


@hydra.main(version_base=None, config_path="conf", config_name="average")
def main(dict_cfg) -> None:
    with one_line_errors("nmt.average", EXAMPLE):
        cfg: AverageConfig = OmegaConf.to_object(dict_cfg)
        if not (cfg.checkpoints or cfg.dir):
            fail(
                "nmt.average",
                f"give dir=FOLDER (with last=N) or checkpoints=[...], e.g. {EXAMPLE}",
                2,
            )
        paths = [Path(p) for p in cfg.checkpoints] or select_checkpoints(Path(cfg.dir), cfg.last)
        averaged = average_checkpoints(paths)
        output = cfg.output or paths[-1].parent / f"averaged_last{len(paths)}.pt"
        save_checkpoint(output, averaged)
    log.info("Averaged %d checkpoints into %s", len(paths), output)


if __name__ == "__main__":
    before_hydra("average")
    main()
