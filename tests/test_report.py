"""nmt.report on hand-made run folders: evaluate reports with known outputs (ranking, paired
bootstrap marks) and training runs (differing overrides, training time, parameters)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import sacrebleu
import yaml

from nmt.evaluation.runs_table import duration, parse_overrides
from nmt.report import main as report_main

REFERENCES = [f"Ein Hund Nummer {i} läuft schnell über die grüne Wiese ." for i in range(60)]


def write_eval_run(
    folder: Path, overrides: list[str], hypotheses: list[str], data: dict | None = None
) -> None:
    """An evaluate report folder with the fields nmt.report reads (see nmt.reporting); `data`:
    evaluation.json's data entry, split name test_2016_flickr (none: as older files)."""
    folder.mkdir(parents=True)
    (folder / "hyp.test.txt").write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    (folder / "ref.test.txt").write_text("".join(r + "\n" for r in REFERENCES), encoding="utf-8")
    scores = {
        "bleu": sacrebleu.corpus_bleu(hypotheses, [REFERENCES]).score,
        "chrf": sacrebleu.corpus_chrf(hypotheses, [REFERENCES]).score,
        "decoding": {"sentences_per_second": 50.0, "tokens_per_second": 900.0},
        "hyp_file": "hyp.test.txt",
        "ref_file": "ref.test.txt",
        "split": "test_2016_flickr",
    }
    report = {
        "overrides": overrides,
        "checkpoint": {"parameters": 1000},
        "training": {"train_seconds": 125.0},
        "splits": {"test": scores},
    } | ({"data": data} if data else {})
    (folder / "evaluation.json").write_text(json.dumps(report))


def write_train_run(folder: Path, overrides: list[str], best_bleu: float, seconds: float) -> None:
    """A training run folder as nmt.train writes it: metrics.json and .hydra/overrides.yaml."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    metrics = {
        "experiment": "multi30k_cpu",
        "parameters": 2_000_000,
        "global_step": 600,
        "epoch": 3,
        "train_seconds": seconds,
        "best_checkpoint": str(folder / "checkpoints" / "best.ckpt"),
        "best_score": best_bleu,
        "monitor": "val/bleu",
        "final_metrics": {"val/bleu": best_bleu - 1, "val/chrf": 50.0, "val/loss": 2.0},
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))


def damage(lines: list[str], every: int) -> list[str]:
    """Every `every`-th line loses its last three words."""
    return [" ".join(s.split()[:-3]) if i % every == 0 else s for i, s in enumerate(lines)]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_evaluate_runs_are_ranked_and_tested_against_the_best(tmp_path, capsys):
    ckpt = "ckpt=outputs/a/model.pt"
    write_eval_run(tmp_path / "0", [ckpt, "decode.beam_size=1"], damage(REFERENCES, 1))
    write_eval_run(tmp_path / "1", [ckpt, "decode.beam_size=4"], REFERENCES)
    write_eval_run(tmp_path / "2", [ckpt, "decode.beam_size=8"], damage(REFERENCES, 30))
    write_eval_run(tmp_path / "3", [ckpt, "decode.beam_size=12"], REFERENCES)

    report_main([str(tmp_path), "--bootstrap", "300"])

    rows = read_csv(tmp_path / "report.csv")
    assert [r["run"] for r in rows] == ["1", "3", "2", "0"]  # by BLEU; a tie keeps folder order
    assert [r["decode.beam_size"] for r in rows] == ["4", "12", "8", "1"]
    assert "ckpt" not in rows[0]  # the same in every run
    assert [r["significant"] for r in rows] == ["best", "no", "no", "yes"]
    assert rows[1]["p (test vs best)"] == "1.0"  # identical output to the best
    assert float(rows[3]["p (test vs best)"]) < 0.05 < float(rows[2]["p (test vs best)"])
    assert rows[0]["parameters"] == "1000" and rows[0]["train seconds"] == "125.0"
    assert rows[0]["test sentences/s"] == "50.0"
    markdown = (tmp_path / "report.md").read_text()
    assert markdown == capsys.readouterr().out  # printed as written
    assert "| run | decode.beam_size | test BLEU |" in markdown and "bs:300" in markdown
    assert (tmp_path / "bleu_by_parameter.png").stat().st_size > 0


def test_training_runs_show_the_overrides_that_differ(tmp_path):
    sweep = tmp_path / "multirun" / "multi30k_cpu" / "2026-01-01_00-00-00"
    experiment = "experiment=multi30k_cpu"
    for job, (d_model, lr, bleu) in enumerate([(128, 1, 20.0), (256, 1, 24.5), (128, 2, 22.0)]):
        overrides = [experiment, f"model.d_model={d_model}", f"optim.lr_scale={lr}"]
        write_train_run(sweep / str(job), overrides, bleu, seconds=3600.0 + job)
    (sweep / "stray").mkdir()  # a metrics.json without .hydra/ is not a run
    (sweep / "stray" / "metrics.json").write_text("{}")

    report_main([str(tmp_path / "multirun")])

    rows = read_csv(tmp_path / "multirun" / "report.csv")
    assert list(rows[0])[:3] == ["run", "model.d_model", "optim.lr_scale"]
    assert "experiment" not in rows[0]
    assert [(r["model.d_model"], r["optim.lr_scale"]) for r in rows] == [
        ("256", "1"),
        ("128", "2"),
        ("128", "1"),
    ]
    assert [float(r["valid BLEU"]) for r in rows] == [24.5, 22.0, 20.0]  # the best, not the last
    assert rows[0]["valid chrF"] == "50.0" and rows[0]["parameters"] == "2000000"
    assert rows[0]["significant"] == ""  # no hypothesis files: nothing to test
    markdown = (tmp_path / "multirun" / "report.md").read_text()
    assert "1h00m" in markdown and "No significance test" in markdown
    assert "| significant |" not in markdown  # no run fills it: only the CSV keeps it
    assert (tmp_path / "multirun" / "bleu_by_parameter.png").stat().st_size > 0


def test_a_mixed_folder_shows_what_differs_within_each_kind_of_run(tmp_path):
    for job, d_model in enumerate([128, 256]):
        overrides = ["experiment=multi30k_cpu", f"model.d_model={d_model}", "optim.lr_scale=2"]
        write_train_run(tmp_path / "train" / str(job), overrides, 20.0 + job, seconds=60.0)
    for job, beam in enumerate([1, 4]):
        overrides = ["ckpt=train/1/model.pt", f"decode.beam_size={beam}"]
        write_eval_run(tmp_path / "eval" / str(job), overrides, damage(REFERENCES, 2 + job))

    report_main([str(tmp_path)])

    rows = read_csv(tmp_path / "report.csv")
    assert list(rows[0])[:3] == ["run", "model.d_model", "decode.beam_size"]
    # ranked on valid (the training runs' val/bleu), the runs without it after
    assert [r["run"] for r in rows][:2] == ["train/1", "train/0"]


def test_a_training_run_with_a_final_evaluation_is_one_row_with_its_scores(tmp_path, capsys):
    """nmt.train's final evaluation (RUN/evaluation/) scores the run's model.pt: the row
    pairs the run's overrides with those scores, and its hypotheses enter the paired test."""
    for job, (dropout, every) in enumerate([(0.1, 30), (0.3, 1)]):
        run = tmp_path / "sweep" / str(job)
        write_train_run(run, ["experiment=multi30k_cpu", f"model.dropout={dropout}"], 10.0, 60.0)
        write_eval_run(run / "evaluation", [], damage(REFERENCES, every))
    write_eval_run(tmp_path / "decoded", ["decode.beam_size=4"], REFERENCES)

    report_main([str(tmp_path)])

    rows = read_csv(tmp_path / "report.csv")
    assert [r["run"] for r in rows] == ["decoded", "sweep/0", "sweep/1"]
    assert [r["model.dropout"] for r in rows] == ["", "0.1", "0.3"]
    expected = sacrebleu.corpus_bleu(damage(REFERENCES, 30), [REFERENCES]).score
    assert float(rows[1]["test BLEU"]) == pytest.approx(expected)  # not the training's 10.0
    assert rows[1]["train seconds"] == "60.0" and rows[1]["parameters"] == "2000000"
    assert [r["significant"] for r in rows] == ["best", "no", "yes"]
    assert "3 runs (1 evaluate, 2 training)" in capsys.readouterr().out


def test_runs_scored_on_different_sets_are_not_ranked_in_one_column(tmp_path, capsys):
    """Two datasets' "test" splits are other sentences: one BLEU column would mislead."""
    for name, data in (("a", "multi30k"), ("b", "wmt14")):
        for beam in (1, 4):
            overrides = [f"decode.beam_size={beam}"]
            write_eval_run(tmp_path / name / str(beam), overrides, REFERENCES, {"name": data})
    with pytest.raises(SystemExit) as stop:
        report_main([str(tmp_path)])
    assert stop.value.code == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "scored test on different sets (multi30k/test_2016_flickr, wmt14/" in error
    report_main([str(tmp_path / "a")])  # one set: reported
    assert len(read_csv(tmp_path / "a" / "report.csv")) == 2


def test_report_explains_what_it_cannot_use(tmp_path, capsys):
    def refusal(folder: Path) -> str:
        with pytest.raises(SystemExit) as stop:
            report_main([str(folder)])
        assert stop.value.code == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("nmt.report: error: ")
        return line

    assert "no runs under" in refusal(tmp_path)
    write_eval_run(tmp_path / "run", ["decode.beam_size=4"], REFERENCES)
    assert "is one evaluation folder" in refusal(tmp_path / "run")


def test_small_helpers():
    assert parse_overrides(["a.b=1", "+c=x=y", "++d=[1,2]"]) == {
        "a.b": "1",
        "c": "x=y",
        "d": "[1,2]",
    }
    assert [duration(s) for s in (None, 5.25, 125, 7322)] == ["", "5.2s", "2m05s", "2h02m"]
