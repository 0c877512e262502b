"""Every command's `--help`: what it does, what it requires, an example that composes, and where
every setting lives (the dataclass in nmt/config.py and `--cfg job`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import compose, run_module

ROOT = Path(__file__).resolve().parents[1]
# command -> (its config under nmt/conf, or None where it reads no Hydra config; its dataclass)
COMMANDS = {
    "train": ("train", "TrainConfig"),
    "translate": ("translate", "TranslateConfig"),
    "evaluate": ("evaluate", "EvaluateConfig"),
    "export": ("export", "ExportConfig"),
    "import": ("import", "ImportConfig"),
    "serve": ("serve", "ServeConfig"),
    "score": ("score", "ScoreConfig"),
    "calibrate": ("calibrate", "CalibrateConfig"),
    "aer": ("aer", "AerConfig"),
    "average": ("average", "AverageConfig"),
    "build_tokenizer": (None, "TokenizerConfig"),
    "report": (None, None),
}


def examples(text: str, command: str) -> list[list[str]]:
    """The settings (key=value words) of each example line of `python -m nmt.<command>`."""
    lines = [
        line
        for line in text.splitlines()
        if f"python -m nmt.{command} " in line and "[your settings]" not in line
    ]
    words = [line.split(f"python -m nmt.{command} ", 1)[1].split() for line in lines]
    return [[w for w in ws if re.fullmatch(r"[a-z_.]+=\S+", w)] for ws in words]


def test_every_command_module_is_listed():
    """A new command gets a help test too."""
    modules = {p.stem for p in (ROOT / "nmt").glob("*.py")}
    commands = {m for m in modules if "__main__" in (ROOT / "nmt" / f"{m}.py").read_text()}
    assert commands == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_says_what_the_command_does_needs_and_where_every_setting_is(command, tmp_path):
    config, schema = COMMANDS[command]
    done = run_module(f"nmt.{command}", ["--help"], tmp_path)
    text = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "Powered by Hydra" not in text and "is powered by Hydra" not in text
    assert f"python -m nmt.{command}" in text
    assert re.search(r"[Ee]xample", text)
    assert len(text.splitlines()) < 60  # a screen, not the whole config
    if schema:
        assert schema in text
    if config is None:
        return
    assert "Required:" in text or "Nothing is required" in text
    assert f"python -m nmt.{command} [your settings] --cfg job" in text
    assert list((tmp_path).iterdir()) == []  # help runs nothing and writes nothing
    # each example names real settings: it composes (a sweep's values: its first)
    for settings in examples(text, command):
        first = [re.sub(r"=([^,\[]*),.*", r"=\1", s) for s in settings]
        first = [re.sub(r"<[a-z_]+>", "x", s) for s in first]  # outputs/<run>/model.pt
        if command == "train" and not any(s.startswith("experiment=") for s in first):
            first.insert(0, "experiment=multi30k_cpu")
        compose(config, first)
