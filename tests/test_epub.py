"""EPUB books (nmt.documents.epub_file): a book ebooklib made of real sentences, each
chapter translated as HTML, every other part byte for byte, refused before parsing when
hostile."""

from __future__ import annotations

import io
import zipfile

import ebooklib
import pytest
from conftest import (
    document_result,
    identity_translator,
    run_module,
    stand_in,
    uppercase_translator,
)
from ebooklib import epub

from nmt.errors import JobError
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits


def book(sentences: list[str]) -> bytes:
    """Two chapters and a stylesheet, as ebooklib writes a book."""
    made = epub.EpubBook()
    made.set_identifier("nmt-test")
    made.set_title("A book")
    made.set_language("en")
    style = epub.EpubItem(
        uid="style", file_name="style.css", media_type="text/css", content=b"p { margin: 0 }"
    )
    made.add_item(style)
    chapters = []
    for i in range(2):
        chapter = epub.EpubHtml(title=f"Chapter {i + 1}", file_name=f"c{i}.xhtml", lang="en")
        head, body, bold = sentences[3 * i : 3 * i + 3]
        chapter.content = f"<h1>{head}</h1><p>{body} <b>{bold}</b></p>"
        chapter.add_link(href="style.css", rel="stylesheet", type="text/css")
        made.add_item(chapter)
        chapters.append(chapter)
    made.toc = chapters
    made.spine = ["nav", *chapters]
    made.add_item(epub.EpubNcx())
    made.add_item(epub.EpubNav())
    out = io.BytesIO()
    epub.write_epub(out, made)
    return out.getvalue()


def parts(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {part.filename: archive.read(part) for part in archive.infolist()}


def translated(data: bytes, translate) -> bytes:
    return document_result(stand_in(translate), "epub", data=data, name="book.epub").data


def test_each_chapter_is_translated_and_every_other_part_kept(overfit_pairs):
    sentences = overfit_pairs[0][:6]
    source = book(sentences)
    out = translated(source, uppercase_translator)
    before, after = parts(source), parts(out)
    assert list(after) == list(before)  # the same parts in the same order, mimetype first
    with zipfile.ZipFile(io.BytesIO(out)) as archive:
        assert archive.infolist()[0].compress_type == zipfile.ZIP_STORED
    documents = {"EPUB/c0.xhtml", "EPUB/c1.xhtml", "EPUB/nav.xhtml"}
    for name in before:
        if name not in documents:
            assert after[name] == before[name], name
    read = epub.read_epub(io.BytesIO(out))  # the library reads the book it wrote, translated
    assert {i.get_name() for i in read.get_items_of_type(ebooklib.ITEM_DOCUMENT)} == {
        "c0.xhtml",
        "c1.xhtml",
        "nav.xhtml",
    }
    for i in range(2):
        text = after[f"EPUB/c{i}.xhtml"].decode()
        assert f"<h1>{sentences[3 * i].upper()}</h1>" in text
        assert f"<b>{sentences[3 * i + 2].upper()}</b>" in text
        assert 'href="style.css"' in text  # the chapter's head as it was
    assert (
        translated(source, identity_translator)
        and parts(translated(source, identity_translator)) == before
    )


def test_a_hostile_book_is_refused_in_one_line_before_parsing(overfit_pairs):
    source = parts(book(overfit_pairs[0][:6]))

    def zipped(files: dict[str, bytes]) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                archive.writestr(name, data)
        return out.getvalue()

    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;">]><p>&b;</p>'
    )
    cases = {
        "declares an XML entity": zipped(source | {"EPUB/c0.xhtml": laughs}),
        "inflates": zipped(source | {"EPUB/c1.xhtml": b" " * 2_000_000}),
        "no META-INF/container.xml": zipped({"mimetype": b"application/epub+zip"}),
        "not a zip archive": b"<html>not a book</html>",
    }
    limits = Limits.unbounded(max_zip_ratio=100.0, max_inflated_bytes=100_000_000)
    for expected, data in cases.items():
        with pytest.raises(JobError, match=expected) as refused:
            check(Job(data=data, name="book.epub", format="epub"), limits)
        assert refused.value.status in (413, 422) and "\n" not in str(refused.value)


def test_translate_writes_a_book_from_a_book(tmp_path, model_pt, overfit_pairs):
    source = tmp_path / "book.epub"
    source.write_bytes(book(overfit_pairs[0][:6]))
    out = tmp_path / "book.de.epub"
    args = [f"ckpt={model_pt}", f"input={source}", f"output={out}", "decode=greedy"]
    done = run_module("nmt.translate", args, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    chapter = parts(out.read_bytes())["EPUB/c0.xhtml"].decode()
    assert overfit_pairs[0][0] not in chapter and "<h1>" in chapter
