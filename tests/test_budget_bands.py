"""The CPU recipe's budget bands (nmt/training/budget_bands.py, budget.ChooseBudgetBand): the
band each budget falls in, chosen from a mocked pace, applied to the running model and
optimizer; the command line wins; bands that cannot work are refused."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest
import torch
from conftest import compose_train_config, overfit_training
from lightning.pytorch.callbacks import Timer

from nmt.model import ModelConfig, Residual, Transformer
from nmt.training import budget
from nmt.training.budget import PACE_SECONDS, ChooseBudgetBand, FitScheduleToBudget
from nmt.training.budget_bands import (
    BudgetBand,
    band_for,
    changes_shape,
    check_bands,
    without_overridden,
)
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


@pytest.mark.parametrize("fixed_end", [False, True], ids=["fitted_cosine", "total_steps"])
@pytest.mark.parametrize("updates_per_hour", [2200, 5500, 10000])
def test_a_mocked_pace_picks_its_band_after_a_minute_and_applies_it(
    recipe, updates_per_hour, fixed_end, monkeypatch, caplog
):
    """Updates at a steady mocked pace under a one-hour budget: FitScheduleToBudget estimates
    the hour's updates, ChooseBudgetBand takes the band holding them once a minute has passed,
    sets its dropout on every dropout of the model and its schedule fields on the optimizer's
    config, and says so; or, for a band of another shape, stops the run to start over. With
    optim.total_steps the bands are chosen alike and the cosine ends where it says."""
    clock = Clock()
    monkeypatch.setattr(budget.time, "monotonic", clock.monotonic)
    fixed = ["optim.total_steps=50000"] if fixed_end else []
    cfg = compose_train_config(["experiment=multi30k_cpu", *fixed])
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
    fit = FitScheduleToBudget(fits_schedule=not fixed_end)
    choose = ChooseBudgetBand(cfg.budget_bands, cfg)
    trainer.callbacks += [fit, choose]
    with caplog.at_level(logging.INFO, logger="nmt.training.budget"):
        for callback in (fit, choose):
            callback.on_train_start(trainer, module)
        trainer.should_stop = False
        pace = updates_per_hour / HOUR
        while choose.chosen is None and choose.start_over is None:
            trainer.global_step += 1
            clock.now = trainer.global_step / pace
            for callback in (fit, choose):
                callback.on_train_batch_end(trainer, module)
            assert trainer.global_step < updates_per_hour
    assert clock.now >= PACE_SECONDS
    expected = band_for(recipe.budget_bands, updates_per_hour)
    assert abs(fit.total_steps - updates_per_hour) < 0.02 * updates_per_hour
    assert module.lr_schedule.total_steps == (50000 if fixed_end else fit.total_steps)
    # the slow machine's band trains 3+3 layers: the run stops, to start over with that model
    assert changes_shape(expected, recipe) == (updates_per_hour == 2200)
    if changes_shape(expected, recipe):
        assert choose.start_over == expected and choose.chosen is None and trainer.should_stop
        expected = BudgetBand(expected.max_updates, {})  # nothing applied to this model
    else:
        assert choose.chosen == recipe.budget_bands.index(expected) and not trainer.should_stop
    dropout = expected.settings.get("model.dropout", recipe.model.dropout)
    residual = [m.dropout.p for m in model.modules() if isinstance(m, Residual)]
    assert residual and set(residual) == {dropout} and model.embed_dropout.p == dropout
    assert model.cfg.dropout == dropout and cfg.model.dropout == dropout
    for name in ("schedule", "warmup_fraction", "label_smoothing"):
        wanted = expected.settings.get(f"optim.{name}", getattr(recipe.optim, name))
        assert getattr(optim, name) == wanted
    chosen_line = [r.message for r in caplog.records if r.message.startswith("Budget band ")]
    assert len(chosen_line) == 1 and f"~{fit.total_steps:,} updates" in (chosen_line[0])


def paced_run(cfg, clock: Clock, monkeypatch):
    """A model, module and trainer under a mocked one-hour budget, with both callbacks."""
    monkeypatch.setattr(budget.time, "monotonic", clock.monotonic)
    model = Transformer(ModelConfig(vocab_size=50, d_model=16, n_heads=2, d_ff=16, dropout=0.3))
    module = SimpleNamespace(
        model=model,
        optim_cfg=cfg.optim,
        lr_schedule=LearningRateSchedule(cfg.optim, 16),
        log=lambda *args, **kwargs: None,
    )
    fit, choose = FitScheduleToBudget(), ChooseBudgetBand(cfg.budget_bands, cfg)
    trainer = SimpleNamespace(
        callbacks=[HourTimer(clock), fit, choose],
        global_step=0,
        log_every_n_steps=10,
        estimated_stepping_batches=math.inf,
        strategy=SimpleNamespace(broadcast=lambda value, src=0: value),
        should_stop=False,
        sanity_checking=False,
    )
    for callback in (fit, choose):
        callback.on_train_start(trainer, module)
    return model, module, trainer, fit, choose


def run_at(trainer, module, clock: Clock, updates_per_hour: float, steps: int) -> None:
    """`steps` more updates at a pace of `updates_per_hour`."""
    for _ in range(steps):
        trainer.global_step += 1
        clock.now += HOUR / updates_per_hour
        for callback in trainer.callbacks[1:]:
            callback.on_train_batch_end(trainer, module)


def test_a_slow_first_minute_near_an_edge_keeps_the_model_and_validation_corrects_the_band(
    monkeypatch, caplog
):
    """A first minute read at 2,900 updates an hour (a busy machine: within 10% of the 3+3
    band's 3,000) takes the 7,000 band in place rather than starting over; at the pace the run
    then keeps, the estimate after a validation passes 7,000 and the recipe's own dropout
    comes back; a band of another shape is never taken after validation."""
    cfg = compose_train_config(["experiment=multi30k_cpu"])
    clock = Clock()
    model, module, trainer, fit, choose = paced_run(cfg, clock, monkeypatch)
    with caplog.at_level(logging.INFO, logger="nmt.training.budget"):
        run_at(trainer, module, clock, 2900, 50)
        assert choose.start_over is None and choose.chosen == 1 and model.cfg.dropout == 0.2
        run_at(trainer, module, clock, 20000, 3000)  # the machine is free again
        choose.on_validation_end(trainer, module)
    assert fit.total_steps > 7000 and choose.chosen == 2
    assert model.cfg.dropout == 0.3 and cfg.model.dropout == 0.3
    assert {m.dropout.p for m in model.modules() if isinstance(m, Residual)} == {0.3}
    assert any("re-estimated after validation" in r.message for r in caplog.records)
    fit.total_steps = 6_900  # below 7,000 but within 2% of it: an estimate at the edge
    choose.on_validation_end(trainer, module)
    assert choose.chosen == 2 and model.cfg.dropout == 0.3
    fit.total_steps = 6_800  # clear of it: the 7,000 band's dropout, in place
    choose.on_validation_end(trainer, module)
    assert choose.chosen == 1 and model.cfg.dropout == 0.2
    fit.total_steps = 2000  # an estimate in the 3+3 band's
    choose.on_validation_end(trainer, module)
    assert choose.chosen == 1 and choose.start_over is None  # its shape differs: kept


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
    """Real training (the recipe shrunk), a step budget of 4 updates and a band up to 100:
    the band's dropout is the one model.pt was trained with, and the log says why."""
    from nmt.checkpoint import load_checkpoint
    from nmt.training.fit import train

    cfg = compose_train_config(
        overfit_training(overfit_data, tmp_path, "trainer.max_steps=4", "trainer.max_time=null")
    )
    cfg.budget_bands = [BudgetBand(100, {"model.dropout": 0.05}), BudgetBand(None, {})]
    with caplog.at_level(logging.INFO, logger="nmt.training.budget"):
        train(cfg, tmp_path / "run")
    assert load_checkpoint(tmp_path / "run" / "model.pt").model.cfg.dropout == 0.05
    assert any(
        "up to 100 updates, since the budget holds ~4 updates" in r.message for r in caplog.records
    )


SHALLOW = {"model.decoder_layers": 1, "model.d_ff": 64, "model.dropout": 0.1}


def shallow_bands() -> list[BudgetBand]:
    return [BudgetBand(100, dict(SHALLOW)), BudgetBand(None, {})]


def test_a_band_of_another_shape_starts_over_as_if_the_command_line_gave_it(
    overfit_data, tmp_path, caplog
):
    """The tiny recipe (2 decoder layers, FFN 128) with a band up to 100 updates that trains 1
    decoder layer, FFN 64, dropout 0.1, and a budget of 6 updates within an hour's max_time:
    no time budget can hold more than 6 updates, so the band is certain at the first update
    (waiting a minute for the pace, the run would have ended before choosing). The run stops
    after that update, discards that model's checkpoints and starts over; model.pt then has
    exactly the weights of a run given those settings on the command line (and no max_time)."""
    from nmt.checkpoint import load_checkpoint, read_checkpoint
    from nmt.training.fit import train

    def tiny(work, *extra):
        return overfit_training(
            overfit_data,
            work,
            "trainer.max_steps=6",
            "checkpoint.average_last_epochs=[3]",
            "data.max_eval_pairs=8",  # the checkpoints chosen on 8 val lines: the same choice
            *extra,
        )

    banded = compose_train_config(tiny(tmp_path / "banded", "trainer.max_time=00:01:00:00"))
    banded.budget_bands = shallow_bands()
    with caplog.at_level(logging.INFO, logger="nmt.training.budget"):
        metrics = train(banded, tmp_path / "banded")
    given = [f"{name}={value}" for name, value in SHALLOW.items()]
    train(compose_train_config(tiny(tmp_path / "given", *given)), tmp_path / "given")

    assert any("since the budget holds ~6 updates:" in r.message for r in caplog.records)
    assert any("another shape: starting over" in r.message for r in caplog.records)
    assert metrics["global_step"] == 6 and metrics["selection"]["chosen"]
    started_over = load_checkpoint(tmp_path / "banded" / "model.pt").model
    assert (started_over.cfg.decoder_layers, started_over.cfg.d_ff) == (1, 64)
    reference = load_checkpoint(tmp_path / "given" / "model.pt").model.state_dict()
    weights = started_over.state_dict()
    assert weights.keys() == reference.keys()
    assert all(torch.equal(weights[k], reference[k]) for k in reference)
    for ckpt in (tmp_path / "banded" / "checkpoints").rglob("*.ckpt"):  # none of the first model
        saved = read_checkpoint(ckpt)
        assert not any(".layers.1." in k and "decoder" in k for k in saved["state_dict"]), ckpt
        band = saved["callbacks"]["ChooseBudgetBand"]  # spent: the first attempt's seconds,
        assert band["chosen"] == 0 and 0 < band["spent"] < 60  # taken off the time budget


def test_a_run_that_started_over_resumes_with_its_bands_model(overfit_data, tmp_path, caplog):
    """Resumed from its last checkpoint with a larger step budget, a run that started over
    builds the band's shape before loading the weights, and does not choose again."""
    from nmt.checkpoint import load_checkpoint
    from nmt.training.fit import train

    def banded(steps: int, *extra: str):
        cfg = compose_train_config(
            overfit_training(overfit_data, tmp_path, f"trainer.max_steps={steps}", *extra)
        )
        cfg.budget_bands = shallow_bands()
        return cfg

    train(banded(4), tmp_path / "run")
    with caplog.at_level(logging.INFO, logger="nmt.training.budget"):
        metrics = train(banded(8, "ckpt_path=last"), tmp_path / "run")
    assert metrics["global_step"] == 8
    assert load_checkpoint(tmp_path / "run" / "model.pt").model.cfg.decoder_layers == 1
    messages = [r.message for r in caplog.records if r.message.startswith("Budget band ")]
    assert len(messages) == 1 and "as chosen earlier in this run" in messages[0]


def test_a_timed_run_that_starts_over_keeps_to_its_budget(overfit_data, tmp_path, monkeypatch):
    """With trainer.max_time (6 s) and a one-second pace window, the run that starts over
    gets the budget less the seconds its first attempt spent, and saves that figure."""
    from nmt.checkpoint import read_checkpoint
    from nmt.training.fit import train

    monkeypatch.setattr(budget, "PACE_SECONDS", 1.0)
    cfg = compose_train_config(
        overfit_training(
            overfit_data, tmp_path, "trainer.max_steps=-1", "trainer.max_time=00:00:00:06"
        )
    )
    cfg.budget_bands = [BudgetBand(10**6, dict(SHALLOW)), BudgetBand(None, {})]
    train(cfg, tmp_path / "run")
    state = read_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")["callbacks"]
    chosen, spent = state["ChooseBudgetBand"]["chosen"], state["ChooseBudgetBand"]["spent"]
    assert chosen == 0 and 1.0 <= spent < 6.0
    assert cfg.trainer.max_time == budget.less_time("00:00:00:06", spent)
    assert cfg.model.decoder_layers == 1


def test_less_time_rounds_the_seconds_spent_up():
    assert budget.less_time("00:01:00:00", 61.2) == "00:00:58:58"
    assert budget.less_time("01:00:00:05", 10) == "00:23:59:55"
    assert budget.less_time("00:00:00:05", 10) == "00:00:00:00"
