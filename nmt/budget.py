"""Ending a cosine schedule where the run's budget ends: `trainer.max_steps`, or the update
count that `trainer.max_time` will reach, estimated while the run goes."""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import Timer


def steps_that_fit(step: int, elapsed: float, remaining: float) -> int | None:
    """The update count a run at `step` after `elapsed` seconds reaches in `remaining` more
    seconds at its average pace so far; None before its first update."""
    if step <= 0 or elapsed <= 0:
        return None
    return step + int(max(remaining, 0.0) * step / elapsed)


class FitScheduleToBudget(L.Callback):
    """Sets the cosine schedule's `total_steps` (nmt.optim.Schedule) to where the run stops.

    With `trainer.max_steps` alone that is known at the start. With `trainer.max_time` it is
    re-estimated at every training epoch end from the pace so far (`steps_that_fit`; the time
    spent validating and saving checkpoints counts), capped by max_steps: the learning rate
    reaches zero as time runs out on a fast machine or a slow one. Warmup does not depend on
    it, and the first epochs' estimates are refined long before the decay matters. Rank 0's
    estimate is broadcast, so DDP ranks follow one schedule. Logged as
    `train/scheduled_steps`.
    """

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.max_steps > 0 and self._timer(trainer) is None:
            self._set(trainer, trainer.max_steps)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timer = self._timer(trainer)
        if timer is None:
            return
        total = steps_that_fit(
            trainer.global_step, timer.time_elapsed("train"), timer.time_remaining("train")
        )
        if total is None:
            return
        if trainer.max_steps > 0:
            total = min(total, trainer.max_steps)
        total = trainer.strategy.broadcast(total, src=0)
        self._set(trainer, total)
        pl_module.log("train/scheduled_steps", float(total))

    @staticmethod
    def _timer(trainer: L.Trainer) -> Timer | None:
        """Lightning's own Timer, which `max_time` adds and which survives a resume."""
        timers = [c for c in trainer.callbacks if isinstance(c, Timer)]
        return timers[0] if timers and timers[0].time_remaining("train") is not None else None

    @staticmethod
    def _set(trainer: L.Trainer, total_steps: int) -> None:
        for config in trainer.lr_scheduler_configs:
            for schedule in config.scheduler.lr_lambdas:
                schedule.total_steps = total_steps
