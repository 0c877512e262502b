"""Hostile files on the command line: each read in bounded memory and time, or refused in one
line before any work (the files a user hands `nmt.train`, `nmt.translate` and `nmt.import`)."""

from __future__ import annotations

import json
import pickle
import tracemalloc
from pathlib import Path

import pytest

from nmt.data.user_files import read_tmx
from nmt.hf.marian_import import MarianImportError, model_config, read_state_dict
from nmt.terms.glossary import Glossary


def tmx(units: str) -> str:
    return f'<tmx version="1.4"><header/><body>{units}</body></tmx>'


def test_a_tmx_segment_nested_5000_deep_is_read_whole(tmp_path):
    deep = "<hi>" * 5000 + "a dog" + "</hi>" * 5000
    path = tmp_path / "deep.tmx"
    sides = f'<tuv xml:lang="en"><seg>{deep}</seg></tuv><tuv xml:lang="de"><seg>Hund</seg></tuv>'
    unit = f"<tu>{sides}</tu>"
    path.write_text(tmx(unit))
    assert read_tmx(path, "en", "de")[:2] == (["a dog"], ["Hund"])  # no RecursionError


def test_a_tmx_of_many_units_is_read_in_bounded_memory(tmp_path):
    """Each parsed unit leaves the tree: 50,000 skipped units peaked at 4.3 MB while they
    stayed attached to <body>, 0.4 MB since."""
    path = tmp_path / "many.tmx"
    path.write_text(tmx('<tu><tuv xml:lang="en"><seg>a</seg></tuv></tu>' * 50_000))
    tracemalloc.start()
    try:
        skipped = read_tmx(path, "en", "de")[2]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(skipped.values()) == 50_000
    assert peak < 1_500_000, peak


def test_a_glossary_with_a_byte_order_mark_keeps_its_first_entry(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_bytes("\ufeffdog\tHund\ncat\tKatze\n".encode())
    assert [e.source for e in Glossary.read(str(path)).entries] == ["dog", "cat"]


class Payload:
    def __reduce__(self):
        return (print, ("code ran",))


def test_a_pickled_model_of_code_is_refused_in_one_line_unread(tmp_path, capsys):
    with open(tmp_path / "pytorch_model.bin", "wb") as f:
        pickle.dump({"w": Payload()}, f)
    with pytest.raises(MarianImportError) as refused:
        read_state_dict(tmp_path)
    message = str(refused.value)
    assert "not plain tensors, refused unread" in message and "\n" not in message
    assert "code ran" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "field, value",
    [("d_model", 10**9), ("encoder_layers", 10**6), ("vocab_size", 10**12), ("d_model", "512")],
)
def test_a_config_of_absurd_sizes_is_refused_before_anything_is_allocated(field, value):
    config = {
        "model_type": "marian",
        "d_model": 512,
        "encoder_attention_heads": 8,
        "decoder_attention_heads": 8,
        "encoder_ffn_dim": 2048,
        "decoder_ffn_dim": 2048,
        "encoder_layers": 6,
        "decoder_layers": 6,
        "vocab_size": 58101,
        "pad_token_id": 58100,
        "eos_token_id": 0,
        "scale_embedding": True,
        field: value,
    }
    with pytest.raises(MarianImportError, match=f"config.json {field}=.*must be 1..") as refused:
        model_config(config, 58101)
    assert "\n" not in str(refused.value)
    json.dumps(config)  # (the case is a config.json's)


def test_translate_reads_a_byte_order_mark_as_no_part_of_the_first_line(tmp_path: Path):
    from nmt.files import read_lines

    path = tmp_path / "in.en"
    path.write_bytes(b"\xef\xbb\xbfA dog.\nA cat.\n")
    assert list(read_lines(path)) == ["A dog.", "A cat."]
