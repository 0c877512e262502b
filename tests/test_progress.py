"""Progress bars: translate, evaluate and export draw one on stderr (stdout holds results
only), and `progress=false` turns it off."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import compose


def drawn(capsys) -> tuple[str, str]:
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.parametrize("progress", ["true", "false"])
def test_translate_draws_its_bar_on_stderr_unless_told_not_to(
    model_pt: Path, overfit_pairs, tmp_path: Path, capsys, progress: str
):
    from nmt.translate import translate_stream

    cfg = compose("translate", [f"ckpt={model_pt}", f"progress={progress}"])
    sink = io.StringIO()
    source = io.BytesIO("".join(line + "\n" for line in overfit_pairs[0][:4]).encode())
    translate_stream(cfg, [], source, sink, show_progress=progress == "true")
    out, err = drawn(capsys)
    assert out == "" and len(sink.getvalue().splitlines()) == 4
    assert ("translating" in err and "4 lines" in err) == (progress == "true")


@pytest.mark.parametrize("progress", ["true", "false"])
def test_evaluate_draws_a_bar_per_split(
    model_pt: Path, overfit_data: Path, tmp_path: Path, capsys, progress: str
):
    from nmt.evaluation.evaluation_run import evaluate

    overrides = [
        f"ckpt={model_pt}",
        f"data.dir={overfit_data}",
        f"data.cache_dir={tmp_path / 'hf'}",
        "splits=[valid]",
        "decode=greedy",
        f"progress={progress}",
    ]
    evaluate(compose("evaluate", overrides), tmp_path / "run", overrides)
    out, err = drawn(capsys)
    assert out == ""
    bar = [line for line in err.replace("\r", "\n").splitlines() if "translating valid" in line]
    assert bool(bar) == (progress == "true")
    # sentences, counted as they end (a line may hold several: translate's own path)
    assert progress == "false" or "64 sentences" in bar[-1]


@pytest.mark.parametrize("progress", ["true", "false"])
def test_export_draws_its_bar_unless_told_not_to(
    model_pt: Path, tmp_path: Path, capsys, progress: str
):
    from nmt.export import run

    cfg = compose("export", [f"ckpt={model_pt}", f"out={tmp_path / 'm'}", f"progress={progress}"])
    assert run(cfg).is_dir()
    out, err = drawn(capsys)
    assert out == "" and ("exporting" in err and "2/2" in err) == (progress == "true")


def test_a_progress_setting_that_is_not_one_is_refused(model_pt: Path, tmp_path: Path):
    from nmt.errors import UsageError
    from nmt.export import run

    cfg = compose("export", [f"ckpt={model_pt}", f"out={tmp_path / 'm'}", "progress=yes"])
    with pytest.raises(UsageError, match="progress must be auto, true or false"):
        run(cfg)
    assert not (tmp_path / "m").exists()
