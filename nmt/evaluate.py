"""`python -m nmt.evaluate ckpt=PATH [splits=[valid,test]] [decode=greedy] [attention=[0,5]]`.

Scores a checkpoint with sacreBLEU (BLEU, chrF2, lowercased BLEU) and writes an evaluation
folder:
Hydra's run dir (evaluations/<date_time>/), or one numbered folder per job of a multirun sweep
(multirun/evaluate/<date_time>/<job>/), e.g. over decoding settings of one checkpoint:

    python -m nmt.evaluate -m ckpt=PATH splits=[valid,test] decode.beam_size=1,4,8

A sweep chooses on valid (each job returns its valid BLEU to a Hydra sweeper, and nmt.report
ranks by valid): one without valid in its splits is refused.

Scores go to stdout; logs and sacreBLEU signatures to stderr and evaluate.log. The work is
`nmt.evaluation.evaluation_run`'s.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from nmt.cli import before_hydra, one_line_errors
from nmt.config import EvaluateConfig, register_configs
from nmt.errors import UsageError
from nmt.evaluation.evaluation_run import evaluate, summary

EXAMPLE = "python -m nmt.evaluate ckpt=outputs/<run>/model.pt splits=[valid,test]"

register_configs("evaluate")


@hydra.main(version_base=None, config_path="conf", config_name="evaluate")
def main(dict_cfg: DictConfig) -> float:
    """Returns the valid BLEU (else the first split's): what a Hydra sweeper optimises."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    with one_line_errors("nmt.evaluate", EXAMPLE):
        cfg: EvaluateConfig = OmegaConf.to_object(dict_cfg)
        if hydra_cfg.mode == RunMode.MULTIRUN and "valid" not in cfg.splits:
            raise UsageError(
                f"a sweep chooses on valid, never on test: splits={cfg.splits} has no valid "
                "(splits=[valid], or [valid,test] to score test beside it)"
            )
        record = evaluate(cfg, run_dir, list(hydra_cfg.overrides.task))
    print(summary(record, run_dir), flush=True)
    chosen_on = "valid" if "valid" in cfg.splits else cfg.splits[0]
    return record["splits"][chosen_on]["bleu"]


if __name__ == "__main__":
    before_hydra("evaluate")
    main()
