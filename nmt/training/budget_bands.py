"""Settings chosen for the updates this run's budget will reach: the CPU recipe's bands.

An hour on a slow CPU holds a fifth of the updates it holds on a fast one, and what trains
best in 10,000 updates (dropout 0.3, the paper's decay) is not what trains best in 2,000
(docs/experiments.md). A config lists `budget_bands`: each an upper bound on the updates and
the settings to use at or below it, the last one (no bound) for every larger budget. The run
starts with its own settings; once it knows its budget in updates (at once with
trainer.max_steps; with trainer.max_time, from the pace of its first minute, as
nmt.training.budget estimates it for the schedule) it takes the first band that holds that
budget and applies its settings, except those the command line set, and logs which and why.
With a time budget the estimate is read again after each validation, and a band of the same
shape is taken in place where the estimate has moved into it (a first minute on a busy
machine reads low).

A band may change what can change while training runs (`SETTERS`): dropout, the
schedule's form and warmup share, label smoothing, the averaging windows (within the epochs
kept). It may also change the model's shape (`SHAPE`: depth, width, heads, FFN): the run then
starts over with the new model (nmt.training.fit), its first minute spent on measuring the
pace. The bounds are read off the pace of the config's own shape. The choice is saved in
checkpoints: a resumed run keeps it, and its shape. The callback that chooses is
nmt.training.budget.ChooseBudgetBand; this module holds the bands, free of Lightning.
"""

from __future__ import annotations

from collections.abc import Callable

from nmt.cli import override_key
from nmt.config import BudgetBand


def _set_dropout(module, cfg, value) -> None:
    module.model.set_dropout(value)
    cfg.model.dropout = value


def _set_optim(name: str) -> Callable:
    def set_field(module, cfg, value) -> None:
        # the run's cfg.optim itself: the schedule and the loss read it at each step
        setattr(module.optim_cfg, name, value)

    return set_field


def _set_windows(module, cfg, value) -> None:
    cfg.checkpoint.average_last_epochs = list(value)  # read when model.pt is chosen


SETTERS: dict[str, Callable] = {
    "model.dropout": _set_dropout,
    "optim.schedule": _set_optim("schedule"),
    "optim.warmup_fraction": _set_optim("warmup_fraction"),
    "optim.label_smoothing": _set_optim("label_smoothing"),
    "checkpoint.average_last_epochs": _set_windows,
}


# Settings the model is built with: a band that changes one starts the run over
SHAPE = frozenset(
    f"model.{name}" for name in ("encoder_layers", "decoder_layers", "d_model", "n_heads", "d_ff")
)


def changes_shape(band: BudgetBand, cfg) -> bool:
    """Whether the band sets the model's shape other than `cfg` (a TrainConfig) has it."""
    return any(
        name in SHAPE and getattr(cfg.model, name.removeprefix("model.")) != value
        for name, value in band.settings.items()
    )


def set_before_building(band: BudgetBand, cfg) -> None:
    """Write every setting of `band` into `cfg` (a TrainConfig), for a run that builds its
    model and optimizer after: the shape, and what SETTERS change in a running one."""
    for name, value in band.settings.items():
        section, key = name.split(".")
        setattr(getattr(cfg, section), key, value)


def check_bands(bands: list[BudgetBand], kept_epochs: int) -> None:
    """Refuse bands that cannot work: unordered bounds, a setting no band may change while
    training, averaging over more epochs than the run keeps (`kept_epochs`)."""
    bounds = [b.max_updates for b in bands]
    if bands and (
        bounds[-1] is not None or None in bounds[:-1] or bounds[:-1] != sorted(bounds[:-1])
    ):
        raise ValueError(
            f"budget_bands: max_updates must rise, the last one null (any budget), got {bounds}"
        )
    for band in bands:
        for name, value in band.settings.items():
            if name not in SETTERS and name not in SHAPE:
                raise ValueError(
                    f"budget_bands: {name} cannot change while training; a band may set "
                    f"{', '.join([*SETTERS, *sorted(SHAPE)])}"
                )
            if name == "checkpoint.average_last_epochs" and max(value) > kept_epochs:
                raise ValueError(
                    f"budget_bands: average_last_epochs {list(value)} needs more than the "
                    f"{kept_epochs} epoch ends the run keeps (checkpoint.average_last_epochs)"
                )


def without_overridden(bands: list[BudgetBand], overrides: list[str]) -> list[BudgetBand]:
    """The bands less every setting the command line (`overrides`, Hydra's) sets itself."""
    given = {override_key(o) for o in overrides}
    return [
        BudgetBand(b.max_updates, {k: v for k, v in b.settings.items() if k not in given})
        for b in bands
    ]


def band_for(bands: list[BudgetBand], updates: int) -> BudgetBand:
    """The first band that holds `updates`."""
    return next(b for b in bands if b.max_updates is None or updates <= b.max_updates)


def describe(band: BudgetBand) -> str:
    if not band.settings:
        return "the config's own settings"
    return ", ".join(f"{k}={v}" for k, v in band.settings.items())
