"""`python -m nmt.translate`: one output line per input line, in order, whatever the line holds."""

import io

import pytest
import torch
from conftest import run_module

from nmt.files import read_chunks


def run_translate(args: list[str], stdin: bytes, cwd):
    return run_module("nmt.translate", args, cwd, stdin)


def test_cli_keeps_line_count_and_order_with_empty_and_odd_lines(model_pt, overfit_pairs, tmp_path):
    sources, references = overfit_pairs
    lines = [sources[0], "", "   ", sources[1], "\t", sources[2], "x" * 3, sources[3]]
    stdin = ("\n".join(lines) + "\n").encode()
    result = run_translate([f"ckpt={model_pt}"], stdin, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode().split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[0] == references[0] and out[3] == references[1] and out[5] == references[2]
    assert out[7] == references[3]
    assert out[1] == out[2] == out[4] == ""
    assert "INFO" not in result.stdout.decode()  # logs go to stderr


def test_echo_one_sentence_just_works(model_pt, overfit_pairs, tmp_path):
    result = run_translate([f"ckpt={model_pt}"], overfit_pairs[0][5].encode() + b"\n", tmp_path)
    assert result.returncode == 0
    assert result.stdout.decode() == overfit_pairs[1][5] + "\n"


def test_file_io_streams_in_chunks_and_keeps_order(model_pt, overfit_pairs, tmp_path):
    sources, references = overfit_pairs
    src = tmp_path / "in.en"
    src.write_text("\n".join(sources[:10]) + "\n\n" + "\n", encoding="utf-8")
    out = tmp_path / "out.de"
    args = [f"ckpt={model_pt}", f"input={src}", f"output={out}", "chunk_lines=3", "decode=beam"]
    result = run_translate(args, b"", tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert out.read_text(encoding="utf-8").split("\n") == references[:10] + ["", "", ""]
    assert result.stdout == b""


def test_nbest_is_tab_separated_and_sorted(model_pt, overfit_pairs, tmp_path):
    stdin = ("\n".join(overfit_pairs[0][:3]) + "\n\n").encode()
    result = run_translate([f"ckpt={model_pt}", "decode=beam", "nbest=3"], stdin, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    rows = result.stdout.decode().split("\n")[:-1]
    assert len(rows) == 4 and rows[3] == ""
    for row, reference in zip(rows[:3], overfit_pairs[1][:3], strict=True):
        fields = row.split("\t")
        assert len(fields) == 6
        scores = [float(s) for s in fields[1::2]]
        assert scores == sorted(scores, reverse=True)
        assert fields[0] == reference


def test_an_ensemble_of_copies_translates_like_the_model(model_pt, overfit_pairs, tmp_path):
    sources, references = overfit_pairs
    stdin = ("\n".join(sources[:4]) + "\n").encode()
    args = [f"ckpt={model_pt}", f"ensemble=[{model_pt},{model_pt}]", "decode=beam"]
    result = run_translate(args, stdin, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().split("\n") == references[:4] + [""]


def test_bad_checkpoint_is_a_one_line_error(tmp_path):
    result = run_translate([f"ckpt={tmp_path / 'missing.pt'}"], b"hello\n", tmp_path)
    assert result.returncode != 0
    err = result.stderr.decode().strip().splitlines()
    assert err[-1].startswith("nmt.translate: error:") and "missing.pt" in err[-1]
    assert len(err) == 1


def test_nbest_without_beam_is_refused(model_pt, tmp_path):
    result = run_translate([f"ckpt={model_pt}", "nbest=2"], b"a\n", tmp_path)
    assert result.returncode != 0 and "decode=beam" in result.stderr.decode()


@pytest.mark.parametrize("module", ["nmt.translate", "nmt.evaluate"])
def test_a_missing_checkpoint_setting_is_one_line_naming_it_with_an_example(module, tmp_path):
    result = run_module(module, [], tmp_path, b"hi\n")
    err = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2, err
    assert err == [err[0]] and err[0].startswith(f"{module}: error: ckpt is required, e.g. ")
    assert f"python -m {module} ckpt=" in err[0] and result.stdout == b""


def test_undecodable_bytes_still_give_one_line(tmp_path):
    stream = io.BytesIO(b"good\n\xff\xfebad\nlast")
    chunks = list(read_chunks(stream, 2, "input"))
    assert chunks == [["good", "\ufffd\ufffdbad"], ["last"]]


def test_windows_line_endings_and_no_split_on_unicode_separators():
    chunks = list(read_chunks(io.BytesIO("a\r\nb\u2028c\n".encode()), 10, "input"))
    assert chunks == [["a", "b\u2028c"]]


def test_bfloat16_decoding_keeps_lines(model_pt, overfit_pairs, tmp_path):
    sources = overfit_pairs[0][:3]
    stdin = ("\n".join([sources[0], "", *sources[1:]]) + "\n").encode()
    result = run_translate([f"ckpt={model_pt}", "dtype=bfloat16"], stdin, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().split("\n")
    assert len(lines) == 5 and lines[1] == "" and all(lines[i] for i in (0, 2, 3))


@pytest.mark.parametrize("native", [False, True])
def test_bf16_on_a_cpu_that_would_emulate_it_is_warned_about_once(
    model_pt, monkeypatch, caplog, native
):
    import nmt.checkpoint
    import nmt.cpu

    monkeypatch.setattr(nmt.cpu, "cpu_has_native_bf16", lambda: native)
    with caplog.at_level("WARNING", logger="nmt.cpu"):
        nmt.checkpoint.load_translator(model_pt, "cpu", "bfloat16")
        nmt.checkpoint.load_translator(model_pt, "cpu", "float32")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ([] if native else [warnings[0]])
    assert native or "dtype=bfloat16" in warnings[0] and "no native bf16" in warnings[0]


@pytest.mark.parametrize("native", [False, True])
def test_auto_dtype_is_bfloat16_only_where_the_cpu_multiplies_it(model_pt, monkeypatch, native):
    import nmt.checkpoint
    import nmt.cpu

    monkeypatch.setattr(nmt.cpu, "cpu_has_native_bf16", lambda: native)
    translator = nmt.checkpoint.load_translator(model_pt, "cpu", "auto")
    weights = next(translator.model.parameters()).dtype
    assert weights == (torch.bfloat16 if native else torch.float32)
    assert nmt.checkpoint.pick_dtype("float16", torch.device("cpu")) == "float16"
