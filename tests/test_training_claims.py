"""Training options the guide promises, each on a tiny real run (docs/guide.md, "Train"):
early stopping, TensorBoard logs, and that `trainer.precision=16-mixed` is refused on a CPU."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from conftest import overfit_training, run_module

# The overfit pairs, one batch an epoch, validated every epoch on the val loss alone (no
# decoding): a validation per step, so patience is counted in steps.
VALIDATED_EVERY_STEP = [
    "trainer.check_val_every_n_epoch=1",
    "val_bleu=false",
    "checkpoint.monitor=val/loss",
    "checkpoint.mode=min",
]
PATIENCE = 2


def train_tiny(data_dir: Path, work_dir: Path, run_dir: Path, *extra: str) -> dict:
    """nmt.training.fit.train on the real config shrunk (conftest's TINY_TRAINING), in process,
    on one thread."""
    from conftest import compose_train_config, one_thread, overfit_training

    from nmt.training.fit import train

    with one_thread():
        return train(compose_train_config(overfit_training(data_dir, work_dir, *extra)), run_dir)


def logged(run_dir: Path, name: str) -> dict[int, float]:
    """step -> value of one metric in the run's logs/metrics.csv."""
    with open(run_dir / "logs" / "metrics.csv", newline="") as f:
        return {int(row["step"]): float(row[name]) for row in csv.DictReader(f) if row.get(name)}


@pytest.fixture(scope="module")
def learning_run(overfit_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 steps that keep improving val/loss, with early stopping on: the callback must let
    the run reach max_steps."""
    work = tmp_path_factory.mktemp("learning_run")
    extra = [
        *VALIDATED_EVERY_STEP,
        "trainer.max_steps=6",
        f"checkpoint.early_stopping_patience={PATIENCE}",
    ]
    train_tiny(overfit_data, work, work / "run", *extra)
    return work / "run"


# --- early stopping: checkpoint.early_stopping_patience ---


def test_a_run_that_keeps_improving_is_not_stopped_early(learning_run):
    losses = logged(learning_run, "val/loss")
    assert len(losses) == 6
    values = [losses[step] for step in sorted(losses)]
    assert all(b < a for a, b in zip(values, values[1:], strict=False)), values
    assert json.loads((learning_run / "metrics.json").read_text())["global_step"] == 6


def test_early_stopping_ends_a_run_once_the_metric_stops_improving(overfit_data, tmp_path):
    """A learning rate of 0 freezes the weights, so val/loss never improves on the first
    validation: the run stops after 1 + patience validations, far before max_steps."""
    extra = [
        *VALIDATED_EVERY_STEP,
        "optim.lr_scale=0",
        "trainer.max_steps=20",
        f"checkpoint.early_stopping_patience={PATIENCE}",
    ]
    metrics = train_tiny(overfit_data, tmp_path, tmp_path / "run", *extra)
    assert metrics["global_step"] == 1 + PATIENCE
    losses = logged(tmp_path / "run", "val/loss")
    assert len(losses) == 1 + PATIENCE and len(set(losses.values())) == 1, losses
    assert (tmp_path / "run" / "model.pt").is_file()  # the run still ends as a run does


# --- TensorBoard: logs/events.out.tfevents.* ---


def test_tensorboard_events_hold_the_training_loss_of_every_logged_step(learning_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = (learning_run / "logs").glob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    scalars = accumulator.Tags()["scalars"]
    assert {"train/loss", "train/ppl", "lr-Adam", "val/loss"} <= set(scalars), scalars
    board = {event.step: event.value for event in accumulator.Scalars("train/loss")}
    table = logged(learning_run, "train/loss")  # log_every_n_steps=1: every step, 0 to 5
    assert sorted(board) == sorted(table) == list(range(6))
    for step, value in table.items():
        assert board[step] == pytest.approx(value, rel=1e-6) and math.isfinite(value)


# --- trainer.precision=16-mixed on a CPU ---


def test_fp16_training_on_the_cpu_is_refused_in_one_line(overfit_data: Path, tmp_path: Path):
    """There is no fp16 autocast on the CPU (Lightning would quietly train in bf16, emulated
    and many times slower where the CPU lacks it): the run stops before any work, exit 2."""
    args = overfit_training(overfit_data, tmp_path, "trainer.precision=16-mixed")
    done = run_module("nmt.train", [*args, "trainer.accelerator=cpu"], tmp_path)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2, lines[-5:]
    assert lines[-1].startswith("nmt.train: error: trainer.precision=16-mixed needs a GPU")
    assert not (tmp_path / "outputs").exists() or not any((tmp_path / "outputs").rglob("*.ckpt"))
