"""A user's own parallel text in one file: a TSV of source<TAB>target lines, or a TMX
translation memory (read with the standard library's `iterparse`, one unit at a time).

Each reader gives (sources, targets) and counts what it could not use; a file that is not
what it claims stops with one line naming the file and the line. TMX language codes match
loosely: en, en-US, EN_gb and eng-Latn are all English to `src_lang=en`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from xml.etree.ElementTree import ParseError, iterparse

from nmt.files import read_lines

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# ISO 639-2/3 codes a TMX may use for the languages people pair most with English
THREE_LETTERS = {"eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es"}


class DataFileError(ValueError):
    """A data file that is not what its name says; the message is one line."""


def language(code: str) -> str:
    """The base language of a code, lower case: en-US -> en, EN_gb -> en, eng -> en."""
    base = code.strip().replace("_", "-").split("-")[0].lower()
    return THREE_LETTERS.get(base, base)


def read_tsv(path: Path) -> tuple[list[str], list[str], Counter]:
    """source<TAB>target per line; an empty line is skipped (counted), any other line without
    exactly one tab is an error naming its line."""
    sources, targets, skipped = [], [], Counter()
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            skipped["empty line"] += 1
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataFileError(
                f"{path}:{number}: expected source<TAB>target, found {len(fields) - 1} tabs"
            )
        sources.append(fields[0])
        targets.append(fields[1])
    return sources, targets, skipped


def read_tmx(path: Path, src_lang: str, tgt_lang: str) -> tuple[list[str], list[str], Counter]:
    """Each <tu>'s segments in the two languages (their text, inline markup's own content
    such as <ph> left out); a unit without both is skipped (counted)."""
    sources, targets, skipped = [], [], Counter()
    want = {language(src_lang): "src", language(tgt_lang): "tgt"}
    body = None  # the units' parent: emptied after each, so the file is read in bounded memory
    try:
        for event, element in iterparse(path, events=("start", "end")):
            if event == "start":
                body = element if element.tag == "body" else body
                continue
            if element.tag != "tu":
                continue
            found = {}
            for variant in element.iter("tuv"):
                side = want.get(language(variant.get(XML_LANG) or variant.get("lang") or ""))
                segment = variant.find("seg")
                if side and segment is not None and side not in found:
                    found[side] = segment_text(segment)
            if len(found) == 2:
                sources.append(found["src"])
                targets.append(found["tgt"])
            else:
                skipped[f"unit without both {src_lang} and {tgt_lang}"] += 1
            element.clear()
            if body is not None:
                body.clear()
    except ParseError as error:
        line, column = error.position
        raise DataFileError(f"{path}:{line}: not well-formed TMX (column {column})") from None
    return sources, targets, skipped


CODES = {"bpt", "ept", "ph", "it", "ut", "sub"}  # hold the original format's codes, not text


def segment_text(element) -> str:
    """A <seg>'s text: its own, that of <hi> and other text-holding elements within, and what
    follows each inline element; never the content of CODES. Walked with a stack of its own,
    so markup nested however deep is read (a recursion ran out at a thousand levels)."""
    parts: list[str] = []
    todo: list = [element]  # elements to enter, and tails (str) to write, last first
    while todo:
        node = todo.pop()
        if isinstance(node, str):
            parts.append(node)
            continue
        parts.append(node.text or "")
        for child in reversed(node):
            todo.append(child.tail or "")
            if child.tag not in CODES:
                todo.append(child)
    return "".join(parts)


def read_pair_file(path: Path, src_lang: str, tgt_lang: str):
    """A .tsv or .tmx file (by its suffix) -> (sources, targets, skipped counts)."""
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".tsv":
        return read_tsv(path)
    if suffix == ".tmx":
        return read_tmx(path, src_lang, tgt_lang)
    raise DataFileError(
        f"{path}: a split given as one file must be .tsv or .tmx (or give a pair of text "
        "files per split: data.data_files.SPLIT.LANG=PATH)"
    )
