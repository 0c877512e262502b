"""`python -m nmt.translate`: one output line per input line, in order, whatever the line holds."""

import io
import shutil

import pytest
import torch
from conftest import run_module

from nmt.checkpoint import load_checkpoint, store_search
from nmt.decoding.settings import DecodeConfig
from nmt.files import read_chunks
from nmt.inference.search_choice import chosen_search
from nmt.inference.torch_engine import TorchEngine, pick_dtype


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
    stdin = ("\n".join(overfit_pairs[0][:3]) + "\n\n---\n").encode()
    result = run_translate([f"ckpt={model_pt}", "decode=beam", "nbest=3"], stdin, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    rows = result.stdout.decode().split("\n")[:-1]
    assert rows[3:] == ["", "---"]  # kept as they are, as with one best
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
    import nmt.cpu

    monkeypatch.setattr(nmt.cpu, "cpu_has_native_bf16", lambda: native)
    with caplog.at_level("WARNING", logger="nmt.cpu"):
        TorchEngine.load([str(model_pt)], "cpu", "bfloat16", 4096)
        TorchEngine.load([str(model_pt)], "cpu", "float32", 4096)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ([] if native else [warnings[0]])
    assert native or "dtype=bfloat16" in warnings[0] and "no native bf16" in warnings[0]


@pytest.mark.parametrize("native", [False, True])
def test_auto_dtype_is_bfloat16_only_where_the_cpu_multiplies_it(model_pt, monkeypatch, native):
    import nmt.cpu

    monkeypatch.setattr(nmt.cpu, "cpu_has_native_bf16", lambda: native)
    engine = TorchEngine.load([str(model_pt)], "cpu", "auto", 4096)
    assert engine.precision == ("bfloat16" if native else "float32")
    assert pick_dtype("float16", torch.device("cpu")) == "float16"


# The search travels with the model: model.pt stores the recipe's search.


def search_line(result) -> str:
    return next(line for line in result.stderr.decode().splitlines() if "Search: " in line)


def test_the_models_own_search_runs_unless_the_command_line_names_one(
    model_pt, overfit_pairs, tmp_path
):
    stdin = (overfit_pairs[0][0] + "\n").encode()
    own = run_translate([f"ckpt={model_pt}"], stdin, tmp_path)
    # the recipe's tuned search (multi30k_cpu's search)
    assert "Search: beam 5, GNMT length penalty 1.4 (the checkpoint's own)" in search_line(own)
    assert own.stdout.decode() == overfit_pairs[1][0] + "\n"
    one_field = run_translate([f"ckpt={model_pt}", "decode.beam_size=2"], stdin, tmp_path)
    assert search_line(one_field).endswith(
        "Search: beam 2, GNMT length penalty 1.4 (the checkpoint's own, with beam_size from the "
        "command line)"
    )
    whole = run_translate([f"ckpt={model_pt}", "decode=greedy"], stdin, tmp_path)
    assert search_line(whole).endswith("Search: greedy (decode= from the command line)")


def test_a_checkpoint_written_before_searches_were_stored_falls_back_with_a_note(
    model_pt, overfit_pairs, tmp_path
):
    payload = torch.load(model_pt, weights_only=True)
    del payload["search"]
    torch.save(payload, tmp_path / "old.pt")
    assert load_checkpoint(tmp_path / "old.pt").search is None
    stdin = (overfit_pairs[0][1] + "\n").encode()
    result = run_translate([f"ckpt={tmp_path / 'old.pt'}"], stdin, tmp_path)
    assert result.returncode == 0 and result.stdout.decode() == overfit_pairs[1][1] + "\n"
    assert "stores no search" in search_line(result) and search_line(result).endswith(": greedy)")


def test_chosen_search_takes_the_command_lines_fields_over_the_stored_ones():
    stored = DecodeConfig(strategy="beam", beam_size=5, len_penalty=1.4)
    command = DecodeConfig(strategy="beam", beam_size=4, len_penalty=0.6, min_len=2)
    assert chosen_search(command, stored, ["ckpt=x"])[0] == stored
    assert chosen_search(command, stored, ["decode=beam"])[0] == command
    picked, where = chosen_search(command, stored, ["decode.min_len=2", "+decode.beam_size=4"])
    assert picked == DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.4, min_len=2)
    assert where == "the checkpoint's own, with min_len, beam_size from the command line"
    assert chosen_search(command, None, [])[0] == command


def test_a_search_stored_into_a_checkpoint_is_loaded_with_it(model_pt, tmp_path):
    copy = tmp_path / "model.pt"
    shutil.copy(model_pt, copy)
    search = DecodeConfig(strategy="sample", top_k=5, nbest=2, seed=3)
    store_search(copy, search)
    assert load_checkpoint(copy).search == search


def test_segment_max_words_cuts_a_run_of_captions_before_a_sentence_start(
    model_pt, overfit_pairs, tmp_path
):
    """Two captions without a full stop between them, 18 words: one segment under the
    default segment_max_words=25, two under 10 (cut before "Boys", a capital after a
    lowercase word), each then translated as a line of its own would be."""
    first, second = overfit_pairs[0][2].rstrip("."), overfit_pairs[0][9]
    run = f"{first} {second}"
    assert 10 < len(run.split()) <= 25 and second.startswith("Boys ")
    stdin = f"{run}\n{first}\n{second}\n".encode()
    out = {}
    for setting in ("segment_max_words=10", "segment_max_words=25", "segment=lines"):
        result = run_translate([f"ckpt={model_pt}", setting], stdin, tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        out[setting] = result.stdout.decode().split("\n")[:3]
    cut = out["segment_max_words=10"]
    assert cut[0] == f"{cut[1]} {cut[2]}"
    assert out["segment_max_words=25"][0] == out["segment=lines"][0] != cut[0]
