"""format=po: a gettext catalogue (.po, or a template .pot) with its messages translated.

Read and written with polib, which gives a catalogue back byte for byte when nothing is
changed. Every message that is not fuzzy, not obsolete and not yet translated (or, with
`retranslate=true`, translated already) is filled: `msgstr` from `msgid`, and for a plural
message `msgstr[0]` from `msgid` and every other form from `msgid_plural` (German has two:
nplurals=2; plural=(n != 1), set where the header has no rule, as a template's has not). A
fuzzy or obsolete message is left as it is, a translated one unless asked, and so is the
header but for what a template leaves unset (Language, Plural-Forms, the
charset). Each message's placeholders (`%s`, `%1$d`, `%(name)s`, `{count}`, `{{x}}`) are
points the model never reads, put back byte for byte where the words beside them went
(nmt.documents.inline), and its tags are carried as HTML's are. A message whose
placeholders come out in another order than its source's, where a format string needs that
order (printf's `%s` without a position), or a Python format's singular form without the
placeholders of its plural (which msgfmt holds every form to), is marked fuzzy, so that
`msgfmt` neither uses nor rejects it and a translator sees it. Each message keeps its
source's leading and trailing whitespace and line breaks, which `msgfmt --check` wants
alike.
"""

from __future__ import annotations

import re

import polib

from nmt.documents.inline import escaped, flat
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.text_file import decode_utf8
from nmt.errors import JobError
from nmt.written_numbers import PLACEHOLDERS

GERMAN_PLURALS = "nplurals=2; plural=(n != 1);"
UNORDERED = re.compile(r"%(?!\d+\$)[-+0#' ]*[\d*]*(?:\.[\d*]+)?[a-zA-Z]")  # printf, no position
EDGES = re.compile(r"^(\s*)(.*?)(\s*)$", re.DOTALL)


def todo(entry: polib.POEntry, retranslate: bool = False) -> bool:
    """A message to translate: not the header, obsolete, fuzzy, or (unless `retranslate`)
    translated already."""
    done = not retranslate and (entry.msgstr or any(entry.msgstr_plural.values()))
    return bool(entry.msgid) and not (entry.obsolete or entry.fuzzy or done)


def forms(catalogue: polib.POFile) -> int:
    """How many plural forms the header's rule has (setting German's where it has none)."""
    rule = catalogue.metadata.get("Plural-Forms", "")
    found = re.search(r"nplurals\s*=\s*(\d+)", rule)
    if not found:
        catalogue.metadata["Plural-Forms"] = GERMAN_PLURALS
        return 2
    return max(int(found[1]), 1)


def with_edges(source: str, translated: str) -> str:
    """`translated` with `source`'s leading and trailing whitespace (line breaks too)."""
    lead, _, trail = EDGES.match(source).groups()
    return lead + translated.strip() + trail if translated.strip() else source


def out_of_order(source: str, translated: str) -> bool:
    """Whether placeholders that need their order (printf's, with no position) moved."""
    return UNORDERED.findall(source) != UNORDERED.findall(translated)


def held(text: str) -> list[str]:
    return sorted(PLACEHOLDERS.findall(text))


def read_file(data: bytes, name: str, limits, retranslate: bool = False) -> Parsed:
    """A catalogue's messages to translate, with `retranslate` the translated ones too (at
    most max_file_segments msgids, counted before polib reads it); JobError 422 for a file
    polib cannot read."""
    text = decode_utf8(data, name)
    if (found := text.count("msgid")) > limits.max_file_segments:
        raise JobError(
            413, f"{found} messages: the limit is max_file_segments={limits.max_file_segments}"
        )
    # polib reads its argument as a path when a file of that name exists: a catalogue of
    # one line could name one of the server's files; no path holds a line break
    text = text if "\n" in text else text + "\n"
    try:
        catalogue = polib.pofile(text, wrapwidth=78)
    except (OSError, ValueError) as error:
        line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise JobError(422, f"{name or 'the file'}: not a gettext catalogue ({line})") from None
    entries = [e for e in catalogue if todo(e, retranslate)]
    sources = [
        s for e in entries for s in ([e.msgid, e.msgid_plural] if e.msgid_plural else [e.msgid])
    ]
    fragments = [escaped(EDGES.match(s)[2], PLACEHOLDERS, markup=True) for s in sources]

    def write(pages: list[str]) -> bytes:
        translated = iter(with_edges(s, flat(p)) for s, p in zip(sources, pages, strict=True))
        if entries:
            count = forms(catalogue)
            if not catalogue.metadata.get("Language"):
                catalogue.metadata["Language"] = "de"
            kind = catalogue.metadata.get("Content-Type", "")
            if "charset=CHARSET" in kind:
                catalogue.metadata["Content-Type"] = kind.replace("CHARSET", "UTF-8")
        for entry in entries:
            single = next(translated)
            moved = out_of_order(entry.msgid, single)
            if entry.msgid_plural:
                plural = next(translated)
                moved = moved or out_of_order(entry.msgid_plural, plural)
                # msgfmt holds every form of a Python format to msgid_plural's placeholders
                # (a C format's singular may drop its %d): a singular without them is fuzzy
                strict = any(flag.startswith("python") for flag in entry.flags)
                moved = moved or (strict and held(single) != held(entry.msgid_plural))
                entry.msgstr_plural = {0: single} | {k: plural for k in range(1, count)}
            else:
                entry.msgstr = single
            if moved:
                entry.flags.append("fuzzy")
        return str(catalogue).encode()

    return fragment_file(fragments, name, limits.max_file_tags, write)
