"""Training sweeps through the real command lines (docs/guide.md, "Sweep training settings" and
"Parallel and cluster sweeps"): `python -m nmt.train -m` runs one tiny job per value into a
multirun folder, on Hydra's own launcher and on submitit's local mode (the SLURM launcher's
local twin), and `python -m nmt.report` turns either folder into one table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from conftest import overfit_training, run_module

D_MODELS = ["32", "64"]


def sweep_args(
    data_dir: Path, work_dir: Path, sweep_dir: Path, d_models: list[str], *extra: str
) -> list[str]:
    """`nmt.train -m` over `d_models`: one job of 2 steps each, validated (val/bleu) at the
    last."""
    tiny = [o for o in overfit_training(data_dir, work_dir) if not o.startswith("model.d_model=")]
    return [
        "-m",
        *tiny,
        "trainer.max_steps=2",
        "trainer.check_val_every_n_epoch=2",
        "data.max_eval_pairs=8",  # an untrained model's search runs to its length limit
        f"model.d_model={','.join(d_models)}",
        f"hydra.sweep.dir={sweep_dir}",
        *extra,
    ]


# The recipe's final evaluation on valid alone, with greedy search for model.pt: quick enough.
GREEDY_FINAL_EVALUATION = [
    "final_evaluation.splits=[valid]",
    "search.strategy=greedy",
    "search.beam_size=1",
    "search.len_penalty=null",
]


def job_metrics(sweep_dir: Path, d_models: list[str]) -> dict[str, dict]:
    """Each job folder's metrics.json, checked to be a whole training run with its own value."""
    metrics = {}
    for job, d_model in enumerate(d_models):
        folder = sweep_dir / str(job)
        overrides = yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text())
        assert f"model.d_model={d_model}" in overrides
        assert (folder / "model.pt").is_file() and (folder / "logs" / "metrics.csv").is_file()
        metrics[str(job)] = json.loads((folder / "metrics.json").read_text())
        assert metrics[str(job)]["global_step"] == 2
    return metrics


def check_report(
    sweep_dir: Path, work_dir: Path, d_models: list[str], final_evaluations: bool
) -> None:
    """`python -m nmt.report sweep_dir`: the table it prints and writes, row by row against
    the jobs' own metrics (and their final evaluations' scores, if they ran one)."""
    metrics = job_metrics(sweep_dir, d_models)
    result = run_module("nmt.report", [str(sweep_dir)], cwd=work_dir)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    markdown = (sweep_dir / "report.md").read_text(encoding="utf-8")
    assert result.stdout.decode() == markdown
    with open(sweep_dir / "report.csv", newline="", encoding="utf-8") as f:
        rows = {row["run"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == sorted(metrics)  # a final evaluation is its run's row, not its own
    assert f"{len(rows)} runs (0 evaluate, {len(metrics)} training)" in markdown
    swept = len(d_models) > 1  # a setting is a column where it varies
    header = "| run | model.d_model | valid BLEU |" if swept else "| run | valid BLEU |"
    assert header in markdown
    for job, d_model in zip(metrics, d_models, strict=True):
        row = rows[job]
        assert row.get("model.d_model") == (d_model if swept else None)
        scores = metrics[job]["final_evaluation"]["valid"] if final_evaluations else None
        expected = scores["bleu"] if scores else metrics[job]["best_score"]
        assert float(row["valid BLEU"]) == expected
        assert int(row["parameters"]) == metrics[job]["parameters"]
        assert float(row["train seconds"]) == metrics[job]["train_seconds"]
    parameters = [int(rows[job]["parameters"]) for job in metrics]
    assert parameters == sorted(set(parameters))  # d_model 32 < 64: more parameters
    marks = sorted(row["significant"] for row in rows.values())
    if final_evaluations:  # their hypotheses: tested against the best
        assert marks[0] == "best" and marks[1] in ("no", "yes"), marks
    else:
        assert marks == [""] * len(rows)
    bleu = [float(row["valid BLEU"]) for row in rows.values()]  # CSV rows in ranked order
    assert bleu == sorted(bleu, reverse=True)
    assert (sweep_dir / "bleu_by_parameter.png").is_file() == swept


@pytest.fixture(scope="module")
def shared_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tokenizer and datasets cache both sweeps read, as a real sweep's jobs share theirs:
    built by the first job that needs them."""
    return tmp_path_factory.mktemp("sweep_work")


def test_a_training_sweep_gives_one_run_per_value_and_report_tabulates_them(
    overfit_data, shared_work, tmp_path
):
    sweep = tmp_path / "multirun"
    args = sweep_args(overfit_data, shared_work, sweep, D_MODELS, *GREEDY_FINAL_EVALUATION)
    result = run_module("nmt.train", args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    check_report(sweep, tmp_path, D_MODELS, final_evaluations=True)


def test_a_training_sweep_through_submitit_local_reports_the_same_way(
    overfit_data, shared_work, tmp_path
):
    """hydra-submitit-launcher's submitit_local: each job pickled and run in a process of its
    own, as on SLURM with submitit_slurm, into the same folders (a fork of the run's zygote
    here, through its stand-in for the interpreter: tests/zygote.py)."""
    sweep = tmp_path / "multirun"
    d_models = D_MODELS
    extra = ["final_evaluation.splits=[]", "hydra/launcher=submitit_local"]
    args = sweep_args(overfit_data, shared_work, sweep, d_models, *extra)
    result = run_module("nmt.train", args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    launcher = yaml.safe_load((sweep / "multirun.yaml").read_text())["hydra"]["launcher"]
    assert launcher["_target_"].endswith("submitit_launcher.LocalLauncher")
    job_logs = sorted((sweep / ".submitit").glob("*/*_log.err"))
    assert len(job_logs) == len(d_models)
    assert all("`Trainer.fit` stopped" in log.read_text() for log in job_logs)  # trained there
    check_report(sweep, tmp_path, d_models, final_evaluations=False)
