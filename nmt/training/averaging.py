"""Checkpoint averaging: the mean of the weights of several checkpoints of one run, as the
paper does for its base (last 5) and big (last 20) models. Used by `nmt.average` and by
training's choice of model.pt (`nmt.training.selection`)."""

from __future__ import annotations

from pathlib import Path

from nmt.checkpoint import Checkpoint, check_combinable, load_checkpoint, saved_info


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


def average_checkpoints(paths: list[Path]) -> Checkpoint:
    """Mean of the weights (in float32); config, tokenizer and direction from the last one,
    which every other must share, with its weights' shapes (CheckpointError, one line).
    The checkpoints are read one at a time into a running float32 sum, so memory holds the
    sum and two models however many are averaged."""
    reference = load_checkpoint(paths[-1])
    weights = reference.model.state_dict()
    sums = {name: weight.float().clone() for name, weight in weights.items()}  # not in place
    for path in paths[:-1]:
        other = load_checkpoint(path)
        check_combinable(paths[-1], reference, path, other, "averaged checkpoints", True)
        for name, weight in other.model.state_dict().items():
            sums[name] += weight.float()
    reference.model.load_state_dict(
        {name: (total / len(paths)).to(weights[name].dtype) for name, total in sums.items()}
    )
    reference.info = {**reference.info, "averaged": [str(p) for p in paths]}
    return reference
