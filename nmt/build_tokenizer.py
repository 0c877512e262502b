"""`python -m nmt.build_tokenizer [experiment=NAME] [overrides...]` (`make tokenizer`).

Trains the experiment's joint sentencepiece model into tokenizers/ (or reuses it when its
settings and data match), with the same config composition as `nmt.train`.
"""

from __future__ import annotations

import logging
import sys

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from nmt.cli import one_line_errors, setup_logging
from nmt.config import CONF_DIR, TrainConfig, register_configs
from nmt.data.encoding import build_tokenizer
from nmt.tokenizer_training import tokenizer_paths
from nmt.training.experiment_choice import with_experiment

log = logging.getLogger("nmt.build_tokenizer")


HELP = """python -m nmt.build_tokenizer [experiment=NAME] [key=value ...]        (make tokenizer)
Trains the experiment's joint sentencepiece model into tokenizers/, or reuses the one there
when its settings and training data match: what nmt.train does first, on its own. Nothing is
required; the experiment and data are found as nmt.train finds them. Example:
  python -m nmt.build_tokenizer experiment=multi30k_cpu tokenizer.vocab_size=5000
Settings: TokenizerConfig and DataConfig in nmt/config.py (python -m nmt.train --help)."""


def main(overrides: list[str]) -> None:
    if {"-h", "--help"} & set(overrides):
        print(HELP)
        return
    setup_logging()
    register_configs("train")
    overrides, experiment = with_experiment(overrides)
    log.info(experiment)
    with one_line_errors("nmt.build_tokenizer", "python -m nmt.build_tokenizer"):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg: TrainConfig = OmegaConf.to_object(compose("train", overrides=overrides))
        tokenizer = build_tokenizer(cfg.data, cfg.tokenizer)
    print(f"{tokenizer_paths(cfg.tokenizer)[0]}: {tokenizer.vocab_size} pieces")


if __name__ == "__main__":
    main(sys.argv[1:])
