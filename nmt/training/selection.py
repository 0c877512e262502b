"""Which weights become model.pt: the best checkpoint, or the average of the last N epochs'
weights for the window N that scores highest on validation."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from nmt.checkpoint import Checkpoint
from nmt.config import TrainConfig
from nmt.evaluation.scoring import translate_and_score
from nmt.inference.torch_engine import TorchEngine
from nmt.training.averaging import average_checkpoints, checkpoints_by_step

log = logging.getLogger(__name__)


def best_or_average(
    cfg: TrainConfig, best: Checkpoint, epochs_dir: Path, valid, device: torch.device
) -> tuple[Checkpoint, dict]:
    """The best checkpoint or the average of the last N epochs' weights for one of the
    windows N of `checkpoint.average_last_epochs`, whichever scores the highest validation
    BLEU with the run's decode settings (selection on validation only; on a tie, the first of
    best, then the windows from the shortest). One candidate besides the leader is in memory
    at a time."""
    ordered = checkpoints_by_step(epochs_dir)
    windows = cfg.checkpoint.average_last_epochs
    if max(windows) > len(ordered):
        log.warning(
            "Only %d epoch checkpoints in %s (a short or resumed run): averaging windows above "
            "%d average them all",
            len(ordered),
            epochs_dir,
            len(ordered),
        )
    sources, references = list(valid["src"]), list(valid["tgt"])

    def val_bleu(candidate: Checkpoint) -> float:
        candidate.model.to(device)
        engine = TorchEngine(candidate, cfg.data.eval_max_tokens)
        return translate_and_score(engine, sources, references, cfg.decode)[1].bleu

    bleu, averaged = {"best": val_bleu(best)}, {}
    chosen_name, chosen = "best", best
    for window in sorted({min(n, len(ordered)) for n in windows}):
        name = f"average_last{window}"
        candidate = average_checkpoints(ordered[-window:])
        candidate.info.update({"experiment": cfg.experiment_name})
        averaged[name] = candidate.info["averaged"]
        bleu[name] = val_bleu(candidate)
        if bleu[name] > bleu[chosen_name]:
            chosen_name, chosen = name, candidate
    log.info(
        "Validation BLEU: %s; model.pt = %s",
        ", ".join(f"{name} {score:.2f}" for name, score in bleu.items()),
        chosen_name,
    )
    return chosen, {"val_bleu": bleu, "chosen": chosen_name, "averaged": averaged}
