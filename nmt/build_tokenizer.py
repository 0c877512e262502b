"""`python -m nmt.build_tokenizer [experiment=NAME] [overrides...]` (`make tokenizer`).

Trains the experiment's joint sentencepiece model into tokenizers/ (or reuses it when its
settings and data match), with the same config composition as `nmt.train`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from nmt.config import TrainConfig, register_configs
from nmt.data import build_tokenizer
from nmt.tokenizer import tokenizer_paths

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def main(overrides: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    register_configs()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg: TrainConfig = OmegaConf.to_object(compose("train", overrides=overrides))
        tokenizer = build_tokenizer(cfg.data, cfg.tokenizer)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"nmt.build_tokenizer: error: {error}")
    print(f"{tokenizer_paths(cfg.tokenizer)[0]}: {tokenizer.vocab_size} pieces")


if __name__ == "__main__":
    main(sys.argv[1:])
