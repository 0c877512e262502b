"""POST /translate_file: a .txt, .md, .html/.htm or .docx file in (multipart, field `file`,
optional field `segment`), the same kind of file out, translated.

The route is a client of the server's own POST /translate (loopback.py): a text file's
lines, or the plain text of an HTML or Word file's segments (nmt.documents.markup,
docx_file, with alignments to place tags and runs), go there in requests of at most
max_lines texts, sent at once so they share batches with everyone's; the file is put back
together here. So a file is translated exactly as its texts would be, under the same
limits and queue. Refused in one line: a type we do not read (415), a file over
max_file_bytes or with more than max_file_segments segments, or a segment over
max_line_chars (413), a file that cannot be read (422). Nothing is sent back until the whole
file is translated.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, File, Form, HTTPException, UploadFile
from fastapi.responses import Response

from nmt.config import ServeConfig
from nmt.documents import FILE_FORMATS
from nmt.documents.docx_file import DocxError, translate_word_file
from nmt.documents.markup import translate_pages
from nmt.documents.translation import Translation
from nmt.inference.alignment import parse_pharaoh
from nmt.serving.loopback import post_translate

MEDIA = {
    "text": "text/plain; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


class Remote:
    """Texts to Translations through the server's own /translate (see the module docstring)."""

    def __init__(self, cfg: ServeConfig, segment: str | None, internal: str):
        self.cfg, self.segment, self.internal = cfg, segment, internal
        self.sent = 0  # segments, for max_file_segments

    def post(self, texts: list[str], alignments: bool) -> dict:
        body = {"text": texts, "alignments": alignments, "format": "text"}
        if self.segment:
            body["segment"] = self.segment
        return post_translate(self.cfg, body, self.internal)

    def translate(self, texts: list[str], alignments: bool = False) -> list[dict]:
        """One answer per text: {"translation", "alignments"}."""
        self.sent += len(texts)
        if self.sent > self.cfg.max_file_segments:
            raise HTTPException(
                413,
                f"more than {self.cfg.max_file_segments} segments: the limit is "
                f"max_file_segments={self.cfg.max_file_segments}",
            )
        for i, text in enumerate(texts):
            if len(text) > self.cfg.max_line_chars:
                raise HTTPException(
                    413,
                    f"segment {i + 1} has {len(text)} characters: the limit is "
                    f"max_line_chars={self.cfg.max_line_chars}",
                )
        step = self.cfg.max_lines
        chunks = [texts[i : i + step] for i in range(0, len(texts), step)]
        with ThreadPoolExecutor(max(1, min(len(chunks), 16))) as pool:
            replies = list(pool.map(lambda chunk: self.post(chunk, alignments), chunks))
        answers = []
        for reply in replies:
            links = reply.get("alignments") or [""] * len(reply["translation"])
            answers += [
                {"translation": t, "alignments": a}
                for t, a in zip(reply["translation"], links, strict=True)
            ]
        return answers

    def segments(self, texts: list[str], numbers: list[int]) -> list[Translation]:
        """translate_pages' translator: each plain text's Translation with its alignment."""
        found = []
        for text, answer in zip(texts, self.translate(texts, alignments=True), strict=True):
            pairs = parse_pharaoh(answer["alignments"])
            found.append(
                Translation(text, alternatives=[(answer["translation"], 0.0)], alignments=[pairs])
            )
        return found


# where str.splitlines breaks a line: a form feed or U+2028 too, not only "\n" and "\r"
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def translate_text_file(remote: Remote, data: bytes) -> bytes:
    """Line by line, each line's ending kept; a blank line stays blank."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HTTPException(422, f"the file is not UTF-8 (byte {error.start})") from None
    lines = text.splitlines(keepends=True)
    bodies = [line.rstrip(LINE_BREAKS) for line in lines]  # each line's break kept apart
    todo = [i for i, body in enumerate(bodies) if body.strip()]
    answers = remote.translate([bodies[i] for i in todo]) if todo else []
    out = ["" if body.strip() else body for body in bodies]
    for i, answer in zip(todo, answers, strict=True):
        out[i] = answer["translation"]
    return "".join(
        o + line[len(body) :] for o, line, body in zip(out, lines, bodies, strict=True)
    ).encode()


def add_file_route(app: FastAPI, cfg: ServeConfig, target_lang: str, internal: str) -> None:
    @app.post("/translate_file")
    def translate_file(
        file: Annotated[UploadFile, File(description="A .txt, .md, .html, .htm or .docx file")],
        segment: Annotated[str | None, Form(description="sentences or lines")] = None,
    ) -> Response:
        """The file, translated: the same type, its shape, tags or formatting kept."""
        name = file.filename or ""
        suffix = Path(name).suffix.lower()
        if suffix not in FILE_FORMATS:
            raise HTTPException(
                415, f"unsupported file type {suffix or '(none)'!r}: send {', '.join(FILE_FORMATS)}"
            )
        if segment not in (None, "sentences", "lines"):
            raise HTTPException(422, f"segment: sentences or lines, not {segment!r}")
        data = file.file.read(cfg.max_file_bytes + 1)
        if len(data) > cfg.max_file_bytes:
            raise HTTPException(
                413, f"the file is over the limit of max_file_bytes={cfg.max_file_bytes}"
            )
        kind, remote = FILE_FORMATS[suffix], Remote(cfg, segment, internal)
        if kind == "text":
            out = translate_text_file(remote, data)
        elif kind == "html":
            try:
                page = data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise HTTPException(422, f"the file is not UTF-8 (byte {error.start})") from None
            out = translate_pages(remote.segments, [page])[0].text.encode()
        else:

            def pages(fragments: list[str]) -> list[str]:
                return [t.text for t in translate_pages(remote.segments, fragments)]

            try:
                out = translate_word_file(data, pages)
            except DocxError as error:
                raise HTTPException(422, str(error)) from None
        stem = "".join(c for c in Path(name).stem if c.isalnum() or c in "-_.") or "translation"
        disposition = f'attachment; filename="{stem}.{target_lang}{suffix}"'
        return Response(out, media_type=MEDIA[kind], headers={"Content-Disposition": disposition})
