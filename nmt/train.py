"""`python -m nmt.train [experiment=NAME] [overrides...]`: train a model, Hydra-configured.

Without `experiment=` the machine picks it
(`nmt.training.experiment_choice.machine_experiment`): the paper's base model where there is
a CUDA GPU, the CPU recipe elsewhere; the first log line says
which and why. The run itself is `nmt.training.fit.train`.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from nmt.cli import before_hydra, lightning_logs_once, one_line_errors
from nmt.config import TrainConfig, register_configs
from nmt.training.budget_bands import without_overridden
from nmt.training.experiment_choice import with_experiment
from nmt.training.init_from import check_init_from

log = logging.getLogger("nmt.train")
EXAMPLE = "python -m nmt.train experiment=multi30k_cpu"


def finished(metrics: dict, run_dir: Path, seconds: float) -> str:
    """The run's last line: how long the whole command took, where model.pt is, its scores."""
    minutes, rest = divmod(round(seconds), 60)
    scores = metrics.get("final_evaluation") or {}
    scored = "; ".join(f"{role} BLEU {s['bleu']:.2f}" for role, s in scores.items())
    return f"Finished in {minutes} min {rest:02d} s: {run_dir / 'model.pt'}" + (
        f" ({scored})" if scored else ""
    )


def main() -> None:
    start = time.perf_counter()
    overrides, experiment = with_experiment(sys.argv[1:])
    sys.argv[1:] = overrides
    register_configs("train")

    @hydra.main(version_base=None, config_path="conf", config_name="train")
    def run(dict_cfg: DictConfig) -> float | None:
        log.info(experiment)
        with one_line_errors("nmt.train", EXAMPLE):
            cfg: TrainConfig = OmegaConf.to_object(dict_cfg)
            # the command line's settings win over the budget bands'
            overrides = HydraConfig.get().overrides.task
            cfg.budget_bands = without_overridden(cfg.budget_bands, overrides)
            check_init_from(cfg, overrides)
            from nmt.training.fit import train  # Lightning loads once the config is valid

            lightning_logs_once()
            run_dir = Path(HydraConfig.get().runtime.output_dir)
            metrics = train(cfg, run_dir)
        log.info(finished(metrics, run_dir, time.perf_counter() - start))
        return metrics["best_score"]  # what a Hydra sweeper optimises

    run()


if __name__ == "__main__":
    before_hydra("train")
    main()
