"""`init_from=model.pt`: fine-tuning starts from the model's weights, shape and tokenizer with
a fresh optimizer and schedule, and refuses a change of shape or tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import compose_train_config, overfit_training, run_module

from nmt.checkpoint import load_checkpoint
from nmt.decoding.settings import DecodeConfig
from nmt.inference.output_text import best_text
from nmt.inference.torch_engine import TorchEngine

# two updates small enough to keep what a model knows: what it knows is where it started
SHORT = ["trainer.max_steps=2", "final_evaluation.splits=[]", "optim.lr_scale=0.0001"]


def translations(model_pt: Path, lines: list[str]) -> list[str]:
    engine = TorchEngine.load([str(model_pt)], "cpu", "float32", 4096)
    return best_text(engine.tokenizer, engine.translate(lines, DecodeConfig()))


def test_a_fine_tune_starts_from_the_model_with_a_fresh_schedule_and_resumes_like_any_run(
    overfit_run, overfit_data, overfit_pairs, tmp_path
):
    """Two updates from the overfit model keep what it memorised (two updates from scratch
    translate nothing right); the step count starts at 0; the tokenizer is the model's own,
    whatever the run's tokenizer settings; the other shape settings are the model's too.
    Stopped there and resumed (`ckpt_path`) to 4, it continues the fine-tune's own step and
    weights, not the model it started from."""
    from nmt.training.fit import train

    source, reference = overfit_pairs[0][:16], overfit_pairs[1][:16]
    start = overfit_run / "model.pt"
    overrides = overfit_training(overfit_data, tmp_path, *SHORT)
    ignored = ["tokenizer.vocab_size=600", "model.d_model=32"]  # the checkpoint's win
    tuned = [*overrides, *ignored, f"init_from={start}"]
    run = tmp_path / "tuned"
    metrics = train(compose_train_config(tuned), run)
    assert metrics["global_step"] == 2
    scratch = compose_train_config(overrides)
    train(scratch, tmp_path / "scratch")

    before, after = load_checkpoint(start), load_checkpoint(run / "model.pt")
    assert after.tokenizer.identity == before.tokenizer.identity
    assert after.model.cfg.d_model == before.model.cfg.d_model
    assert after.info["init_from"] == str(start)
    assert translations(run / "model.pt", source) == reference
    assert translations(tmp_path / "scratch" / "model.pt", source) != reference

    resumed = [*tuned, "trainer.max_steps=4", f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}"]
    metrics = train(compose_train_config(resumed), run)
    assert metrics["global_step"] == 4
    resumed_model = load_checkpoint(run / "model.pt")
    assert resumed_model.info["init_from"] == str(start)
    assert not all(  # the resume trained on: model.pt moved from the 2 updates' one
        torch.equal(v, after.model.state_dict()[k])
        for k, v in resumed_model.model.state_dict().items()
    )


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["model.d_model=32", "budget_bands=[]"], "model.d_model"),
        (["tokenizer.vocab_size=300", "budget_bands=[]"], "tokenizer.vocab_size"),
        (["model=base", "budget_bands=[]"], "model"),
        ([], "model.encoder_layers (set by a budget band"),  # the recipe's slow-machine band
    ],
)
def test_a_shape_or_tokenizer_change_is_refused(
    overfit_run, overfit_data, tmp_path, overrides, named
):
    """Refused in one line before any work; what only training reads may change."""
    args = [
        "experiment=multi30k_cpu",
        f"data.dir={overfit_data}",
        f"hydra.run.dir={tmp_path / 'run'}",
        "model.dropout=0.2",
        f"init_from={overfit_run / 'model.pt'}",
        *overrides,
    ]
    done = run_module("nmt.train", args, tmp_path)
    stderr = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2, done.stderr.decode()
    assert f"nmt.train: error: {named}" in stderr[-1] and "init_from" in stderr[-1], stderr[-1]
    assert not (tmp_path / "run" / "model.pt").exists()


def test_the_finetune_experiment_runs_as_its_comment_says(
    overfit_run, overfit_pairs, multi30k_dir, tmp_path
):
    """experiment=finetune with init_from, a TSV of domain pairs and a general file to replay
    (no dev split: one is carved off): it trains from the model at optim.peak_lr, mixes a
    quarter of general pairs in, and writes model.pt. Without init_from: one line, exit 2."""
    en, de = (_lines(multi30k_dir / f"train.{lang}", 300) for lang in ("en", "de"))
    general = zip(en, de, strict=True)
    general = [f"{x}\t{y}\n" for x, y in general]
    (tmp_path / "general.tsv").write_text("".join(general))
    (tmp_path / "forgetting.tsv").write_text("".join(general[:20]))  # scored: a few will do
    domain = zip(*overfit_pairs, strict=True)
    (tmp_path / "domain.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in domain))
    args = [
        "experiment=finetune",
        f"data.data_files.train={tmp_path / 'domain.tsv'}",
        f"data.data_files.test={tmp_path / 'domain.tsv'}",
        f"data.replay.file={tmp_path / 'general.tsv'}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "trainer.max_steps=3",
        "optim.warmup_steps=1",  # a cosine decays after its warmup, within the 3 updates
        "final_evaluation.splits=[]",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    done = run_module("nmt.train", [*args, f"init_from={overfit_run / 'model.pt'}"], tmp_path)
    log = done.stderr.decode()
    assert done.returncode == 0, log[-2000:]
    carved = len(overfit_pairs[0]) // 10
    domain_pairs = len(overfit_pairs[0]) - carved
    replayed = round(domain_pairs / 3)  # a quarter of the whole
    assert f"Replay: {replayed} of 300 general pairs" in log, log[-2000:]
    tuned = load_checkpoint(tmp_path / "run" / "model.pt")
    assert tuned.info["init_from"] == str(overfit_run / "model.pt")
    assert tuned.model.cfg.d_model == load_checkpoint(overfit_run / "model.pt").model.cfg.d_model

    # the guide's check for forgetting: evaluate on any TSV, the same command for each set
    scored = [
        f"ckpt={tmp_path / 'run' / 'model.pt'}",
        "data=files",
        f"data.data_files.test={tmp_path / 'forgetting.tsv'}",
        "splits=[test]",
        f"hydra.run.dir={tmp_path / 'eval'}",
    ]
    done = run_module("nmt.evaluate", scored, tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "test BLEU" in done.stderr.decode(), done.stderr.decode()[-2000:]

    done = run_module("nmt.train", args, tmp_path)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and "init_from" in lines[-1], lines[-3:]


def _lines(path: Path, n: int) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:n]
