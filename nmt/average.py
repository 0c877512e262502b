"""`python -m nmt.average dir=RUN/checkpoints/periodic last=5 [output=FILE]`: average weights.

Averages the parameters of the last N checkpoints (by training step) of a folder, or of an
explicit list (`checkpoints=[a.ckpt,b.ckpt]`), into one inference checkpoint, as the paper
does for its base (last 5) and big (last 20) models.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from nmt.checkpoint import Translator, load_translator, save_inference_checkpoint, saved_info

log = logging.getLogger(__name__)


@dataclass
class AverageConfig:
    dir: str | None = None  # a folder of .ckpt/.pt checkpoints
    checkpoints: list[str] = field(default_factory=list)  # or an explicit list
    last: int = 5
    output: str | None = None  # default: <dir>/averaged_last<N>.pt


def checkpoints_by_step(folder: Path) -> list[Path]:
    """The checkpoints of a folder (.ckpt and .pt), ordered by the training step they were
    saved at. Left out: last.ckpt, a copy of one of the others, and averages (their info lists
    what they average, and their step is their newest checkpoint's): an average written beside
    its checkpoints must not be averaged in by the next run."""
    found = []
    for path in sorted(folder.glob("*.ckpt")) + sorted(folder.glob("*.pt")):
        if path.name == "last.ckpt":
            continue  # a copy of another: not even read
        info = saved_info(path)
        if "averaged" not in info:
            found.append((int(info.get("global_step", -1)), path))
    return [path for _, path in sorted(found)]


def select_checkpoints(folder: Path, last: int) -> list[Path]:
    """The `last` checkpoints of a folder by the training step they were saved at."""
    found = checkpoints_by_step(folder)
    if len(found) < last:
        raise ValueError(
            f"asked to average the last {last} checkpoints but {folder} has {len(found)}"
        )
    return found[-last:]


def average_checkpoints(paths: list[Path]) -> Translator:
    """Mean of the weights (in float32); config, tokenizer and direction from the last one.
    The checkpoints are read one at a time into a running float32 sum, so memory holds the
    sum and two models however many are averaged."""
    reference = load_translator(paths[-1])
    weights = reference.model.state_dict()
    sums = {name: weight.float().clone() for name, weight in weights.items()}  # not in place
    for path in paths[:-1]:
        for name, weight in load_translator(path).model.state_dict().items():
            sums[name] += weight.float()
    reference.model.load_state_dict(
        {name: (total / len(paths)).to(weights[name].dtype) for name, total in sums.items()}
    )
    reference.info = {**reference.info, "averaged": [str(p) for p in paths]}
    return reference


ConfigStore.instance().store(name="average", node=AverageConfig)


@hydra.main(version_base=None, config_path=None, config_name="average")
def main(dict_cfg) -> None:
    cfg: AverageConfig = OmegaConf.to_object(dict_cfg)
    if not (cfg.checkpoints or cfg.dir):
        sys.exit("nmt.average: error: give dir=FOLDER (with last=N) or checkpoints=[...]")
    try:
        paths = [Path(p) for p in cfg.checkpoints] or select_checkpoints(Path(cfg.dir), cfg.last)
        averaged = average_checkpoints(paths)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"nmt.average: error: {error}")
    output = Path(cfg.output) if cfg.output else paths[-1].parent / f"averaged_last{len(paths)}.pt"
    save_inference_checkpoint(output, averaged)
    log.info("Averaged %d checkpoints into %s", len(paths), output)


if __name__ == "__main__":
    main()
