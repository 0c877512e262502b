"""nmt.evaluate on a tiny overfit checkpoint and real Multi30k lines: the report folder, its
scores against sacreBLEU's own, the CLI, and a decoding sweep turned into a table by nmt.report.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import islice
from pathlib import Path

import pytest
import sacrebleu
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from nmt.checkpoint import (
    CheckpointError,
    Translator,
    load_ensemble,
    load_translator,
    save_inference_checkpoint,
)
from nmt.config import TokenizerConfig
from nmt.evaluate import EvaluateConfig  # also registers the schemas
from nmt.model import ModelConfig, Transformer
from nmt.report import main as report_main
from nmt.reporting import evaluate
from nmt.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer, train_or_load

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
PAIRS, STEPS = 32, 80  # overfit to a corpus BLEU of roughly 60-90 in a few seconds


def pad(rows: list[list[int]]) -> torch.Tensor:
    """(len(rows), longest) right-padded ids."""
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread: these tensors are too small to gain from more, and spinning
    threads slow down many-fold when the cores are shared (another test run, a build)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def overfit(model: Transformer, tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> None:
    """Teacher forcing on one full batch: src + EOS; BOS + y in; y + EOS out."""
    src = pad([ids + [EOS_ID] for ids in tokenizer.encode([s for s, _ in pairs])])
    ys = tokenizer.encode([t for _, t in pairs])
    tgt_in, tgt_out = pad([[BOS_ID] + y for y in ys]), pad([y + [EOS_ID] for y in ys])
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    with one_thread():
        for _ in range(STEPS):
            logits = model(src, tgt_in)  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()


def write_split(folder: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    for lang, column in (("en", 0), ("de", 1)):
        text = "".join(pair[column] + "\n" for pair in pairs)
        (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")


@pytest.fixture(scope="session")
def tiny_checkpoint(
    tiny_tokenizer: Tokenizer, multi30k_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """(model.pt of a tiny en->de model overfit on 32 short Multi30k pairs, a data folder whose
    `test` split is those pairs and `valid` split their first half)."""
    with (
        open(multi30k_dir / "train.en", encoding="utf-8", newline="\n") as en,
        open(multi30k_dir / "train.de", encoding="utf-8", newline="\n") as de,
    ):
        lines = ((s.rstrip("\n"), t.rstrip("\n")) for s, t in zip(en, de, strict=True))
        pairs = list(islice((p for p in lines if len(p[0].split()) <= 10), PAIRS))
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=tiny_tokenizer.vocab_size, d_model=32, n_heads=4, d_ff=64,
        encoder_layers=2, decoder_layers=2, dropout=0.0,
    )  # fmt: skip
    model = Transformer(cfg)
    overfit(model, tiny_tokenizer, pairs)
    folder = tmp_path_factory.mktemp("tiny_checkpoint")
    ckpt = folder / "model.pt"
    info = {"experiment": "tiny_overfit", "global_step": STEPS}
    save_inference_checkpoint(ckpt, Translator(model, tiny_tokenizer, "en", "de", info))
    data_dir = folder / "data"
    data_dir.mkdir()
    write_split(data_dir, "test", pairs)
    write_split(data_dir, "valid", pairs[: PAIRS // 2])
    return ckpt, data_dir


def data_overrides(ckpt: Path, data_dir: Path, tmp_path: Path) -> list[str]:
    """Point evaluate at the tiny checkpoint and its data folder, on the CPU."""
    return [
        f"ckpt={ckpt}",
        f"data.dir={data_dir}",
        "data.splits={valid: valid, test: test}",
        f"data.cache_dir={tmp_path / 'hf'}",
        "device=cpu",
    ]


def compose_evaluate(overrides: list[str]) -> EvaluateConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return OmegaConf.to_object(compose("evaluate", overrides=overrides))


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").removesuffix("\n").split("\n")


def test_evaluate_writes_the_report_folder(tiny_checkpoint, tmp_path):
    ckpt, data_dir = tiny_checkpoint
    overrides = [
        *data_overrides(ckpt, data_dir, tmp_path),
        "decode=greedy",
        "splits=[valid,test]",
        "attention=[3]",
    ]
    run = tmp_path / "run"
    with one_thread():
        report = evaluate(compose_evaluate(overrides), run, overrides)

    for name in ["hyp.valid.txt", "hyp.test.txt", "ref.valid.txt", "ref.test.txt", "report.md"]:
        assert (run / name).is_file(), name
    for name in ["bleu_by_length.png", "attention.valid.3.png"]:
        assert (run / name).stat().st_size > 0, name
    assert report == json.loads((run / "report.json").read_text())

    hyps, refs = read(run / "hyp.test.txt"), read(data_dir / "test.de")
    assert len(hyps) == len(refs) == PAIRS and read(run / "ref.test.txt") == refs
    test = report["splits"]["test"]
    assert test["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
    assert test["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)
    assert test["bleu"] > 20  # the checkpoint learnt its training pairs
    assert test["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    assert "case:lc" in test["bleu_lowercase_signature"]
    assert test["chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0")
    assert 0 < test["brevity_penalty"] <= 1 and test["length_ratio"] > 0
    speed = test["decoding"]
    assert speed["sentences_per_second"] > 0 and speed["tokens_per_second"] > 0
    assert [b["label"] for b in test["by_length"]] == ["1-10", "11-20", "21-30", "31+"]
    assert sum(b["sentences"] for b in test["by_length"]) == PAIRS
    assert report["overrides"] == overrides
    assert report["checkpoint"]["parameters"] > 0
    assert report["checkpoint"]["info"]["experiment"] == "tiny_overfit"
    assert report["decode"]["strategy"] == "greedy"

    markdown = (run / "report.md").read_text()
    for text in ["## valid", "## test", "BLEU by source length", "5 best sentences",
                 "5 worst sentences", test["bleu_signature"], "attention.valid.3.png"]:  # fmt: skip
        assert text in markdown, text


def test_evaluate_refuses_a_direction_the_checkpoint_does_not_translate(tiny_checkpoint, tmp_path):
    overrides = [*data_overrides(*tiny_checkpoint, tmp_path), "data.src_lang=de"]
    overrides.append("data.tgt_lang=en")
    with pytest.raises(ValueError, match="data is de->en but .* translates en->de"):
        evaluate(compose_evaluate(overrides), tmp_path / "run", overrides)


def test_evaluate_refuses_unknown_roles_and_lines(tiny_checkpoint, tmp_path):
    base = data_overrides(*tiny_checkpoint, tmp_path)
    with pytest.raises(ValueError, match=r"splits=\['dev'\] not in data.splits"):
        evaluate(compose_evaluate([*base, "splits=[dev]"]), tmp_path / "a", [])
    with pytest.raises(ValueError, match=r"attention=\[999\]"):
        evaluate(compose_evaluate([*base, "attention=[999]"]), tmp_path / "b", [])


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`python args...` in `cwd`, on one thread (see one_thread)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_cli_prints_scores_and_writes_a_dated_report_folder(tiny_checkpoint, tmp_path):
    overrides = [*data_overrides(*tiny_checkpoint, tmp_path), "decode=greedy"]
    done = run_cli(["-m", "nmt.evaluate", *overrides], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("test: BLEU ")  # stdout: the summary only
    assert "tok:13a" in done.stderr and "nrefs:1|case:lc" in done.stderr  # signatures logged
    (run,) = (tmp_path / "reports").iterdir()
    assert (run / "report.json").is_file() and (run / ".hydra" / "overrides.yaml").is_file()
    assert f"report: {run}" in done.stdout


def test_decode_sweep_gives_one_report_per_job_and_report_ranks_them(tiny_checkpoint, tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", "nmt.evaluate", "-m", *data_overrides(*tiny_checkpoint, tmp_path)]
    # Output lengths capped at 4, 8 and 50 pieces: three different scores, whatever the model.
    lengths = ["decode.max_len_a=0", "decode.max_len_b=4,8,50"]
    done = run_cli([*args, *lengths, f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    jobs = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert jobs == ["0", "1", "2"]
    reports = [json.loads((sweep / job / "report.json").read_text()) for job in jobs]
    assert {r["decode"]["max_len_b"] for r in reports} == {4, 8, 50}

    report_main([str(sweep), "--bootstrap", "200"])
    with open(sweep / "report.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    bleu = [float(r["test BLEU"]) for r in rows]
    assert bleu == sorted(bleu, reverse=True)
    assert [r["decode.max_len_b"] for r in rows] == ["50", "8", "4"]  # longer scores higher
    assert rows[0]["significant"] == "best" and rows[0]["p (test vs best)"] == ""
    assert all(r["significant"] in ("yes", "no") for r in rows[1:])
    assert all(0 < float(r["p (test vs best)"]) <= 1 for r in rows[1:])
    assert "ckpt" not in rows[0]  # the same in every run: not a column
    markdown = (sweep / "report.md").read_text()
    assert "| decode.max_len_b |" in markdown and "bs:200" in markdown
    assert (sweep / "bleu_by_parameter.png").stat().st_size > 0


def test_an_ensemble_of_copies_scores_like_its_model(tiny_checkpoint, tmp_path):
    ckpt, data_dir = tiny_checkpoint
    base = [*data_overrides(ckpt, data_dir, tmp_path), "decode=beam", "splits=[test]"]
    both = [*base, f"ensemble=[{ckpt}]"]
    with one_thread():
        alone = evaluate(compose_evaluate(base), tmp_path / "alone", base)
        ensemble = evaluate(compose_evaluate(both), tmp_path / "ensemble", both)
    assert read(tmp_path / "ensemble" / "hyp.test.txt") == read(tmp_path / "alone" / "hyp.test.txt")
    assert ensemble["splits"]["test"]["bleu"] == alone["splits"]["test"]["bleu"] > 20
    assert ensemble["checkpoint"]["parameters"] == 2 * alone["checkpoint"]["parameters"]
    assert ensemble["checkpoint"]["info"]["ensemble"] == [str(ckpt.resolve())] * 2
    assert (
        f"- ensembled with: {ckpt.resolve()}" in (tmp_path / "ensemble" / "report.md").read_text()
    )


def test_ensemble_members_must_share_tokenizer_and_direction(
    tiny_checkpoint, multi30k_dir, tmp_path
):
    ckpt, _ = tiny_checkpoint
    translator = load_translator(ckpt)
    save_inference_checkpoint(
        tmp_path / "de_en.pt", replace(translator, src_lang="de", tgt_lang="en")
    )
    with pytest.raises(CheckpointError, match="de_en.pt translates de->en but .* en->de"):
        load_ensemble([str(ckpt), str(tmp_path / "de_en.pt")])
    texts = []
    for lang in ("en", "de"):  # other lines than tiny_tokenizer's: other pieces, as many
        with open(multi30k_dir / f"train.{lang}", encoding="utf-8") as lines:
            texts += [line.rstrip("\n") for line in islice(lines, 3000, 6000)]
    other = train_or_load(
        TokenizerConfig(
            name="other", dir=str(tmp_path), vocab_size=translator.tokenizer.vocab_size
        ),
        texts,
        "multi30k train[3000:6000] en+de",
    )
    save_inference_checkpoint(tmp_path / "other.pt", replace(translator, tokenizer=other))
    with pytest.raises(CheckpointError, match="other.pt has another tokenizer"):
        load_ensemble([str(ckpt), str(tmp_path / "other.pt")])
