"""format=docx (nmt.documents.docx_file): a Word file's text translated, its runs' formatting,
tables, headers, links and everything else kept; `translate input=FILE` picks the format."""

from __future__ import annotations

import io
import zipfile

import docx
import pytest
from conftest import (
    run_module,
    translated_docx,
    translated_word_file,
    uppercase_translator,
    word_translator,
)
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.text.run import Run

from nmt.decoding.settings import DecodeConfig
from nmt.documents.archive import ArchiveError, check_archive
from nmt.documents.docx_file import WordFile, paragraphs
from nmt.documents.markup import Pages
from nmt.errors import JobError
from nmt.translation.texts import translate_texts

GREEDY = DecodeConfig(strategy="greedy")


@pytest.fixture(scope="module", params=["torch", "ctranslate2"])
def engine(request, overfit_engine, ct2_f32):
    return overfit_engine if request.param == "torch" else ct2_f32


def word_file(s: list[str]) -> bytes:
    """Real sentences in a paragraph with a bold run, a table with an italic run, a
    paragraph with a hyperlink and a bookmark, a header, a footer and a first page's footer."""
    document = docx.Document()
    words = s[0].split()
    first = document.add_paragraph(" ".join(words[:1]) + " ")
    first.add_run(" ".join(words[1:3])).bold = True
    first.add_run(" " + " ".join(words[3:]) + "\t" + s[1])
    document.add_paragraph("")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = s[2]
    table.cell(0, 1).paragraphs[0].add_run(s[3]).italic = True
    linked = document.add_paragraph(s[4] + " ")
    bookmark = OxmlElement("w:bookmarkStart")
    bookmark.set(qn("w:id"), "7")
    bookmark.set(qn("w:name"), "here")
    linked._p.append(bookmark)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), "rId99")
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = s[5]
    run.append(text)
    link.append(run)
    linked._p.append(link)
    section = document.sections[0]
    section.header.paragraphs[0].text = s[6]
    section.footer.paragraphs[0].text = s[7]
    section.different_first_page_header_footer = True
    section.first_page_footer.paragraphs[0].text = s[8]
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def texts(data: bytes) -> list[str]:
    document = docx.Document(io.BytesIO(data))
    return ["".join(Run(r, None).text for r in p.iter(qn("w:r"))) for p in paragraphs(document)]


def test_a_word_file_is_translated_paragraph_by_paragraph_its_formatting_kept(
    engine, overfit_pairs
):
    s = overfit_pairs[0]
    source = word_file(s)
    out = translated_docx(engine, source, GREEDY)
    before, after = texts(source), texts(out)
    assert len(after) == len(before)
    plain = translate_texts(engine, before, GREEDY, alignments=True)
    assert after == [t.text for t in plain]  # each paragraph read whole, its tab kept
    assert "\t" in after[0]
    document = docx.Document(io.BytesIO(out))
    body = document.paragraphs
    bold = [r.text for r in body[0].runs if r.bold]
    words = plain[0].text.split()
    aligned = sorted(t for src, t in plain[0].alignments[0] if src in (1, 2))
    # the bold run holds target words aligned to its source words (all of them, but for those
    # its neighbour runs, aligned there too, took first)
    assert len(bold) <= 1
    if aligned and bold:
        assert bold[0].strip() in " ".join(words[aligned[0] : aligned[-1] + 1])
    italic = [r.text for r in document.tables[0].cell(0, 1).paragraphs[0].runs if r.italic]
    assert "".join(italic) == plain[3].text
    linked = body[-1]._p
    assert linked.find(qn("w:bookmarkStart")).get(qn("w:name")) == "here"
    assert linked.find(qn("w:hyperlink")).get(qn("r:id")) == "rId99"
    section = document.sections[0]
    parts = (section.header, section.footer, section.first_page_footer)
    assert [part.paragraphs[0].text for part in parts] == [t.text for t in plain[-3:]]
    assert plain[-2].text and plain[-2].text != before[-2]  # the footer was translated


def test_a_file_that_is_not_a_word_file_is_refused_in_one_line(overfit_engine, tmp_path, model_pt):
    with pytest.raises(JobError, match="not a .docx file") as refused:
        translated_docx(overfit_engine, b"PK\x03\x04 not really", GREEDY)
    assert refused.value.status == 422
    bad = tmp_path / "bad.docx"
    bad.write_bytes(b"<html>not a zip</html>")
    out = tmp_path / "out.docx"
    done = run_module(
        "nmt.translate", [f"ckpt={model_pt}", f"input={bad}", f"output={out}"], tmp_path
    )
    assert done.returncode != 0 and not out.exists()  # nothing half-written
    last = done.stderr.decode().strip().splitlines()[-1]
    assert "bad.docx: not a .docx file: not a zip archive" in last, last


def test_translate_picks_the_format_from_the_input_file(model_pt, overfit_pairs, tmp_path):
    s = overfit_pairs[0]
    (tmp_path / "in.docx").write_bytes(word_file(s))
    (tmp_path / "in.html").write_text(f"<p>{s[0]}</p>\n")
    (tmp_path / "in.md").write_text(f"# {s[0]}\n\n- {s[1]}\n")
    for name in ("in.docx", "in.html", "in.md"):
        out = tmp_path / f"out{name[2:]}"
        args = [f"ckpt={model_pt}", f"input={tmp_path / name}", f"output={out}", "decode=greedy"]
        done = run_module("nmt.translate", args, tmp_path)
        assert done.returncode == 0, done.stderr.decode()
    assert len(texts((tmp_path / "out.docx").read_bytes())) == len(texts(word_file(s)))
    assert (tmp_path / "out.html").read_text().startswith("<p>")
    markdown = (tmp_path / "out.md").read_text().splitlines()
    assert markdown[0].startswith("# ") and markdown[1] == "" and markdown[2].startswith("- ")
    small = [f"ckpt={model_pt}", f"input={tmp_path / 'in.docx'}", "output=x.docx"]
    refused = run_module("nmt.translate", [*small, "max_file_bytes=100"], tmp_path)
    assert "the limit is max_file_bytes=100" in refused.stderr.decode().strip().splitlines()[-1]
    piped = [f"ckpt={model_pt}", "format=html", "max_file_bytes=100"]  # stdin, bounded alike
    refused = run_module("nmt.translate", piped, tmp_path, stdin=b"<p>A man.</p>" * 20)
    last = refused.stderr.decode().strip().splitlines()[-1]
    assert refused.returncode != 0 and last.endswith(
        "stdin has more than 100 bytes: the limit is max_file_bytes=100"
    )


def element(tag: str, text: str | None = None, *children):
    made = OxmlElement(tag)
    if text is not None:
        made.text = text
    for child in children:
        made.append(child)
    return made


def test_links_page_break_hints_text_boxes_and_line_breaks_keep_their_place():
    """Text after a link stays after it; a run holding Word's page-break hint, and one inside a
    tracked insertion, are translated; a text box's text is translated in the saved file;
    a line break (Shift+Enter) stays between its lines, each translated on its own."""

    document = docx.Document()
    linked = document.add_paragraph()
    linked.add_run("Click ")
    linked._p.append(element("w:hyperlink", None, element("w:r", None, element("w:t", "here"))))
    linked.add_run(" to continue.")
    hinted = document.add_paragraph()
    hinted.add_run("Before ")
    hinted.add_run()._r.append(element("w:lastRenderedPageBreak"))
    hinted.runs[-1].add_text("page text ")
    inserted = element("w:ins", None, element("w:r", None, element("w:t", "inserted")))
    hinted._p.append(inserted)
    boxed = document.add_paragraph()
    boxed.add_run("Outer text ")
    inner = element("w:p", None, element("w:r", None, element("w:t", "inner box")))
    box = element("w:pict", None, element("w:txbxContent", None, inner))
    boxed.add_run()._r.append(box)
    boxed.add_run(" more.")
    address = document.add_paragraph()
    address.add_run("Line one")
    address.add_run().add_break()
    address.runs[-1].add_text("line two")
    data = io.BytesIO()
    document.save(data)

    out = translated_word_file(data.getvalue(), uppercase_translator)
    found = docx.Document(io.BytesIO(out))
    assert [p.text for p in found.paragraphs] == [
        "CLICK HERE TO CONTINUE.",
        "BEFORE PAGE TEXT ",  # python-docx's text leaves out the tracked insertion
        "OUTER TEXT  MORE.",  # a space on either side of the box, as in "Outer text  more."
        "LINE ONE\nLINE TWO",
    ]
    insertion = next(found.element.body.iter(qn("w:ins")))
    assert [t.text for t in insertion.iter(qn("w:t"))] == ["INSERTED"]
    boxes = list(found.element.body.iter(qn("w:txbxContent")))
    assert [t.text for box in boxes for t in box.iter(qn("w:t"))] == ["INNER BOX"]


def zipped(parts: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_a_zip_bomb_is_refused_from_its_directory_before_it_is_unzipped():
    """The declared sizes are checked, in all and per part (Apache POI's ZipSecureFile):
    5 MB of zeros deflate 1000 times; a part under 64 KiB may deflate as much, and there are
    at most 1,000 parts."""
    bomb = zipped({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"\0" * 5_000_000})
    assert len(bomb) < 10_000
    with pytest.raises(
        ArchiveError,
        match=r"^'word/document.xml' inflates \d+ times: the limit is max_zip_ratio=100$",
    ):
        check_archive(bomb, 100_000_000, 100.0)
    with pytest.raises(
        ArchiveError,
        match=r"^the file inflates past max_inflated_bytes=1000000 \(at 'word/document.xml'\)$",
    ):
        check_archive(bomb, 1_000_000, 1e9)
    check_archive(zipped({"word/styles.xml": b"\0" * 50_000}), 1_000_000, 100.0)
    with pytest.raises(
        ArchiveError, match="'word/styles.xml' inflates"
    ):  # (1 MiB parts were let be)
        check_archive(zipped({"word/styles.xml": b"\0" * 500_000}), 1_000_000, 100.0)
    many = zipped({f"word/p{i}.xml": b"<a/>" for i in range(1001)})
    with pytest.raises(ArchiveError, match="1001 parts, over 1000"):
        check_archive(many, 100_000_000, 100.0)
    with pytest.raises(ArchiveError, match="^not a .docx file: not a zip archive"):
        check_archive(b"PK not a zip", 1_000_000, 100.0)
    with pytest.raises(ArchiveError, match="'word/document.xml' is not stored or deflated"):
        check_archive(zipped({"word/document.xml": b"<w/>"}, zipfile.ZIP_LZMA), 1_000_000, 100.0)
    real = io.BytesIO()
    docx.Document().save(real)
    check_archive(real.getvalue(), 1_000_000, 100.0)


def test_a_word_file_is_read_once_counted_then_written_as_its_job_writes_it():
    document = docx.Document()
    document.add_paragraph("A dog runs.")
    document.add_paragraph("")
    document.add_paragraph("Two men.").runs[0].bold = True
    data = io.BytesIO()
    document.save(data)
    word = WordFile(data.getvalue())
    assert len(word.fragments) == 2  # the empty paragraph has nothing to translate
    pages = Pages.plan(word.fragments)
    assert [(s.text, s.word_count, s.tag_count) for s in pages.segments] == [
        ("A dog runs.", 3, 0),  # a paragraph's own formatting is no tag
        ("Two men.", 2, 0),
    ]
    found = pages.render(uppercase_translator([s.text for s in pages.segments], [1, 2]))
    out = word.translated([t.text for t in found])
    whole = translated_word_file(data.getvalue(), uppercase_translator)
    assert texts(out) == texts(whole) == ["A DOG RUNS.", "", "TWO MEN."]
    assert docx.Document(io.BytesIO(out)).paragraphs[2].runs[0].bold
    with pytest.raises(ArchiveError, match="not a .docx file"):
        WordFile(b"PK not a zip")


def test_a_paragraph_of_many_runs_and_line_breaks_is_read_and_rebuilt_whole():
    """3000 runs of one letter each, every other one bold (one word, 1500 tags), and a bold
    run of 500 line breaks: each line rebuilt as a copy of its run's formatting alone, not of
    all its breaks."""
    document = docx.Document()
    letters = document.add_paragraph()
    for i in range(3000):
        letters.add_run("a").bold = i % 2 == 1
    broken = document.add_paragraph().add_run("x")
    broken.bold = True
    for _ in range(500):
        broken.add_break()
        broken.add_text("y")
    data = io.BytesIO()
    document.save(data)
    word = WordFile(data.getvalue())
    assert [(f.count("<span"), f.count("<br")) for f in word.fragments] == [(1500, 0), (0, 500)]
    pages = Pages.plan(word.fragments)
    assert [(s.word_count, s.tag_count) for s in pages.segments] == [(1, 1500)] + [
        (1, 0)
    ] * 501  # each line of the broken run its own segment, as after a <br>
    found = pages.render(uppercase_translator([s.text for s in pages.segments], [1] * 502))
    out = docx.Document(io.BytesIO(word.translated([t.text for t in found])))
    assert out.paragraphs[0].text == "A" * 3000
    assert out.paragraphs[1].text == "X" + "\nY" * 500
    runs = out.paragraphs[1].runs
    assert len(runs) == 1001 and all(r.bold for r in runs)
    assert sum(1 for _ in out.paragraphs[1]._p.iter(qn("w:br"))) == 500


def one_paragraph_file() -> tuple[io.BytesIO, dict[str, bytes]]:
    """A Word file of one paragraph, saved by python-docx, and its parts by name."""
    document = docx.Document()
    document.add_paragraph("A dog runs.")
    good = io.BytesIO()
    document.save(good)
    parts = zipfile.ZipFile(io.BytesIO(good.getvalue()))
    return good, {n: parts.read(n) for n in parts.namelist()}


def malformed_word_files() -> dict[str, bytes]:
    """Word files that python-docx or zipfile once failed on with a 500: no w:body, a header
    whose part is missing, a part with a bad CRC, a part flagged as encrypted."""
    good, names = one_paragraph_file()

    def rebuilt(changes: dict[str, bytes | None]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in (names | changes).items():
                if data is not None:
                    z.writestr(name, data)
        return out.getvalue()

    w = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    rels = names["word/_rels/document.xml.rels"].replace(
        b"</Relationships>",
        b'<Relationship Id="rId99" Type="http://schemas.openxmlformats.org/officeDocument/'
        b'2006/relationships/header" Target="header9.xml"/></Relationships>',
    )
    body = names["word/document.xml"].replace(
        b"<w:sectPr",
        b'<w:sectPr><w:headerReference w:type="default" r:id="rId99"/></w:sectPr><w:sectPr',
        1,
    )
    crc = bytearray(good.getvalue())
    at = crc.index(b"word/document.xml") + len("word/document.xml") + 10  # inside its data
    crc[at] ^= 0xFF
    encrypted = bytearray(good.getvalue())
    for header in (b"PK\x03\x04", b"PK\x01\x02"):  # every local and central header's flag
        start = 0
        while (start := encrypted.find(header, start)) >= 0:
            flag_at = start + (6 if header == b"PK\x03\x04" else 8)
            encrypted[flag_at] |= 0x01
            start += 4
    return {
        "no body": rebuilt({"word/document.xml": b"<w:document " + w + b"></w:document>"}),
        "a missing header part": rebuilt(
            {"word/_rels/document.xml.rels": rels, "word/document.xml": body}
        ),
        "a bad CRC": bytes(crc),
        "an encrypted part": bytes(encrypted),
    }


@pytest.mark.parametrize("case", list(malformed_word_files()))
def test_a_malformed_word_file_is_a_one_line_422(case):
    from nmt.jobs.check import check
    from nmt.jobs.job import Job, Limits

    data = malformed_word_files()[case]
    with pytest.raises(JobError) as refused:
        check(Job(data=data, name="a.docx", format="docx"), Limits.unbounded())
    assert refused.value.status == 422 and "\n" not in str(refused.value), case
    assert "not a .docx file" in str(refused.value)


def test_a_word_file_of_many_small_elements_is_refused_before_python_docx_reads_it():
    """Parts under the ratio check, full of `<a/>`: 40 of 1 MiB each once reached 1 GB in
    python-docx; the elements are counted as the parts inflate, and the file refused (413)."""
    from nmt.jobs.check import check
    from nmt.jobs.job import Job, Limits

    names = one_paragraph_file()[1]
    names |= {f"word/header{i}.xml": b"<a/>" * 16_000 for i in range(70)}  # 64 KB each
    bomb = zipped(names)
    assert len(bomb) < 200_000
    with pytest.raises(JobError, match="over 1,000,000 XML elements") as refused:
        check(Job(data=bomb, name="a.docx", format="docx"), Limits.unbounded())
    assert refused.value.status == 413


def test_a_bold_word_the_translation_moves_into_its_plain_neighbours_words_stays_bold(
    overfit_pairs,
):
    """The paragraph's own formatting is its text, not a tag: a bold word aligned inside the
    words of the plain run after it ("Six shirtless children" → "SIX CHILDREN SHIRTLESS")
    keeps its bold, and the plain words around it stay plain."""
    words = overfit_pairs[0][0].split()
    document = docx.Document()
    paragraph = document.add_paragraph(words[0] + " ")
    paragraph.add_run(words[1]).bold = True
    paragraph.add_run(" " + " ".join(words[2:]))
    data = io.BytesIO()
    document.save(data)
    out = translated_word_file(data.getvalue(), word_translator(swap=1))
    runs = docx.Document(io.BytesIO(out)).paragraphs[0].runs
    moved = [words[0], words[2], words[1], *words[3:]]
    assert "".join(r.text for r in runs) == " ".join(moved).upper()
    assert [r.text for r in runs if r.bold] == [words[1].upper()]
    assert all(r.bold is None for r in runs if r.text != words[1].upper())
