"""Presentations (nmt.documents.pptx_file): a deck python-pptx made of real sentences, every
text frame translated (titles, bodies, grouped shapes, tables, notes), runs' formatting
kept, refused before parsing when hostile."""

from __future__ import annotations

import io
import zipfile

import pptx
import pytest
from conftest import (
    document_result,
    identity_translator,
    run_module,
    stand_in,
    uppercase_translator,
    word_translator,
)
from pptx.util import Inches

from nmt.errors import JobError
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits


def deck(s: list[str]) -> bytes:
    """One slide: a title, a body of two paragraphs (one of three runs, the middle bold), a
    text box in a group, a table of two cells, speaker notes."""
    made = pptx.Presentation()
    slide = made.slides.add_slide(made.slide_layouts[1])
    slide.shapes.title.text = s[0]
    body = slide.placeholders[1].text_frame
    body.text = s[1]
    words = s[2].split()
    paragraph = body.add_paragraph()
    for i, text in enumerate(
        [" ".join(words[:2]) + " ", " ".join(words[2:4]), " " + " ".join(words[4:])]
    ):
        run = paragraph.add_run()
        run.text = text
        run.font.bold = i == 1 or None
    group = slide.shapes.add_group_shape()
    box = group.shapes.add_textbox(Inches(1), Inches(1), Inches(2), Inches(1))
    box.text_frame.text = s[3]
    table = slide.shapes.add_table(1, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = s[4], s[5]
    slide.notes_slide.notes_text_frame.text = s[6]
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def texts(data: bytes) -> list[str]:
    """Every paragraph's text: shapes (groups and tables opened), then the notes."""
    slide = pptx.Presentation(io.BytesIO(data)).slides[0]
    found = []

    def shapes(group) -> None:
        for shape in group:
            if shape.shape_type == pptx.enum.shapes.MSO_SHAPE_TYPE.GROUP:
                shapes(shape.shapes)
            elif shape.has_table:
                found.extend(c.text for row in shape.table.rows for c in row.cells)
            elif shape.has_text_frame:
                found.extend(p.text for p in shape.text_frame.paragraphs)

    shapes(slide.shapes)
    return [*found, slide.notes_slide.notes_text_frame.text]


def translated(data: bytes, translate) -> bytes:
    return document_result(stand_in(translate), "pptx", data=data, name="deck.pptx").data


def test_every_text_frame_is_translated_and_runs_keep_their_formatting(overfit_pairs):
    s = overfit_pairs[0][:7]
    source = deck(s)
    out = translated(source, uppercase_translator)
    assert texts(out) == [t.upper() for t in texts(source)]  # all seven frames, notes too
    paragraph = (
        pptx.Presentation(io.BytesIO(out)).slides[0].placeholders[1].text_frame.paragraphs[1]
    )
    bold = [r.text.strip() for r in paragraph.runs if r.font.bold]
    assert bold == [" ".join(s[2].split()[2:4]).upper()]  # the bold run's own words
    # an identity translation gives the same text in runs of the same formatting
    same = translated(source, identity_translator)
    assert texts(same) == texts(source)
    runs = (
        pptx.Presentation(io.BytesIO(same)).slides[0].placeholders[1].text_frame.paragraphs[1].runs
    )
    assert [r.font.bold for r in runs] == [None, True, None]


def test_a_hostile_presentation_is_refused_in_one_line_before_parsing(overfit_pairs):
    source = deck(overfit_pairs[0][:7])
    with zipfile.ZipFile(io.BytesIO(source)) as archive:
        files = {p.filename: archive.read(p) for p in archive.infolist()}

    def zipped(changed: dict[str, bytes]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in (files | changed).items():
                archive.writestr(name, data)
        return out.getvalue()

    laughs = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "ha">]><p:sld>&a;</p:sld>'
    runs = b"<a:p>" + b"<a:r><a:t>x</a:t></a:r>" * 200 + b"</a:p>"
    limits = Limits.unbounded(
        max_zip_ratio=100.0, max_inflated_bytes=100_000_000, max_file_tags=100
    )
    for expected, status, data in [
        ("declares an XML entity", 422, zipped({"ppt/slides/slide1.xml": laughs})),
        ("inflates", 413, zipped({"ppt/slides/slide1.xml": b" " * 2_000_000})),
        (
            r"over \d+ runs: the limit is max_file_tags=100",
            413,
            zipped({"ppt/slides/slide1.xml": runs}),
        ),
        ("not a .pptx file", 422, b"not a zip"),
        ("not a .pptx file python-pptx can read", 422, zipped({"[Content_Types].xml": b"<x/>"})),
    ]:
        with pytest.raises(JobError, match=expected) as refused:
            check(Job(data=data, name="deck.pptx", format="pptx"), limits)
        assert refused.value.status == status and "\n" not in str(refused.value)


def test_translate_writes_a_presentation_from_a_presentation(tmp_path, model_pt, overfit_pairs):
    source = tmp_path / "deck.pptx"
    source.write_bytes(deck(overfit_pairs[0][:7]))
    out = tmp_path / "deck.de.pptx"
    args = [f"ckpt={model_pt}", f"input={source}", f"output={out}", "decode=greedy"]
    done = run_module("nmt.translate", args, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    after = texts(out.read_bytes())
    assert len(after) == 7 and all(after) and after[0] != overfit_pairs[0][0]


def test_a_bold_word_the_translation_moves_into_its_plain_neighbours_words_stays_bold(
    overfit_pairs,
):
    """As in a Word file: the run of the paragraph's own formatting is no tag, so a bold word
    aligned inside its words keeps its bold."""
    words = overfit_pairs[0][0].split()
    made = pptx.Presentation()
    box = made.slides.add_slide(made.slide_layouts[6]).shapes.add_textbox(
        Inches(1), Inches(1), Inches(6), Inches(1)
    )
    paragraph = box.text_frame.paragraphs[0]
    for text, bold in ((words[0] + " ", None), (words[1], True), (" " + " ".join(words[2:]), None)):
        run = paragraph.add_run()
        run.text, run.font.bold = text, bold
    data = io.BytesIO()
    made.save(data)
    out = translated(data.getvalue(), word_translator(swap=1))
    runs = pptx.Presentation(io.BytesIO(out)).slides[0].shapes[0].text_frame.paragraphs[0].runs
    moved = [words[0], words[2], words[1], *words[3:]]
    assert "".join(r.text for r in runs) == " ".join(moved).upper()
    assert [r.text for r in runs if r.font.bold] == [words[1].upper()]
