"""Each file format against the plain lines (#84): quality, tags and time.

test_2016_flickr's English sentences are laid out as a file of each format of the table
(nmt.documents.formats), made with the library made for it, one sentence per unit: a line,
an HTML or Markdown paragraph, a Word or OpenDocument paragraph, a slide's text box (ten to a
slide), an EPUB chapter's paragraph (a hundred to a chapter), a gettext entry, an XLIFF
trans-unit; subtitles split each sentence over 2 or 3 cues (at word boundaries), as a film's
cues run. Every fourth sentence has its second word in an inline tag where the format has
them (bold, italics, `<g>`), and every fourth other one a placeholder (`{count}`, after the
sentence) in gettext and XLIFF. Each file goes through the product's own file path (the
format's reader, nmt.jobs, the engine, the writer), and its translation is read back with the
format's library, one sentence per unit (a subtitle's cues joined).

Reported per format, against the plain lines (the same sentences as one list, segment=lines):
- BLEU of the sentences read back, tags and placeholders removed (target: within 0.5);
- tags and placeholders kept: the share of marked units whose output has them all, exactly;
- time: sentences per second, the plain lines and every format alternating each round
  (bench/harness.py), as a ratio to the plain lines with its spread.

    python bench/bench_formats.py --ckpt model.pt [--export DIR] [--rounds 3]
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import docx
import polib
import pptx
import sacrebleu
import srt
from common import read_lines, save_records, trained_engines, trained_model_args
from ebooklib import epub
from harness import Run, Side, alternate
from lxml import etree
from lxml import html as lxml_html
from odf import teletype
from odf.draw import Frame, Page, TextBox
from odf.opendocument import OpenDocumentPresentation, OpenDocumentText, load
from odf.style import Style, TextProperties
from odf.text import P, Span
from pptx.util import Inches

from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits
from nmt.jobs.run import engine_translator, run
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.texts import translate_texts

TAGGED, HOLDING = 1, 3  # sentence i is tagged where i % 4 == 1, holds a placeholder at 3
PLACEHOLDER = "{count}"
X12 = "urn:oasis:names:tc:xliff:document:1.2"
TAGS = re.compile(r"<[^>]+>|\*\*")


def tagged(i: int) -> bool:
    return i % 4 == TAGGED


def holding(i: int) -> bool:
    return i % 4 == HOLDING


def split_word(sentence: str) -> tuple[str, str, str]:
    """(before, the second word, after): where an inline tag goes."""
    words = sentence.split(" ")
    return " ".join(words[:1]) + " ", words[1], " " + " ".join(words[2:])


def with_tags(s: list[str], wrap: Callable[[int, str], str]) -> list[str]:
    """The sentences, each tagged one's second word wrapped by `wrap(i, word)`."""
    out = []
    for i, x in enumerate(s):
        if tagged(i):
            a, w, b = split_word(x)
            x = a + wrap(i, w) + b
        out.append(x)
    return out


@dataclass
class Layout:
    """A format's file of the sentences, and its translation read back: one text per
    sentence, and whether each marked unit kept its tag or placeholder."""

    fmt: str
    name: str
    make: Callable[[list[str]], bytes]
    read: Callable[[bytes, int], tuple[list[str], list[bool]]]


# -- the formats, made and read back --------------------------------------------------------


def make_text(s: list[str]) -> bytes:
    return "".join(x + "\n" for x in s).encode()


def read_text(data: bytes, n: int):
    return data.decode().splitlines()[:n], []


def make_html(s: list[str]) -> bytes:
    body = [f"<p>{x}</p>" for x in with_tags(s, lambda i, w: f"<b>{w}</b>")]
    return ("<html><body>\n" + "\n".join(body) + "\n</body></html>\n").encode()


def read_html(data: bytes, n: int):
    root = lxml_html.fromstring(data.decode())  # UTF-8, as the product writes it
    ps = root.findall(".//p")
    texts = [p.text_content() for p in ps]
    kept = [len(p.findall("b")) == 1 for i, p in enumerate(ps) if tagged(i)]
    return texts, kept


def make_markdown(s: list[str]) -> bytes:
    return "\n".join(x + "\n" for x in with_tags(s, lambda i, w: f"**{w}**")).encode()


def read_markdown(data: bytes, n: int):
    texts = [t.strip() for t in data.decode().split("\n\n")]
    kept = [t.count("**") == 2 for i, t in enumerate(texts) if tagged(i)]
    return [t.replace("**", "").replace("\\", "") for t in texts], kept


def make_docx(s: list[str]) -> bytes:
    made = docx.Document()
    for i, x in enumerate(s):
        p = made.add_paragraph()
        if tagged(i):
            a, w, b = split_word(x)
            p.add_run(a)
            p.add_run(w).bold = True
            p.add_run(b)
        else:
            p.add_run(x)
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def read_docx(data: bytes, n: int):
    ps = [p for p in docx.Document(io.BytesIO(data)).paragraphs if p.text.strip()]
    kept = [
        sum(1 for r in p.runs if r.bold and r.text.strip()) == 1
        for i, p in enumerate(ps)
        if tagged(i)
    ]
    return [p.text for p in ps], kept


def make_pptx(s: list[str]) -> bytes:
    made = pptx.Presentation()
    for start in range(0, len(s), 10):
        slide = made.slides.add_slide(made.slide_layouts[6])  # blank
        for j, x in enumerate(s[start : start + 10]):
            box = slide.shapes.add_textbox(
                Inches(0.3), Inches(0.3 + 0.7 * j), Inches(9), Inches(0.6)
            )
            p = box.text_frame.paragraphs[0]
            if tagged(start + j):
                a, w, b = split_word(x)
                for text, bold in ((a, False), (w, True), (b, False)):
                    run_ = p.add_run()
                    run_.text, run_.font.bold = text, bold or None
            else:
                p.add_run().text = x
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def read_pptx(data: bytes, n: int):
    texts, kept = [], []
    for slide in pptx.Presentation(io.BytesIO(data)).slides:
        for shape in slide.shapes:
            p = shape.text_frame.paragraphs[0]
            if tagged(len(texts)):
                kept.append(sum(1 for r in p.runs if r.font.bold and r.text.strip()) == 1)
            texts.append(shape.text_frame.text)
    return texts, kept


def odf_bold(doc) -> Style:
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    return bold


def odf_paragraph(x: str, i: int, bold: Style) -> P:
    if not tagged(i):
        return P(text=x)
    a, w, b = split_word(x)
    p = P(text=a)
    p.addElement(Span(stylename=bold, text=w))
    p.addText(b)
    return p


def odf_bytes(doc) -> bytes:
    out = io.BytesIO()
    doc.write(out)
    return out.getvalue()


def make_odt(s: list[str]) -> bytes:
    doc = OpenDocumentText()
    bold = odf_bold(doc)
    for i, x in enumerate(s):
        doc.text.addElement(odf_paragraph(x, i, bold))
    return odf_bytes(doc)


def make_odp(s: list[str]) -> bytes:
    doc = OpenDocumentPresentation()
    bold = odf_bold(doc)
    from odf.style import MasterPage, PageLayout

    layout = PageLayout(name="Layout")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    for start in range(0, len(s), 10):
        page = Page(masterpagename=master)
        for j, x in enumerate(s[start : start + 10]):
            frame = Frame(width="20cm", height="1.5cm", x="1cm", y=f"{1 + 1.7 * j}cm")
            box = TextBox()
            box.addElement(odf_paragraph(x, start + j, bold))
            frame.addElement(box)
            page.addElement(frame)
        doc.presentation.addElement(page)
    return odf_bytes(doc)


def read_odf(data: bytes, n: int):
    ps = [p for p in load(io.BytesIO(data)).body.getElementsByType(P)]
    texts = [teletype.extractText(p) for p in ps]
    kept = [len(p.getElementsByType(Span)) == 1 for i, p in enumerate(ps) if tagged(i)]
    return texts, kept


def make_epub(s: list[str]) -> bytes:
    book = epub.EpubBook()
    book.set_identifier("bench")
    book.set_title("Captions")
    book.set_language("en")
    chapters = []
    marked = with_tags(s, lambda i, w: f"<b>{w}</b>")
    for c, start in enumerate(range(0, len(s), 100)):
        chapter = epub.EpubHtml(title=f"Part {c + 1}", file_name=f"c{c}.xhtml", lang="en")
        body = [f"<p>{x}</p>" for x in marked[start : start + 100]]
        chapter.content = "".join(body)
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.spine = ["nav", *chapters]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()


def read_epub(data: bytes, n: int):
    texts, kept = [], []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = sorted(
            (x for x in archive.namelist() if re.search(r"/c\d+\.xhtml$", x)),
            key=lambda x: int(re.search(r"c(\d+)\.xhtml$", x)[1]),
        )
        for name in names:
            root = etree.fromstring(archive.read(name))
            for p in root.iter("{http://www.w3.org/1999/xhtml}p"):
                if tagged(len(texts)):
                    kept.append(len(p.findall("{http://www.w3.org/1999/xhtml}b")) == 1)
                texts.append("".join(p.itertext()))
    return texts, kept


def cue_pieces(x: str) -> list[str]:
    """A sentence cut at word boundaries into 2 cues (3 from 10 words)."""
    words = x.split()
    k = min(len(words), 3 if len(words) >= 10 else 2)
    cuts = [round(len(words) * j / k) for j in range(k + 1)]
    return [" ".join(words[cuts[j] : cuts[j + 1]]) for j in range(k)]


def subtitle_cues(s: list[str]) -> tuple[list[list[str]], list[int]]:
    cues, owners = [], []
    for i, x in enumerate(s):
        pieces = cue_pieces(x)
        if tagged(i):  # the first cue's second word in italics
            words = pieces[0].split(" ")
            if len(words) > 1:
                words[1] = f"<i>{words[1]}</i>"
                pieces[0] = " ".join(words)
        cues.append(pieces)
        owners.append(len(pieces))
    return cues, owners


def make_srt(s: list[str]) -> bytes:
    cues, _ = subtitle_cues(s)
    subs, t = [], 0.0
    for pieces in cues:
        for piece in pieces:
            start, end = timedelta(seconds=t), timedelta(seconds=t + 1.8)
            subs.append(srt.Subtitle(len(subs) + 1, start, end, piece))
            t += 2.0
    return srt.compose(subs).encode()


def stamp(seconds: float) -> str:
    h, rest = divmod(seconds, 3600)
    m, sec = divmod(rest, 60)
    return f"{int(h):02}:{int(m):02}:{sec:06.3f}"


def make_vtt(s: list[str]) -> bytes:
    cues, _ = subtitle_cues(s)
    out, t = ["WEBVTT", ""], 0.0
    for pieces in cues:
        for piece in pieces:
            out += [f"{stamp(t)} --> {stamp(t + 1.8)}", piece, ""]
            t += 2.0
    return "\n".join(out).encode()


def cue_texts(data: bytes, fmt: str) -> list[str]:
    if fmt == "srt":
        return [c.content for c in srt.parse(data.decode())]
    blocks = data.decode().split("\n\n")[1:]
    return ["\n".join(b.split("\n")[1:]) for b in blocks if "-->" in b]


def subtitle_reader(fmt: str, s: list[str]):
    _, owners = subtitle_cues(s)

    def read(data: bytes, n: int):
        cues, texts, kept, at = cue_texts(data, fmt), [], [], 0
        for i, count in enumerate(owners):
            joined = " ".join(" ".join(c.split()) for c in cues[at : at + count])
            joined = joined.replace("</i> <i>", " ")  # italics closed at a cue's end, reopened
            at += count
            if tagged(i):
                kept.append(joined.count("<i>") == 1 and joined.count("</i>") == 1)
            texts.append(joined)
        return texts, kept

    return read


def make_po(s: list[str]) -> bytes:
    catalogue = polib.POFile()
    catalogue.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for i, x in enumerate(s):
        text = f"{x} {PLACEHOLDER}" if holding(i) else x
        catalogue.append(polib.POEntry(msgid=text, msgstr="", occurrences=[("caps.py", str(i))]))
    return str(catalogue).encode()


def read_po(data: bytes, n: int):
    entries = [e for e in polib.pofile(data.decode()) if e.msgid]
    texts = [e.msgstr for e in entries]
    kept = [t.count(PLACEHOLDER) == 1 for i, t in enumerate(texts) if holding(i)]
    return texts, kept


def make_xliff(s: list[str]) -> bytes:
    units = []
    for i, x in enumerate(with_tags(s, lambda i, w: f'<g id="b{i}">{w}</g>')):
        if holding(i):
            x = f'{x} <x id="p{i}"/>'
        units.append(f'<trans-unit id="u{i}"><source>{x}</source></trans-unit>')
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="{X12}">'
        '<file original="caps" source-language="en" datatype="plaintext"><body>'
        + "".join(units)
        + "</body></file></xliff>"
    ).encode()


def read_xliff(data: bytes, n: int):
    root = etree.fromstring(data)
    texts, kept = [], []
    for i, unit in enumerate(root.iter(f"{{{X12}}}trans-unit")):
        target = unit.find(f"{{{X12}}}target")
        if tagged(i):
            kept.append(len(target.findall(f"{{{X12}}}g")) == 1)
        elif holding(i):
            kept.append(len(target.findall(f"{{{X12}}}x")) == 1)
        texts.append("".join(target.itertext()))
    return texts, kept


def layouts(s: list[str]) -> list[Layout]:
    return [
        Layout("text", "captions.txt", make_text, read_text),
        Layout("html", "captions.html", make_html, read_html),
        Layout("markdown", "captions.md", make_markdown, read_markdown),
        Layout("docx", "captions.docx", make_docx, read_docx),
        Layout("pptx", "captions.pptx", make_pptx, read_pptx),
        Layout("odt", "captions.odt", make_odt, read_odf),
        Layout("odp", "captions.odp", make_odp, read_odf),
        Layout("epub", "captions.epub", make_epub, read_epub),
        Layout("srt", "captions.srt", make_srt, subtitle_reader("srt", s)),
        Layout("vtt", "captions.vtt", make_vtt, subtitle_reader("vtt", s)),
        Layout("po", "captions.po", make_po, read_po),
        Layout("xliff", "captions.xlf", make_xliff, read_xliff),
    ]


# -- the run --------------------------------------------------------------------------------


def bare(text: str) -> str:
    """A sentence read back, without tags, placeholders or the spacing they leave."""
    return " ".join(TAGS.sub("", text).replace(PLACEHOLDER, "").split())


def bleu(outputs: list[str], references: list[str]) -> float:
    return sacrebleu.corpus_bleu([bare(o) for o in outputs], [references]).score


def each_side(engine, search, english: list[str], files: dict) -> list[Side]:
    """The plain lines, then every format's file, on `engine` with `search`."""
    translator = engine_translator(engine, Job(search=search), SentenceSplitter())
    n = len(english)

    def plain() -> Run:
        found = translate_texts(engine, english, search, "lines")
        return Run(n, None, [t.text for t in found])

    def through_file(fmt: str, name: str, data: bytes):
        def once() -> Run:
            job = Job(search=search, data=data, name=name, format=fmt)
            return Run(n, None, run(check(job, Limits.unbounded()), translator).data)

        return once

    sides = [Side("plain", "the sentences as lines, segment=lines", plain)]
    for fmt, (layout, data) in files.items():
        settings = f"{layout.name}, through its reader and writer"
        sides.append(Side(fmt, settings, through_file(fmt, layout.name, data)))
    return sides


def main() -> None:
    args = trained_model_args(__doc__)
    english, german = read_lines("test_2016_flickr.en"), read_lines("test_2016_flickr.de")
    n = len(english)
    files = {lay.fmt: (lay, lay.make(english)) for lay in layouts(english)}
    print(
        f"{n} sentences; " + ", ".join(f"{f} {len(d) // 1024} KiB" for f, (_, d) in files.items())
    )
    records = []
    for backend, engine, search in trained_engines(args):
        sides = each_side(engine, search, english, files)
        timings = alternate(sides, "sent/s", args.rounds, same_work=False)
        base = bleu(timings.outputs["plain"], german)
        print(f"  {backend} plain lines: BLEU {base:.2f}", flush=True)
        for fmt, (lay, _) in files.items():
            texts, kept = lay.read(timings.outputs[fmt], n)
            if len(texts) != n:
                raise SystemExit(f"{fmt}: {len(texts)} sentences read back, not {n}")
            score = bleu(texts, german)
            share = sum(kept) / len(kept) if kept else None
            ratio = timings.ratio(fmt, "plain", f"formats/{backend}/{fmt}_vs_plain")
            shown = f"{share:.1%} of {len(kept)}" if kept else "none marked"
            print(
                f"  {ratio.line()}  BLEU {score:.2f} ({score - base:+.2f}; target within 0.5)"
                f"  tags and placeholders kept: {shown}",
                flush=True,
            )
            records.append(ratio.record() | {"bleu": score, "bleu_plain": base, "kept": share})
    save_records(records, "formats")


if __name__ == "__main__":
    main()
