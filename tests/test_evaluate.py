"""nmt.evaluate on the session's overfit checkpoint and its real Multi30k lines: the report
folder, its scores against sacreBLEU's own, the CLI, and a decoding sweep turned into a table
by nmt.report.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from itertools import islice
from pathlib import Path

import pytest
import sacrebleu
from conftest import OVERFIT_PAIRS, compose, one_thread, run_module, write_split_files

from nmt.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from nmt.config import EvaluateConfig, TokenizerConfig
from nmt.evaluation.evaluation_run import evaluate
from nmt.inference.torch_engine import TorchEngine
from nmt.report import main as report_main
from nmt.tokenizer_training import train_or_load


@pytest.fixture(scope="module")
def tiny_checkpoint(model_pt: Path, overfit_data: Path) -> tuple[Path, Path]:
    """(the overfit model.pt, its data folder: valid and test are the memorised pairs)."""
    return model_pt, overfit_data


def data_overrides(ckpt: Path, data_dir: Path, tmp_path: Path) -> list[str]:
    """Point evaluate at the tiny checkpoint and its data folder, on the CPU."""
    return [
        f"ckpt={ckpt}",
        f"data.dir={data_dir}",
        f"data.cache_dir={tmp_path / 'hf'}",
        "device=cpu",
    ]


def compose_evaluate(overrides: list[str]) -> EvaluateConfig:
    return compose("evaluate", overrides)


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").removesuffix("\n").split("\n")


def run_cli(args: list[str], cwd: Path):
    """`python -m module ...` with text output."""
    done = run_module(args[1], args[2:], cwd)
    done.stdout, done.stderr = done.stdout.decode(), done.stderr.decode()
    return done


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

    for name in ["hyp.valid.txt", "hyp.test.txt", "ref.valid.txt", "ref.test.txt", "evaluation.md"]:
        assert (run / name).is_file(), name
    for name in ["bleu_by_length.png", "attention.valid.3.png"]:
        assert (run / name).stat().st_size > 0, name
    assert report == json.loads((run / "evaluation.json").read_text())

    hyps, refs = read(run / "hyp.test.txt"), read(data_dir / "test_2016_flickr.de")
    assert len(hyps) == len(refs) == OVERFIT_PAIRS and read(run / "ref.test.txt") == refs
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
    assert sum(b["sentences"] for b in test["by_length"]) == OVERFIT_PAIRS
    assert report["overrides"] == overrides
    assert report["checkpoint"]["parameters"] > 0
    assert report["checkpoint"]["info"]["experiment"] == "multi30k_cpu"
    assert report["decode"]["strategy"] == "greedy"

    markdown = (run / "evaluation.md").read_text()
    for text in ["## valid", "## test", "BLEU by source length", "5 best sentences",
                 "5 worst sentences", test["bleu_signature"], "attention.valid.3.png"]:  # fmt: skip
        assert text in markdown, text


def test_evaluate_scores_what_translate_prints_on_lines_of_several_sentences(
    tiny_checkpoint, overfit_pairs, tmp_path
):
    """Lines of two memorised sentences each: evaluate's hypotheses are translate's output
    lines under either segment setting, and cut into sentences they are the two references."""
    ckpt, _ = tiny_checkpoint
    sources, references = (lines[:16] for lines in overfit_pairs)
    two = [(f"{a} {b}", f"{c} {d}") for a, b, c, d in zip(
        sources[::2], sources[1::2], references[::2], references[1::2], strict=True)]  # fmt: skip
    en, de = [s for s, _ in two], [t for _, t in two]
    data_dir = write_split_files(tmp_path / "data", {"val": (en, de), "test_2016_flickr": (en, de)})
    (data_dir / "in.en").write_text("".join(line + "\n" for line in en), encoding="utf-8")
    printed = {}
    for segment in ("sentences", "lines"):
        overrides = [*data_overrides(ckpt, data_dir, tmp_path), f"segment={segment}"]
        record = evaluate(compose_evaluate(overrides), tmp_path / segment, overrides)
        assert record["segment"]["segment"] == segment
        assert f"- segment: {segment}" in (tmp_path / segment / "evaluation.md").read_text()
        out = tmp_path / f"{segment}.de"
        args = [
            f"ckpt={ckpt}",
            f"input={data_dir / 'in.en'}",
            f"output={out}",
            f"segment={segment}",
        ]
        done = run_cli(["-m", "nmt.translate", *args], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        printed[segment] = read(out)
        assert read(tmp_path / segment / "hyp.test.txt") == printed[segment]
    assert sum(a == b for a, b in zip(printed["sentences"], de, strict=True)) >= len(de) - 1
    assert printed["sentences"] != printed["lines"]


def test_length_buckets_group_lines_by_source_words_each_scored_as_a_corpus(
    tiny_checkpoint, tmp_path
):
    """length_buckets=[8,12]: three buckets by whitespace source words, each one's BLEU
    sacreBLEU's on its own lines; bad edges are refused before any decoding."""
    ckpt, data_dir = tiny_checkpoint
    overrides = [*data_overrides(ckpt, data_dir, tmp_path), "length_buckets=[8,12]"]
    record = evaluate(compose_evaluate(overrides), tmp_path / "run", overrides)
    buckets = record["splits"]["test"]["by_length"]
    assert [b["label"] for b in buckets] == ["1-8", "9-12", "13+"]
    sources = read(data_dir / "test_2016_flickr.en")
    hyps, refs = read(tmp_path / "run" / "hyp.test.txt"), read(data_dir / "test_2016_flickr.de")
    for bucket, (low, high) in zip(buckets, [(1, 8), (9, 12), (13, 10**6)], strict=True):
        mine = [i for i, line in enumerate(sources) if low <= len(line.split()) <= high]
        assert bucket["sentences"] == len(mine) > 0
        want = sacrebleu.corpus_bleu([hyps[i] for i in mine], [[refs[i] for i in mine]]).score
        assert bucket["bleu"] == pytest.approx(want, abs=1e-9)
    for edges in ("[12,8]", "[0,5]", "[]"):
        bad = [*data_overrides(ckpt, data_dir, tmp_path), f"length_buckets={edges}"]
        with pytest.raises(ValueError, match="length_buckets must be increasing"):
            evaluate(compose_evaluate(bad), tmp_path / "bad", bad)


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


def test_cli_prints_scores_and_writes_a_dated_evaluation_folder(tiny_checkpoint, tmp_path):
    overrides = [*data_overrides(*tiny_checkpoint, tmp_path), "decode=greedy"]
    done = run_cli(["-m", "nmt.evaluate", *overrides], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("test: BLEU ")  # stdout: the summary only
    assert "tok:13a" in done.stderr and "nrefs:1|case:lc" in done.stderr  # signatures logged
    (run,) = (tmp_path / "evaluations").iterdir()
    assert (run / "evaluation.json").is_file() and (run / ".hydra" / "overrides.yaml").is_file()
    assert f"evaluation: {run}" in done.stdout


def test_decode_sweep_gives_one_report_per_job_and_report_ranks_them(tiny_checkpoint, tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", "nmt.evaluate", "-m", *data_overrides(*tiny_checkpoint, tmp_path)]
    # Output lengths capped at 4, 8 and 50 pieces: three different scores, whatever the model
    # (greedy: the sweep and its report are checked here, not the search)
    lengths = ["decode=greedy", "decode.max_len_a=0", "decode.max_len_b=4,8,50"]
    on_test = run_cli([*args, *lengths, "splits=[test]"], cwd=tmp_path)
    assert on_test.returncode == 2 and "a sweep chooses on valid" in on_test.stderr
    lengths.append("splits=[valid,test]")
    done = run_cli([*args, *lengths, f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    jobs = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert jobs == ["0", "1", "2"]
    reports = [json.loads((sweep / job / "evaluation.json").read_text()) for job in jobs]
    assert {r["decode"]["max_len_b"] for r in reports} == {4, 8, 50}

    report_main([str(sweep), "--bootstrap", "200"])
    with open(sweep / "report.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    bleu = [float(r["valid BLEU"]) for r in rows]  # ranked on valid, test beside it
    assert bleu == sorted(bleu, reverse=True) and all(r["test BLEU"] for r in rows)
    assert [r["decode.max_len_b"] for r in rows] == ["50", "8", "4"]  # longer scores higher
    assert rows[0]["significant"] == "best" and rows[0]["p (valid vs best)"] == ""
    assert all(r["significant"] in ("yes", "no") for r in rows[1:])
    assert all(0 < float(r["p (valid vs best)"]) <= 1 for r in rows[1:])
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
        f"- ensembled with: {ckpt.resolve()}"
        in (tmp_path / "ensemble" / "evaluation.md").read_text()
    )


def test_ensemble_members_must_share_tokenizer_and_direction(
    tiny_checkpoint, multi30k_dir, tmp_path
):
    ckpt, _ = tiny_checkpoint
    translator = load_checkpoint(ckpt)
    save_checkpoint(tmp_path / "de_en.pt", replace(translator, src_lang="de", tgt_lang="en"))
    with pytest.raises(CheckpointError, match="de_en.pt translates de->en but .* en->de"):
        TorchEngine.load([str(ckpt), str(tmp_path / "de_en.pt")], "cpu", "float32", 4096)
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
    save_checkpoint(tmp_path / "other.pt", replace(translator, tokenizer=other))
    with pytest.raises(CheckpointError, match="other.pt has another tokenizer"):
        TorchEngine.load([str(ckpt), str(tmp_path / "other.pt")], "cpu", "float32", 4096)


def test_the_heatmap_title_names_the_attention_it_shows():
    """The alignment layer and heads nmt.model records, not "the last layer"."""
    from nmt.evaluation.evaluation_run import attention_source

    guided = {"decoder_layers": 4, "alignment_layer": -2, "alignment_heads": 1}
    assert attention_source(guided) == "decoder layer 3 of 4, its head 0"
    raw = {"decoder_layers": 6, "alignment_layer": -1, "alignment_heads": 0}
    assert attention_source(raw) == "decoder layer 6 of 6, mean over heads"
