"""`python -m nmt.train [experiment=NAME] [overrides...]`: train a model, Hydra-configured.

Without `experiment=` the machine picks it
(`nmt.training.experiment_choice.machine_experiment`): the paper's base model where there is
a CUDA GPU, the CPU recipe elsewhere; the first log line says
which and why. The run itself is `nmt.training.fit.train`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from nmt.cli import one_line_errors
from nmt.config import TrainConfig, register_configs
from nmt.training.budget_bands import without_overridden
from nmt.training.experiment_choice import with_experiment

log = logging.getLogger("nmt.train")
EXAMPLE = "python -m nmt.train experiment=multi30k_cpu"


def main() -> None:
    overrides, experiment = with_experiment(sys.argv[1:])
    sys.argv[1:] = overrides
    register_configs()

    @hydra.main(version_base=None, config_path="conf", config_name="train")
    def run(dict_cfg: DictConfig) -> float | None:
        log.info(experiment)
        with one_line_errors("nmt.train", EXAMPLE):
            cfg: TrainConfig = OmegaConf.to_object(dict_cfg)
            # the command line's settings win over the budget bands'
            cfg.budget_bands = without_overridden(
                cfg.budget_bands, HydraConfig.get().overrides.task
            )
            from nmt.training.fit import train  # Lightning loads once the config is valid

            metrics = train(cfg, Path(HydraConfig.get().runtime.output_dir))
        return metrics["best_score"]  # what a Hydra sweeper optimises

    run()


if __name__ == "__main__":
    main()
