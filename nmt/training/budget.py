"""Fitting the run to its budget: the learning-rate schedule (a cosine's end, a fitted
warmup) to the update count that `trainer.max_steps` or `max_epochs` fix, or that
`trainer.max_time` will reach, estimated while the run goes; and the settings of the budget
band that count falls in (nmt.training.budget_bands)."""

from __future__ import annotations

import logging
import math
import time

import lightning as L
from lightning.pytorch.callbacks import Timer

from nmt.training.budget_bands import (
    SETTERS,
    SHAPE,
    BudgetBand,
    band_for,
    changes_shape,
    describe,
)

log = logging.getLogger(__name__)
PACE_SECONDS = 60.0  # how long a run with a time budget trains before it chooses its band
# A first estimate this close under a band's bound (a share of it) does not start the run over
# with that band's model: a pace read while the machine was busy is low by more than that.
EDGE_MARGIN = 0.1
# A re-estimate after validation switches bands in place only this far (a share of the bound)
# past the bound it crosses: an estimate hovering at an edge would flip dropout every time
# (the recipe's hour on a Xeon read 7,124, 6,974 and 7,074 around the 7,000 bound).
SWITCH_MARGIN = 0.02


def time_budget(trainer: L.Trainer) -> Timer | None:
    """Lightning's own Timer, which `trainer.max_time` adds (its elapsed time survives a
    resume), or None without a time budget."""
    timers = [c for c in trainer.callbacks if isinstance(c, Timer)]
    return timers[0] if timers and timers[0].time_remaining() is not None else None


def less_time(max_time: str, seconds: float) -> str:
    """`max_time` ("DD:HH:MM:SS", Lightning's form) less `seconds`, rounded up."""
    days, hours, minutes, secs = (int(part) for part in max_time.split(":"))
    left = max(days * 86400 + hours * 3600 + minutes * 60 + secs - math.ceil(seconds), 0)
    return f"{left // 86400:02d}:{left // 3600 % 24:02d}:{left // 60 % 60:02d}:{left % 60:02d}"


def steps_that_fit(step: int, steps_per_second: float, remaining: float) -> int:
    """The update count a run at `step` reaches in `remaining` more seconds at this pace."""
    return step + int(max(remaining, 0.0) * steps_per_second)


def estimated_updates(trainer: L.Trainer) -> int | None:
    """FitScheduleToBudget's estimate of the run's last update (None before it has one)."""
    fits = [c for c in trainer.callbacks if isinstance(c, FitScheduleToBudget)]
    return fits[0].total_steps if fits else None


class FitScheduleToBudget(L.Callback):
    """Sets the module's `lr_schedule.total_steps` (nmt.training.schedules) to the run's last
    update.

    The step budget (`trainer.estimated_stepping_batches`: max_steps, or max_epochs times the
    updates an epoch) is known at the start. With `trainer.max_time` the end is re-estimated
    every `trainer.log_every_n_steps` updates from this session's pace so far (the time spent
    validating and saving checkpoints counts) and the time left, capped by the step budget,
    so the learning rate reaches zero as time runs out on a fast machine or a slow one. Until
    the first estimate the end is the step budget, the one saved in the checkpoint resumed
    from, or unknown (cosine then holds the peak after warmup). Rank 0's estimate is
    broadcast: DDP ranks follow one schedule. Logged as `train/scheduled_steps`.

    With `fits_schedule` false (a cosine whose end optim.total_steps fixes) the estimate is
    made all the same, for the budget bands (ChooseBudgetBand reads `total_steps`), and the
    schedule is left as configured.
    """

    def __init__(self, fits_schedule: bool = True):
        self.fits_schedule = fits_schedule
        self.total_steps: int | None = None  # saved in checkpoints: a resume starts from it
        self._session_start: tuple[int, float] = (0, 0.0)  # (global step, monotonic time)
        self._estimated_at = -1  # the step of the last estimate (accumulated batches share one)
        self._timer: Timer | None = None  # Lightning's, with max_time
        self._step_budget = math.inf  # trainer.estimated_stepping_batches

    def state_dict(self) -> dict:
        return {"total_steps": self.total_steps}

    def load_state_dict(self, state_dict: dict) -> None:
        self.total_steps = state_dict["total_steps"]

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._session_start = (trainer.global_step, time.monotonic())
        self._timer = time_budget(trainer)
        self._step_budget = trainer.estimated_stepping_batches
        if math.isfinite(self._step_budget) and (self._timer is None or self.total_steps is None):
            self.total_steps = int(self._step_budget)
        if self.fits_schedule:
            pl_module.lr_schedule.total_steps = self.total_steps

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        start_step, start_time = self._session_start
        steps_done = trainer.global_step - start_step
        if self._timer is None or steps_done <= 0 or steps_done % trainer.log_every_n_steps:
            return
        if trainer.global_step == self._estimated_at:
            return
        self._estimated_at = trainer.global_step
        pace = steps_done / max(time.monotonic() - start_time, 1e-9)
        total = steps_that_fit(trainer.global_step, pace, self._timer.time_remaining())
        if math.isfinite(self._step_budget):
            total = min(total, int(self._step_budget))
        self.total_steps = trainer.strategy.broadcast(total, src=0)
        if self.fits_schedule:
            pl_module.lr_schedule.total_steps = self.total_steps
            pl_module.log("train/scheduled_steps", float(self.total_steps))


class ChooseBudgetBand(L.Callback):
    """Applies the settings of the band the run's budget falls in (nmt.training.budget_bands),
    once the budget is known: at the first update with a step budget (or with a time budget
    too, when the step budget falls in the first band); with trainer.max_time, at the first
    re-estimate of FitScheduleToBudget (which runs before it and whose estimate it reads)
    after PACE_SECONDS. Rank 0 decides when; every rank then reads the same
    broadcast estimate, so DDP ranks take the same band at the same update.

    A band whose model has another shape is not applied: the callback stops the run and sets
    `start_over` to it; nmt.training.fit then builds that model and trains it for the rest of
    the budget, with this callback made with the band `chosen` and the seconds `spent`. It is
    not taken where the estimate lies within EDGE_MARGIN of its bound (the next band is).

    After each validation the estimate is read again: where it now falls in another band of
    the same shape settings, more than SWITCH_MARGIN past the bound between them, that band
    is applied in place (dropout, the schedule's fields, the windows: the config's own where
    the new band sets none), and logged."""

    def __init__(self, bands: list[BudgetBand], cfg, chosen: int | None = None, spent=0.0):
        self.bands, self.cfg = bands, cfg
        self.chosen = chosen  # the band's index, once applied; saved in checkpoints
        self.spent = spent  # seconds of the budget a first attempt spent; saved in checkpoints
        self.start_over: BudgetBand | None = None  # a band that needs another model
        self._start = 0.0
        self._timed = False
        # the config's own value of every setting a band may change while training
        self.own = {name: setting(cfg, name) for name in SETTERS}

    def state_dict(self) -> dict:
        return {"chosen": self.chosen, "spent": self.spent}

    def load_state_dict(self, state_dict: dict) -> None:
        self.chosen, self.spent = state_dict["chosen"], state_dict.get("spent", 0.0)

    @classmethod
    def saved_in(cls, checkpoint: dict) -> tuple[int | None, float]:
        """The band chosen and the seconds spent before starting over, as a Lightning
        checkpoint of a run with bands holds them; (None, 0.0) without."""
        state = checkpoint.get("callbacks", {}).get(cls.__qualname__, {})
        return state.get("chosen"), state.get("spent", 0.0)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.monotonic()
        # A step budget in the first band needs no pace: time can only lower the count
        steps = trainer.estimated_stepping_batches
        in_first = math.isfinite(steps) and band_for(self.bands, int(steps)) is self.bands[0]
        self._timed = time_budget(trainer) is not None and not in_first
        if self.chosen is not None:  # resumed, or started over: the same settings again
            self.apply(pl_module, self.bands[self.chosen], "as chosen earlier in this run")
            return
        bands = "; ".join(
            f"{'up to ' + format(b.max_updates, ',') if b.max_updates else 'more'}: {describe(b)}"
            for b in self.bands
        )
        when = f"the pace of its first {PACE_SECONDS:.0f} s" if self._timed else "its step budget"
        log.info("Budget bands, by the updates the budget holds (from %s): %s", when, bands)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        if self.chosen is not None or self.start_over is not None:
            return
        elapsed = time.monotonic() - self._start
        if self._timed:
            if trainer.global_step % trainer.log_every_n_steps:
                return  # FitScheduleToBudget re-estimates at these updates only
            ready = elapsed >= PACE_SECONDS and estimated_updates(trainer) is not None
            if not trainer.strategy.broadcast(ready, src=0):
                return
        total = estimated_updates(trainer)
        if total is None:
            return
        band = band_for(self.bands, total)
        pace = trainer.global_step / max(elapsed, 1e-9)
        why = f"since the budget holds ~{total:,} updates" + (
            f" at this run's {pace:.2f} updates/s" if self._timed else ""
        )
        bound = band.max_updates or math.inf
        if changes_shape(band, self.cfg) and total > (1 - EDGE_MARGIN) * bound:
            band = self.bands[self.bands.index(band) + 1]
            why += f", within {EDGE_MARGIN:.0%} of a smaller model's bound"
        if changes_shape(band, self.cfg):
            self.start_over, trainer.should_stop = band, True
            log.info(
                "Budget band %s, %s: %s. Its model has another shape: starting over "
                "with it for the rest of the budget",
                bound_of(band),
                why,
                describe(band),
            )
            return
        self.chosen = self.bands.index(band)
        self.apply(pl_module, band, why)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.chosen is None or not self._timed or trainer.sanity_checking:
            return
        total = estimated_updates(trainer)  # the same on every rank: broadcast
        band = band_for(self.bands, total) if total is not None else None
        now = self.bands[self.chosen]
        if band is None or band is now or shape_of(band) != shape_of(now):
            return
        upper = self.bands.index(band) > self.chosen
        crossed = (now if upper else band).max_updates  # the bound between the two bands
        if abs(total - crossed) <= SWITCH_MARGIN * crossed:
            return
        settings = {name: self.own[name] for name in now.settings if name in SETTERS}
        for name, value in (settings | band.settings).items():
            SETTERS[name](pl_module, self.cfg, value)
        self.chosen = self.bands.index(band)
        log.info(
            "Budget band %s, re-estimated after validation: the budget holds ~%s updates: %s",
            bound_of(band),
            f"{total:,}",
            describe(band),
        )

    def apply(self, module, band: BudgetBand, why: str) -> None:
        for name, value in band.settings.items():
            if name in SETTERS:  # the shape's settings were the model's as it was built
                SETTERS[name](module, self.cfg, value)
        log.info("Budget band %s, %s: %s", bound_of(band), why, describe(band))


def setting(cfg, name: str):
    """A TrainConfig's value of a dotted setting ("model.dropout")."""
    section, key = name.split(".")
    return getattr(getattr(cfg, section), key)


def shape_of(band: BudgetBand) -> dict:
    """The model shape a band sets (empty: the config's own)."""
    return {name: value for name, value in band.settings.items() if name in SHAPE}


def bound_of(band: BudgetBand) -> str:
    return f"up to {band.max_updates:,} updates" if band.max_updates else "the largest"
