"""The file formats, one entry each: what the CLI, POST /translate_file, the LibreTranslate
routes, the page and /info all read. Adding a format is one entry here and its module.

An entry names its suffixes and media type, and its module's readers as "module:function",
imported when first called: one of a file's bytes and, for a format a request's texts may be
in, one of texts (`Format.read_file`, `Format.read_texts` call them). A reader bounds what only
its format has (a zip's inflated size, a Word file's runs, an HTML page's tags, each before
parsing), for a file that holds translations (gettext, XLIFF) whether to translate those
again, and gives a `Parsed`: the segments to translate and how to put their translations
back. nmt.jobs.check bounds what all formats share (bytes, segments, characters, words and
tags per segment, the search's cost). Plain texts (format text, not a file) need no reader:
each text is a segment and its Translation is the answer.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from nmt.documents.parsed import Parsed
from nmt.errors import JobError


@dataclass(frozen=True)
class Format:
    name: str
    suffixes: tuple[str, ...]
    media_type: str
    # the readers as "module:function" in nmt.documents, imported when first called: a
    # command or model worker that reads no Word file loads no Word library (~0.25 s a start)
    file_reader: str  # (data, name, limits) -> Parsed
    texts_reader: str | None = None  # (texts, name, limits) -> Parsed; None: files only
    # a file that holds translations of its own: read_file also takes `retranslate`, to
    # translate again what the file has translated (else kept)
    holds_translations: bool = False

    def read_file(self, data: bytes, name: str, limits, **options) -> Parsed:
        return loaded_reader(self.file_reader)(data, name, limits, **options)

    def read_texts(self, texts: list[str], name: str, limits) -> Parsed:
        return loaded_reader(self.texts_reader)(texts, name, limits)


def loaded_reader(where: str):
    """The reader `where` names ("module:function" in nmt.documents), its module imported."""
    module, function = where.split(":")
    return getattr(importlib.import_module(f"nmt.documents.{module}"), function)


WORD_MEDIA = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
SLIDES_MEDIA = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ODT_MEDIA, ODP_MEDIA = (
    f"application/vnd.oasis.opendocument.{kind}" for kind in ("text", "presentation")
)
FORMATS = {
    f.name: f
    for f in (
        Format("text", (".txt",), "text/plain; charset=utf-8", "text_file:read_file"),
        Format(
            "markdown",
            (".md", ".markdown"),
            "text/markdown; charset=utf-8",
            "markdown_file:read_file",
        ),
        Format(
            "html",
            (".html", ".htm"),
            "text/html; charset=utf-8",
            "markup:read_file",
            "markup:read_texts",
        ),
        Format("docx", (".docx",), WORD_MEDIA, "docx_file:read_file"),
        Format("pptx", (".pptx",), SLIDES_MEDIA, "pptx_file:read_file"),
        Format("srt", (".srt",), "application/x-subrip; charset=utf-8", "subtitles:read_srt"),
        Format("vtt", (".vtt",), "text/vtt; charset=utf-8", "subtitles:read_vtt"),
        Format("odt", (".odt",), ODT_MEDIA, "odf_file:read_text"),
        Format("odp", (".odp",), ODP_MEDIA, "odf_file:read_presentation"),
        Format("epub", (".epub",), "application/epub+zip", "epub_file:read_file"),
        Format(
            "po",
            (".po", ".pot"),
            "text/x-gettext-translation; charset=utf-8",
            "gettext_file:read_file",
            holds_translations=True,
        ),
        Format(
            "xliff",
            (".xlf", ".xliff"),
            "application/xliff+xml",
            "xliff_file:read_file",
            holds_translations=True,
        ),
    )
}
# what a request's texts may be: plain text, or a format with a reader of texts
TEXT_FORMATS = tuple(n for n, f in FORMATS.items() if n == "text" or f.texts_reader is not None)
SUFFIXES = {suffix: f.name for f in FORMATS.values() for suffix in f.suffixes}


def named(name: str) -> Format:
    """The format `name`; JobError 422 for one we do not have."""
    if name not in FORMATS:
        raise JobError(422, f"format must be one of {', '.join(FORMATS)}, not {name!r}")
    return FORMATS[name]


def of_file(name: str) -> Format:
    """The format of a file `name`, by its suffix; JobError 415 for a suffix we do not read."""
    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise JobError(
            415, f"unsupported file type {suffix or '(none)'!r}: send {', '.join(SUFFIXES)}"
        )
    return FORMATS[SUFFIXES[suffix]]
