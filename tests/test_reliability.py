"""Bad input, bad files, untrusted checkpoints and faults: nothing misaligned, nothing run,
nothing lost, and every refusal one line on stderr with a non-zero exit."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import (
    ROOT,
    TINY_TRAINING,
    overfit_training,
    run_module,
    started_module,
    write_split_files,
)

from nmt.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from nmt.files import atomic_path, read_lines, write_bytes


def assert_one_line_error(result: subprocess.CompletedProcess, module: str, *words: str) -> str:
    """A non-zero exit and one error line on stderr, naming what went wrong, no traceback.

    translate and evaluate print nothing else; a training run that fails after it started
    keeps its progress logs (Lightning's start-up lines) before the error line."""
    err = result.stderr.decode(errors="replace").strip().splitlines()
    assert result.returncode != 0
    assert not any("Traceback" in line for line in err), "\n".join(err[-30:])
    errors = [line for line in err if line.startswith(f"{module}: error: ")]
    assert len(errors) == 1 and err[-1] == errors[0], "\n".join(err[-30:])
    if module != "nmt.train":
        assert len(err) == 1, "\n".join(err)
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


# --- bad input to translate and evaluate ---

ODD_LINES = [
    b"",
    b"   \t ",
    b"a man " * 2500,  # 5,000 words: cut to the model's positions, translated, one line
    b"caf\xe9 \xff\xfe not utf-8",
    "ctrl \x00\x01\x07\x1b[31m \x0b\x0c\x1c\u0085 chars".encode(),
    "emoji \U0001f600\U0001f468\u200d\U0001f469 \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0902".encode(),  # noqa: E501
    b"windows line\r",  # a CRLF line
]


def odd_input(sources: list[str]) -> tuple[bytes, dict[int, int]]:
    """Known sentences between odd lines, the last without a newline; returns the bytes and
    {line index: index of the known sentence there}."""
    lines, known = [], {}
    for i, odd in enumerate(ODD_LINES):
        known[len(lines)] = i
        lines += [sources[i].encode(), odd]
    known[len(lines)] = len(ODD_LINES)
    lines.append(sources[len(ODD_LINES)].encode())
    return b"\n".join(lines), known  # no final newline


def test_translate_gives_one_line_per_odd_input_line_in_order(model_pt, overfit_pairs, tmp_path):
    sources, references = overfit_pairs
    data, known = odd_input(sources)
    result = run_module("nmt.translate", [f"ckpt={model_pt}"], tmp_path, data)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    out = result.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == data.count(b"\n") + 1
    for line, sentence in known.items():
        assert out[line] == references[sentence], line
    assert out[1] == out[3] == ""  # empty and whitespace-only lines
    assert out[5] and out[9]  # the long line and the control characters were translated
    warnings = [w for w in result.stderr.decode().splitlines() if "WARNING" in w]
    assert any("line 6: 12500 tokens" in w or "line 6:" in w for w in warnings), warnings
    assert any("line 8 is not UTF-8" in w for w in warnings), warnings
    assert len(warnings) == 2 and "Traceback" not in result.stderr.decode()


def test_evaluate_keeps_odd_lines_aligned(model_pt, overfit_pairs, tmp_path):
    sources, references = overfit_pairs
    data, known = odd_input(sources)
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "test.en").write_bytes(data)
    refs = [b"ref"] * (data.count(b"\n") + 1)
    (folder / "test.de").write_bytes(b"\r\n".join(refs) + b"\r\n")  # CRLF references
    args = [
        f"ckpt={model_pt}",
        f"data.dir={folder}",
        "data.splits={test: test}",
        "splits=[test]",
        f"data.cache_dir={tmp_path / 'hf'}",
        "device=cpu",
        "decode=greedy",  # which reproduces the memorised pairs too: the lines' order is checked
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    result = run_module("nmt.evaluate", args, tmp_path)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    hyps = list(read_lines(tmp_path / "run" / "hyp.test.txt"))
    assert len(hyps) == len(refs)
    assert list(read_lines(tmp_path / "run" / "ref.test.txt")) == ["ref"] * len(refs)
    for line, sentence in known.items():
        assert hyps[line] == references[sentence], line


def peak_mib(cmd: list[str], cwd: Path) -> float:
    """Peak resident memory of a command, reported by a parent that does nothing else."""
    probe = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe, *cmd], capture_output=True, text=True, cwd=cwd, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1]) / 1024


def test_ten_times_the_lines_stream_through_in_bounded_memory(ct2_int8, multi30k_dir, tmp_path):
    """Real Multi30k sentences, 2,000 and 20,000 of them (the training set's), read,
    translated and written 1,000 lines at a time: ten times the input peaks within a quarter
    of the smaller run, and under the guide's 512 MiB. Outputs are held to 4 tokens: the
    input's size is what is measured, not the search's. The reading, preparing and writing
    are both engines' (nmt.translate's stream); CTranslate2 searches the 22,000 lines in
    two thirds of torch's time."""
    sentences = list(read_lines(multi30k_dir / "train.en"))
    peaks = {}
    for n in (2_000, 20_000):
        src, out = tmp_path / f"{n}.en", tmp_path / f"{n}.de"
        src.write_text("".join(sentences[i % len(sentences)] + "\n" for i in range(n)))
        cmd = [sys.executable, "-m", "nmt.translate", f"ckpt={ct2_int8}", "backend=ctranslate2"]
        cmd += [f"input={src}"]
        cmd += [f"output={out}", "progress=false", "chunk_lines=1000", "decode=greedy"]
        cmd += ["decode.max_len_a=0", "decode.max_len_b=4"]
        peaks[n] = peak_mib(cmd, tmp_path)
        lines = list(read_lines(out))
        assert len(lines) == n and all(lines[:100])
    assert peaks[20_000] < 1.25 * peaks[2_000], peaks  # chunks, never the whole file
    assert peaks[20_000] < 512, peaks


def test_translate_answers_before_its_input_ends(model_pt, overfit_pairs, tmp_path):
    """Streaming: the first chunk's translations arrive while stdin is still open."""
    sources, references = overfit_pairs
    (stdin, to_stdin), (from_stdout, stdout) = os.pipe(), os.pipe()
    theirs = [open(stdin, "rb", 0), open(stdout, "wb", 0), open(os.devnull, "wb")]
    args = [f"ckpt={model_pt}", "chunk_lines=2"]
    with started_module("nmt.translate", args, tmp_path, theirs) as command:
        for end in theirs:  # the command holds its own copies: ours would keep its pipes open
            end.close()
        with open(to_stdin, "wb", 0) as to, open(from_stdout, "rb") as out:
            to.write(f"{sources[0]}\n{sources[1]}\n".encode())
            first = [out.readline().decode().rstrip("\n") for _ in range(2)]
            assert first == references[:2]
            to.write(f"{sources[2]}\n".encode())
            to.close()
            assert out.read().decode() == references[2] + "\n"
        assert command.wait(timeout=60) == 0


# --- bad files and settings ---


def test_missing_not_a_and_truncated_checkpoints_are_one_line_errors(model_pt, tmp_path):
    text_file = tmp_path / "notes.pt"
    text_file.write_text("not a checkpoint\n")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(model_pt.read_bytes()[: model_pt.stat().st_size // 2])
    for path, words in [
        (tmp_path / "missing.pt", ["missing.pt", "not found"]),
        (text_file, ["notes.pt", "not a torch checkpoint"]),
        (truncated, ["truncated.pt", "not a readable torch checkpoint"]),
    ]:
        result = run_module("nmt.translate", [f"ckpt={path}"], tmp_path, b"a man\n")
        assert_one_line_error(result, "nmt.translate", *words)
        assert result.stdout == b""


def test_a_tokenizer_that_does_not_match_the_model_is_refused(model_pt, tiny_tokenizer, tmp_path):
    good = load_checkpoint(model_pt)
    assert tiny_tokenizer.vocab_size != good.model.cfg.vocab_size
    bad = tmp_path / "mismatch.pt"
    save_checkpoint(bad, Checkpoint(good.model, tiny_tokenizer, "en", "de", {}))
    with pytest.raises(CheckpointError, match="not trained together"):
        load_checkpoint(bad)
    result = run_module("nmt.translate", [f"ckpt={bad}"], tmp_path, b"a man\n")
    assert_one_line_error(result, "nmt.translate", "mismatch.pt", "pieces")


def test_impossible_settings_are_one_line_errors(model_pt, overfit_data, tmp_path):
    result = run_module("nmt.translate", [f"ckpt={model_pt}", "decode.beam_size=0"], tmp_path)
    assert_one_line_error(result, "nmt.translate", "beam_size")
    base = [f"data.dir={overfit_data}", f"hydra.run.dir={tmp_path / 'run'}"]
    base.append("experiment=multi30k_base")
    for override, words in [
        ("model.n_heads=7", ["d_model=512", "n_heads=7"]),
        ("data.max_tokens=100", ["data.max_tokens=100", "max_len=250"]),
        ("decode.beam_size=-1", ["beam_size"]),
    ]:
        result = run_module("nmt.train", [*base, override], tmp_path)
        assert_one_line_error(result, "nmt.train", *words)


def test_missing_and_unequal_data_files_are_one_line_errors(overfit_pairs, tmp_path):
    en, de = overfit_pairs
    unequal = write_split_files(
        tmp_path / "unequal",
        {"train": (en[:10], de[:9]), "val": (en[:5], de[:5]), "test_2016_flickr": (en, de)},
    )
    common = [f"data.cache_dir={tmp_path / 'hf'}", f"hydra.run.dir={tmp_path / 'r'}"]
    result = run_module("nmt.train", [f"data.dir={unequal}", *common], tmp_path)
    assert_one_line_error(result, "nmt.train", "train.en has 10 lines", "train.de has 9")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_module("nmt.train", [f"data.dir={empty}", *common], tmp_path)
    assert_one_line_error(result, "nmt.train", "data file not found", str(empty))


# --- untrusted checkpoints ---


class Planted:
    """Unpickling this creates a file: what a malicious checkpoint would do."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (self.path,))


def test_loading_never_runs_code_hidden_in_a_checkpoint(overfit_run, tmp_path):
    marker = tmp_path / "code_ran"
    evil = tmp_path / "evil.pt"
    payload = torch.load(overfit_run / "model.pt", weights_only=True)
    payload["info"] = {"note": Planted(marker)}
    torch.save(payload, evil)
    with pytest.raises(CheckpointError, match="refusing to load"):
        load_checkpoint(evil)
    result = run_module("nmt.translate", [f"ckpt={evil}"], tmp_path, b"a man\n")
    assert_one_line_error(result, "nmt.translate", "refusing to load", "evil.pt")
    # a training checkpoint handed to resume goes through the same guarded loader
    ckpt = next((overfit_run / "checkpoints").glob("step*.ckpt"))
    training = torch.load(ckpt, weights_only=True)
    training["nmt"]["info"] = {"note": Planted(marker)}
    evil_ckpt = tmp_path / "evil.ckpt"
    torch.save(training, evil_ckpt)
    args = [f"ckpt_path={evil_ckpt}", f"data.dir={tmp_path}", f"hydra.run.dir={tmp_path / 'r'}"]
    args += [o for o in TINY_TRAINING if o.startswith(("model.", "tokenizer.vocab"))]
    result = run_module("nmt.train", args, tmp_path)
    assert result.returncode != 0
    assert not marker.exists()


# --- faults during training ---


def test_atomic_writes_leave_the_old_file_or_the_new_one(tmp_path):
    target = tmp_path / "model.pt"
    write_bytes(target, b"old")
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        tmp.write_bytes(b"half of the ne")
        raise KeyboardInterrupt  # killed mid-write
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]  # no temporary left


def test_sigkill_during_writes_never_leaves_a_truncated_file(tmp_path):
    """A process rewriting a 16 MiB file in a loop is killed at an arbitrary moment: the file
    is whole, one of the versions written, every time."""
    target = tmp_path / "state.bin"
    writer = (
        "import sys; from nmt.files import write_bytes\n"
        "i = 0\n"
        "while True:\n"
        "    write_bytes(sys.argv[1], bytes([i % 256]) * (16 << 20)); i += 1\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for delay in (0.35, 0.8, 1.3):
        proc = subprocess.Popen([sys.executable, "-c", writer, str(target)], env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if target.exists():
            data = target.read_bytes()
            assert len(data) == 16 << 20 and data.count(data[:1]) == len(data)


def test_tokenizer_checkpoints_and_reports_are_written_through_atomic_files():
    """Every file nmt writes goes through nmt.files (translate's output is a stream)."""
    offenders = []
    for path in (ROOT / "nmt").rglob("*.py"):
        if path.name == "files.py":
            continue
        text = path.read_text()
        for needle in (".write_text(", ".write_bytes(", "torch.save(", ".savefig(", '"wb"'):
            for line in text.splitlines():
                if needle in line and "tmp" not in line:
                    offenders.append(f"{path.name}: {line.strip()}")
    assert offenders == []


def train_args(overfit_data: Path, tmp_path: Path, run: str, extra: list[str]) -> list[str]:
    return overfit_training(overfit_data, tmp_path, f"hydra.run.dir={tmp_path / run}", *extra)


def test_a_nonfinite_loss_stops_the_run_naming_the_step(overfit_data, tmp_path):
    extra = ["optim.lr_scale=1e30", "optim.warmup_steps=1", "trainer.max_steps=20"]
    result = run_module("nmt.train", train_args(overfit_data, tmp_path, "r", extra), tmp_path)
    line = assert_one_line_error(result, "nmt.train", "training loss is", "at step 1")
    assert "on_nonfinite_loss=skip" in line


def test_skipping_nonfinite_batches_keeps_the_weights_finite(overfit_data, tmp_path):
    extra = ["optim.lr_scale=1e30", "optim.warmup_steps=1", "trainer.max_steps=20"]
    extra += ["on_nonfinite_loss=skip", "trainer.max_epochs=5", "val_bleu=false"]
    extra += ["checkpoint.monitor=train/loss", "checkpoint.mode=min"]
    result = run_module("nmt.train", train_args(overfit_data, tmp_path, "r", extra), tmp_path)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    logs = result.stdout.decode() + result.stderr.decode()
    assert logs.count("batch skipped, weights unchanged") >= 3, logs[-3000:]
    # Lightning's lines once each (through Hydra's handler), and no advertisement
    lightnings_own = [line for line in logs.splitlines() if line.startswith("INFO: ")]
    assert lightnings_own == [] and "litlogger" not in logs, logs[:3000]
    weights = load_checkpoint(tmp_path / "r" / "model.pt").model.state_dict().values()
    assert all(torch.isfinite(w).all() for w in weights)


def test_a_sigkilled_run_resumes_with_the_same_losses(overfit_data, tmp_path):
    extra = [
        "model.dropout=0.1",
        "data.max_tokens=600",
        "trainer.max_steps=12",
        "trainer.log_every_n_steps=1",
        "trainer.check_val_every_n_epoch=1000",
        "checkpoint.every_n_train_steps=2",
        "val_bleu=false",
        "checkpoint.monitor=train/loss",
        "checkpoint.mode=min",
    ]
    whole = run_module("nmt.train", train_args(overfit_data, tmp_path, "whole", extra), tmp_path)
    assert whole.returncode == 0, whole.stderr.decode()[-2000:]

    killed = train_args(overfit_data, tmp_path, "killed", extra)
    with started_module("nmt.train", killed, tmp_path) as command:
        periodic = tmp_path / "killed" / "checkpoints" / "periodic"
        deadline = time.time() + 300
        while not (periodic / "step000004.ckpt").exists() and time.time() < deadline:
            time.sleep(0.05)
        os.kill(command.pid, signal.SIGKILL)
        assert command.wait(60) == -signal.SIGKILL
    assert not (tmp_path / "killed" / "model.pt").exists()  # it really died mid-run

    args = train_args(overfit_data, tmp_path, "killed", [*extra, "ckpt_path=last"])
    resumed = run_module("nmt.train", args, tmp_path)
    assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
    a = losses(tmp_path / "whole")
    b = losses(tmp_path / "killed")
    # the log goes on from the checkpoint (step 4); what the killed run flushed before it
    # stays (how much of it reached the file before the kill is the kill's timing)
    assert set(range(4, 12)) <= set(b) and max(b) == 11
    for step in sorted(b):
        assert b[step] == pytest.approx(a[step], rel=1e-5), step
    assert json.loads((tmp_path / "killed" / "metrics.json").read_text())["global_step"] == 12


def losses(run: Path) -> dict[int, float]:
    import csv

    with open(run / "logs" / "metrics.csv") as f:
        return {
            int(r["step"]): float(r["train/loss"]) for r in csv.DictReader(f) if r["train/loss"]
        }
