"""The CPU recipe's budget bands (nmt/training/budget_bands.py, budget.ChooseBudgetBand): the
band each budget falls in, chosen from a mocked pace, applied to the running model and
optimizer; the command line wins; bands that cannot work are refused."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest
from conftest import compose_train_config, overfit_training
from lightning.pytorch.callbacks import Timer

from nmt.model import ModelConfig, Residual, Transformer
from nmt.training import budget
from nmt.training.budget import PACE_SECONDS, ChooseBudgetBand, FitScheduleToBudget
from nmt.training.budget_bands import BudgetBand, band_for, check_bands, without_overridden
from nmt.training.schedules import LearningRateSchedule

HOUR = 3600.0


class Clock:
    now = 0.0

    def monotonic(self) -> float:
        return self.now


class HourTimer(Timer):
    """trainer.max_time=1 h, on the mocked clock."""

    def __init__(self, clock: Clock):
        super().__init__(duration="00:01:00:00")
        self.clock = clock

    def time_remaining(self, stage: str = "train") -> float:
        return HOUR - self.clock.now


@pytest.fixture(scope="module")
def recipe():
    """The CPU recipe's config, as `make train` composes it on a CPU."""
    return compose_train_config(["experiment=multi30k_cpu"])


def test_the_recipe_has_three_bands_and_keeps_itself_above_7000(recipe):
    bounds = [band.max_updates for band in recipe.budget_bands]
    assert bounds == [3000, 7000, None]
    assert recipe.budget_bands[-1].settings == {}  # fast machines: the recipe as it is


@pytest.mark.parametrize("updates_per_hour", [2200, 5500, 10000])
def test_a_mocked_pace_picks_its_band_after_a_minute_and_applies_it(
    recipe, updates_per_hour, monkeypatch, caplog
):
    """Updates at a steady mocked pace under a one-hour budget: FitScheduleToBudget estimates
    the hour's updates, ChooseBudgetBand takes the band holding them once a minute has passed,
    sets its dropout on every dropout of the model and its schedule fields on the optimizer's
    config, and says so."""
    clock = Clock()
    monkeypatch.setattr(budget.time, "monotonic", clock.monotonic)
    cfg = compose_train_config(["experiment=multi30k_cpu"])
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, n_heads=2, d_ff=16, dropout=0.3))
    optim = cfg.optim
    module = SimpleNamespace(
        model=model,
        optim_cfg=optim,
        lr_schedule=LearningRateSchedule(optim, 16),
        log=lambda *args, **kwargs: None,
    )
    trainer = SimpleNamespace(
        callbacks=[HourTimer(clock)],
        global_step=0,
        log_every_n_steps=10,
        estimated_stepping_batches=math.inf,
        strategy=SimpleNamespace(broadcast=lambda value, src=0: value),
    )
    fit, choose = FitScheduleToBudget(), ChooseBudgetBand(cfg.budget_bands, cfg)
    with caplog.at_level(logging.INFO, logger="nmt.training.budget"):
        for callback in (fit, choose):
            callback.on_train_start(trainer, module)
        pace = updates_per_hour / HOUR
        while choose.chosen is None:
            trainer.global_step += 1
            clock.now = trainer.global_step / pace
            for callback in (fit, choose):
                callback.on_train_batch_end(trainer, module)
            assert trainer.global_step < updates_per_hour
    assert clock.now >= PACE_SECONDS
    expected = band_for(recipe.budget_bands, updates_per_hour)
    assert choose.chosen == recipe.budget_bands.index(expected)
    assert abs(module.lr_schedule.total_steps - updates_per_hour) < 0.02 * updates_per_hour
    dropout = expected.settings.get("model.dropout", recipe.model.dropout)
    residual = [m.dropout.p for m in model.modules() if isinstance(m, Residual)]
    assert residual and set(residual) == {dropout} and model.embed_dropout.p == dropout
    assert model.cfg.dropout == dropout and cfg.model.dropout == dropout
    for name in ("schedule", "warmup_fraction", "label_smoothing"):
        wanted = expected.settings.get(f"optim.{name}", getattr(recipe.optim, name))
        assert getattr(optim, name) == wanted
    chosen_line = [r.message for r in caplog.records if r.message.startswith("Budget band ")]
    assert (
        len(chosen_line) == 1 and f"~{module.lr_schedule.total_steps:,} updates" in (chosen_line[0])
    )


def test_the_command_line_wins_and_bad_bands_are_refused():
    bands = [
        BudgetBand(3000, {"model.dropout": 0.1, "optim.schedule": "cosine"}),
        BudgetBand(None, {}),
    ]
    kept = without_overridden(bands, ["experiment=multi30k_cpu", "model.dropout=0.2"])
    assert kept[0].settings == {"optim.schedule": "cosine"} and kept[1].settings == {}
    with pytest.raises(ValueError, match="data.max_tokens cannot change while training"):
        check_bands([BudgetBand(None, {"data.max_tokens": 2432})], kept_epochs=10)
    with pytest.raises(ValueError, match="max_updates must rise"):
        check_bands([BudgetBand(7000, {}), BudgetBand(3000, {}), BudgetBand(None, {})], 10)
    with pytest.raises(ValueError, match="needs more than the 10 epoch ends"):
        check_bands([BudgetBand(None, {"checkpoint.average_last_epochs": [20]})], 10)


def test_a_training_run_takes_its_band_from_its_step_budget(overfit_data, tmp_path, caplog):
    """Real training (the recipe shrunk), a step budget of 40 updates and a band up to 100:
    the band's dropout is the one model.pt was trained with, and the log says why."""
    from nmt.checkpoint import load_checkpoint
    from nmt.training.fit import train

    cfg = compose_train_config(
        overfit_training(overfit_data, tmp_path, "trainer.max_steps=40", "trainer.max_time=null")
    )
    cfg.budget_bands = [BudgetBand(100, {"model.dropout": 0.05}), BudgetBand(None, {})]
    with caplog.at_level(logging.INFO, logger="nmt.training.budget"):
        train(cfg, tmp_path / "run")
    assert load_checkpoint(tmp_path / "run" / "model.pt").model.cfg.dropout == 0.05
    assert any("up to 100 updates, since the budget holds ~40" in r.message for r in caplog.records)
