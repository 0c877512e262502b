"""OpenDocument text and presentations (nmt.documents.odf_file), made with odfpy as an
office suite's users would get them: every paragraph translated, spans and links kept on
their words, the other parts byte for byte, and odfpy reads the result."""

from __future__ import annotations

import io
import zipfile

import pytest
from conftest import document_result, identity_translator, stand_in, uppercase_translator
from odf import teletype
from odf.draw import Frame, Page, TextBox
from odf.opendocument import OpenDocumentPresentation, OpenDocumentText, load
from odf.presentation import Notes
from odf.style import Footer, MasterPage, PageLayout, Style, TextProperties
from odf.table import Table, TableCell, TableColumn, TableRow
from odf.text import A, H, LineBreak, List, ListItem, P, S, Span

from nmt.errors import JobError
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits


def odt(s: list[str]) -> bytes:
    doc = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    layout = PageLayout(name="Page")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    footer = Footer()
    footer.addElement(P(text=s[0]))
    master.addElement(footer)
    doc.masterstyles.addElement(master)
    doc.text.addElement(H(outlinelevel=1, text=s[1]))
    words = s[2].split()
    p = P(text=" ".join(words[:2]) + " ")
    p.addElement(Span(stylename=bold, text=" ".join(words[2:4])))
    p.addText(" ")
    p.addElement(S(c=3))
    p.addElement(A(href="https://example.org/x", text=" ".join(words[4:])))
    p.addElement(LineBreak())
    p.addText(s[3])
    doc.text.addElement(p)
    items = List()
    for x in s[4:6]:
        item = ListItem()
        item.addElement(P(text=x))
        items.addElement(item)
    doc.text.addElement(items)
    table = Table(name="T")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    row = TableRow()
    for x in s[6:8]:
        cell = TableCell()
        cell.addElement(P(text=x))
        row.addElement(cell)
    table.addElement(row)
    doc.text.addElement(table)
    out = io.BytesIO()
    doc.write(out)
    return out.getvalue()


def odp(s: list[str]) -> bytes:
    pres = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    pres.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    pres.masterstyles.addElement(master)
    for i in range(2):
        page = Page(masterpagename=master)
        for holder, text in ((page, s[2 * i]), (Notes(), s[2 * i + 1])):
            frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
            box = TextBox()
            box.addElement(P(text=text))
            frame.addElement(box)
            holder.addElement(frame)
            if holder is not page:
                page.addElement(holder)
        pres.presentation.addElement(page)
    out = io.BytesIO()
    pres.write(out)
    return out.getvalue()


def texts(data: bytes) -> list[str]:
    """Every paragraph's and heading's text, as odfpy reads it, styles' parts first."""
    doc = load(io.BytesIO(data))
    found = []
    for root in (doc.masterstyles, doc.body):
        for element in root.getElementsByType(P) + root.getElementsByType(H):
            found.append(teletype.extractText(element))
    return sorted(found)


def translated(data: bytes, fmt: str, translate=uppercase_translator) -> bytes:
    return document_result(stand_in(translate), fmt, data=data, name=f"a.{fmt}").data


@pytest.mark.parametrize("fmt", ["odt", "odp"])
def test_every_paragraph_is_translated_and_the_rest_kept(overfit_pairs, fmt):
    s = [x.rstrip(".") for x in overfit_pairs[0][:8]]
    source = odt(s) if fmt == "odt" else odp(s)
    out = translated(source, fmt)
    assert texts(out) == sorted(t.upper() for t in texts(source))
    before, after = zipfile.ZipFile(io.BytesIO(source)), zipfile.ZipFile(io.BytesIO(out))
    assert after.namelist() == before.namelist() and after.namelist()[0] == "mimetype"
    assert after.infolist()[0].compress_type == zipfile.ZIP_STORED
    for part in before.namelist():
        if part not in ("content.xml", "styles.xml"):
            assert after.read(part) == before.read(part), part
    assert texts(translated(source, fmt, identity_translator)) == texts(source)


def test_spans_links_and_spaces_stay_on_their_words(overfit_pairs):
    s = [x.rstrip(".") for x in overfit_pairs[0][:8]]
    words = s[2].split()
    content = zipfile.ZipFile(io.BytesIO(translated(odt(s), "odt"))).read("content.xml").decode()
    span = " ".join(words[2:4]).upper()
    assert f'<text:span text:style-name="Bold">{span}</text:span>' in content
    assert 'xlink:href="https://example.org/x"' in content and '<text:s text:c="3"/>' in content
    assert "<text:line-break/>" in content


def test_a_paragraph_is_read_whole_through_its_spans_and_a_tab_between_words_is_a_space(
    overfit_pairs,
):
    """The model reads each paragraph as one text: its styled span and link are inline, as
    HTML's are, not cuts; a tab or line break written between two words (as LibreOffice
    writes a Word file's tab) is the space between them, and comes back in that space."""
    s = [x.rstrip(".") for x in overfit_pairs[0][:8]]
    tab = f"{s[3]}<text:tab/>{s[4]}"
    source = with_content(
        odt(s), lambda c: c.replace(f"<text:p>{s[4]}</text:p>", f"<text:p>{tab}</text:p>")
    )
    seen = []
    out = translated(
        source,
        "odt",
        lambda texts, numbers: seen.extend(texts) or uppercase_translator(texts, numbers),
    )
    # the paragraph of a span, a link and a line break after the link: one text, spaced
    assert f"{s[2]} {s[3]}" in seen
    assert f"{s[3]} {s[4]}" in seen  # the tab read as a space, not "...word" + "Word..."
    content = zipfile.ZipFile(io.BytesIO(out)).read("content.xml").decode()
    assert f"{s[3].upper()}<text:tab/>{s[4].upper()}" in content


def with_content(data: bytes, change) -> bytes:
    """The OpenDocument file with its content.xml changed by `change` (str -> str)."""
    before, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as after:
        for info in before.infolist():
            part = before.read(info)
            if info.filename == "content.xml":
                part = change(part.decode()).encode()
            after.writestr(info, part)
    return out.getvalue()


def test_a_paragraph_around_a_footnote_and_a_captioned_frame_is_translated_and_so_are_they(
    overfit_pairs,
):
    """A footnote (`text:note`) and a frame with a caption anchored in a paragraph with words
    of its own: the paragraph, the note's paragraph and the caption are each translated, the
    note's citation and the frame kept where the words beside them went."""
    from odf.text import Note, NoteBody, NoteCitation

    s = [x.rstrip(".") for x in overfit_pairs[0][:4]]
    doc = OpenDocumentText()
    p = P(text=s[0] + " ")
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text=s[1]))
    note.addElement(body)
    p.addElement(note)
    frame = Frame(width="5cm", height="3cm", anchortype="as-char")
    box = TextBox()
    box.addElement(P(text=s[2]))
    box.addElement(P())  # empty: no segment
    frame.addElement(box)
    p.addElement(frame)
    p.addText(" " + s[3])
    doc.text.addElement(p)
    out = io.BytesIO()
    doc.write(out)
    # a file that already has the attribute the paragraphs are marked with while translated
    source = with_content(
        out.getvalue(), lambda xml: xml.replace("<text:p/>", '<text:p nmt-segment="x"/>')
    )
    translated_file = translated(source, "odt")
    outer = load(io.BytesIO(translated_file)).text.getElementsByType(P)[0]
    inner = [teletype.extractText(x) for x in outer.getElementsByType(P) if x is not outer]
    assert inner == [s[1].upper(), s[2].upper(), ""]  # the note's paragraph, the caption
    assert [teletype.extractText(x) for x in outer.getElementsByType(NoteCitation)] == ["1"]
    content = zipfile.ZipFile(io.BytesIO(translated_file)).read("content.xml").decode()
    assert f"{s[0].upper()} <text:note " in content and f"</draw:frame> {s[3].upper()}" in content
    assert "nmt-segment" not in content


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda s: b"not a zip at all", "not an .odt file"),
        (lambda s: odp(s), "its mimetype is not application/vnd.oasis.opendocument.text"),
    ],
    ids=["not-zip", "a-presentation-named-odt"],
)
def test_a_file_of_another_kind_is_one_line(overfit_pairs, make, words):
    with pytest.raises(JobError, match=words) as refused:
        check(Job(data=make(overfit_pairs[0][:8]), name="a.odt", format="odt"), Limits())
    assert refused.value.status == 422 and "\n" not in str(refused.value)
