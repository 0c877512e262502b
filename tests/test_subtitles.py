"""Subtitles (nmt.documents.subtitles): .srt and .vtt files made by their libraries, read a
sentence at a time across cues, cut back into the same cues, times and tags kept."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import pytest
import srt
import webvtt
from conftest import (
    document_result,
    identity_translator,
    on_engine,
    reversed_translator,
    run_module,
    stand_in,
    uppercase_translator,
)

from nmt.decoding.settings import DecodeConfig
from nmt.documents.subtitles import LINE_CHARS, layout, shares
from nmt.errors import JobError

GREEDY = DecodeConfig(strategy="greedy")
TAG = re.compile(r"</?(\w+)[^>]*>")


def halves(sentence: str) -> tuple[str, str]:
    words = sentence.split()
    return " ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2 :])


def subrip(sentences: list[str]) -> bytes:
    """Each sentence over two cues (the second of two lines, the first's styled), as `srt`
    writes a file."""
    cues, at = [], 0
    for sentence in sentences:
        first, second = halves(sentence)
        words = second.split()
        second = " ".join(words[:2]) + "\n" + " ".join(words[2:]) if len(words) > 2 else second
        for text in (f"<i>{first}</i>", second):
            cues.append(
                srt.Subtitle(len(cues) + 1, timedelta(seconds=at), timedelta(seconds=at + 2), text)
            )
            at += 2
    return srt.compose(cues).encode()


def web_vtt(sentences: list[str]) -> bytes:
    """Each sentence over two cues, the first with a voice, as webvtt-py writes a file."""
    file = webvtt.WebVTT()
    for i, sentence in enumerate(sentences):
        first, second = halves(sentence)
        for j, text in enumerate((f"<v Anna>{first}</v>", second)):
            start = 4 * i + 2 * j
            file.captions.append(
                webvtt.Caption(f"00:00:{start:02d}.000", f"00:00:{start + 2:02d}.000", text)
            )
    return file.content.encode()


def read_back(data: bytes, suffix: str) -> list[tuple[str, str, list[str]]]:
    """(start, end, lines) per cue, as the format's library reads the file."""
    text = data.decode()
    if suffix == "srt":
        return [(str(c.start), str(c.end), c.content.split("\n")) for c in srt.parse(text)]
    return [(c.start, c.end, c.lines) for c in webvtt.from_buffer(io.StringIO(text)).captions]


def plain(line: str) -> str:
    return TAG.sub("", line)


@pytest.mark.parametrize("suffix", ["srt", "vtt"])
def test_a_subtitle_file_comes_back_as_it_was_through_an_identity_translator(suffix, overfit_pairs):
    data = (subrip if suffix == "srt" else web_vtt)(overfit_pairs[0][:6])

    result = document_result(stand_in(identity_translator), suffix, data=data, name=f"a.{suffix}")
    assert result.data == data  # byte for byte


@pytest.mark.parametrize("suffix", ["srt", "vtt"])
def test_cues_that_continue_a_sentence_are_translated_as_one_and_cut_back(suffix, overfit_pairs):
    sentences = overfit_pairs[0][:6]
    data = (subrip if suffix == "srt" else web_vtt)(sentences)
    asked = []

    def upper(texts, numbers):
        asked.extend(texts)
        return uppercase_translator(texts, numbers)

    out = document_result(stand_in(upper), suffix, data=data, name=f"a.{suffix}").data
    assert asked == sentences  # one segment per sentence, not per cue
    before, after = read_back(data, suffix), read_back(out, suffix)
    assert [c[:2] for c in after] == [c[:2] for c in before]  # times (and so order) kept
    for (_, _, source), (_, _, target) in zip(before, after, strict=True):
        # each cue holds its own words (the alignment is word for word), in its line count
        assert plain(" ".join(target)) == plain(" ".join(source)).upper()
        assert len(target) == len(source)
        assert all(len(plain(line)) <= LINE_CHARS for line in target)
        opened = [m[1] for m in TAG.finditer(" ".join(target)) if not m[0].startswith("</")]
        assert opened == [m[1] for m in TAG.finditer(" ".join(source)) if not m[0].startswith("</")]
    if suffix == "srt":
        assert [c.index for c in srt.parse(out.decode())] == list(range(1, len(before) + 1))


@pytest.mark.parametrize("suffix", ["srt", "vtt"])
def test_a_translation_whose_words_cross_its_cues_is_cut_at_their_shares(suffix, overfit_pairs):
    """Word i aligned to word n-1-i: the second cue's words come first in the target, so
    the alignment cannot keep the cues in order; each cue still gets words, tags balanced."""
    sentences = overfit_pairs[0][:4]
    data = (subrip if suffix == "srt" else web_vtt)(sentences)

    out = document_result(stand_in(reversed_translator), suffix, data=data, name=f"a.{suffix}").data
    cues = read_back(out, suffix)  # it parses as the format
    joined = [plain(" ".join(c[2])) for c in cues]
    assert all(joined)
    assert [f"{a} {b}" for a, b in zip(joined[::2], joined[1::2], strict=True)] == [
        s.upper() for s in sentences
    ]
    for _, _, lines in cues:
        text = " ".join(lines)
        opens = [m[1] for m in TAG.finditer(text) if not m[0].startswith("</")]
        closes = [m[1] for m in TAG.finditer(text) if m[0].startswith("</")]
        assert sorted(opens) == sorted(closes), text


def test_a_tag_cut_between_two_cues_is_closed_and_opened_again_around_their_words():
    assert shares("<i>Two dogs run fast</i> home.", [3, 2]) == [
        "<i>Two dogs run</i>",
        "<i>fast</i> home.",  # no space between the reopened tag and its word
    ]


@pytest.mark.parametrize("suffix", ["srt", "vtt"])
def test_a_subtitle_file_on_the_model_holds_each_sentence_as_translated_whole(
    suffix, overfit_engine, overfit_pairs
):
    sentences = [s for s in overfit_pairs[0] if s.endswith(".")][:8]  # each its own group
    data = (subrip if suffix == "srt" else web_vtt)(sentences)
    translate = on_engine(overfit_engine, GREEDY)
    out = document_result(translate, suffix, data=data, name=f"a.{suffix}").data
    whole = [t.text for t in translate(sentences, list(range(8)), None, True, False)]
    cues = read_back(out, suffix)
    assert len(cues) == 2 * len(sentences)
    joined = [" ".join(plain(" ".join(c[2])).split()) for c in cues]
    assert [
        " ".join(f"{a} {b}".split()) for a, b in zip(joined[::2], joined[1::2], strict=True)
    ] == [" ".join(plain(w).split()) for w in whole]


def test_a_cue_is_laid_out_in_its_lines_as_evenly_as_its_words_allow():
    assert layout("Zwei Männer spielen Gitarre auf einer Bühne.", ["a", "b"]) == [
        "Zwei Männer spielen",
        "Gitarre auf einer Bühne.",
    ]
    long = " ".join(["Wort"] * 30)  # 149 characters: four lines of at most 42
    lines = layout(long, ["one line"])
    assert len(lines) == 4 and all(len(line) <= LINE_CHARS for line in lines)
    assert layout("<i>ein Hund</i> läuft", ["x"]) == ["<i>ein Hund</i> läuft"]
    assert layout("kept as it was", ["  kept as it was "]) == ["  kept as it was "]  # its own


def test_subtitle_files_are_refused_in_one_line_before_work(tmp_path, model_pt):
    with pytest.raises(JobError, match="4 cues: the limit is max_file_segments=2") as over:
        from nmt.jobs.check import check
        from nmt.jobs.job import Job, Limits

        data = subrip(["A dog runs.", "A man walks on a beach."])
        check(Job(data=data, name="a.srt", format="srt"), Limits.unbounded(max_file_segments=2))
    assert over.value.status == 413
    with pytest.raises(JobError, match="not a .vtt file") as bad:
        document_result(stand_in(uppercase_translator), "vtt", data=b"00:01 --> x\n", name="a.vtt")
    assert bad.value.status == 422
    deck = tmp_path / "deck.xlsx"  # a zip of a suffix the table does not name: not lines
    deck.write_bytes(b"PK\x03\x04" + bytes(200))
    done = run_module("nmt.translate", [f"ckpt={model_pt}", f"input={deck}"], tmp_path)
    last = done.stderr.decode().strip().splitlines()[-1]
    assert done.returncode != 0 and "deck.xlsx is a zip archive, not text" in last, last


def test_translate_writes_a_subtitle_file_from_a_subtitle_file(tmp_path, model_pt, overfit_pairs):
    source = tmp_path / "in.srt"
    source.write_bytes(subrip(overfit_pairs[0][:3]))
    out = tmp_path / "out.srt"
    args = [f"ckpt={model_pt}", f"input={source}", f"output={out}", "decode=greedy"]
    done = run_module("nmt.translate", args, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert [c[:2] for c in read_back(out.read_bytes(), "srt")] == [
        c[:2] for c in read_back(source.read_bytes(), "srt")
    ]
