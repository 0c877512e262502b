"""Software messages from a package's German gettext catalogs (`de/LC_MESSAGES/*.mo`).

Each translated message is a pair (msgid, msgstr); a plural message gives two, its singular
with msgstr[0] and its plural with msgstr[1] (German's two forms). A message of several lines
gives a pair per line where both sides have as many, none otherwise (the lines of a usage
text are translated one by one, but a reflowed paragraph cannot be paired). A mnemonic's
underscore (`_Open`, `Ö_ffnen`) is dropped where each side has exactly one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import polib

CATALOGS = "usr/share/locale/de/LC_MESSAGES/*.mo"  # inside the package
MNEMONIC = re.compile(r"_(?=\w)")


def messages(root: Path) -> Iterator[tuple[str, str]]:
    """(English, German) for every line of every translated message in the package."""
    for path in sorted(root.glob(CATALOGS)):
        for entry in polib.mofile(str(path)):
            for en, de in entry_pairs(entry):
                yield from line_pairs(en, de)


def entry_pairs(entry: polib.MOEntry) -> list[tuple[str, str]]:
    """A message's singular and, for a plural one, its plural, each with its translation."""
    if not entry.msgid:  # the header
        return []
    if entry.msgid_plural:
        forms = entry.msgstr_plural
        pairs = [(entry.msgid, forms.get(0, "")), (entry.msgid_plural, forms.get(1, ""))]
    else:
        pairs = [(entry.msgid, entry.msgstr)]
    return [(en, de) for en, de in pairs if de]


def line_pairs(en: str, de: str) -> list[tuple[str, str]]:
    """A message's lines paired, each stripped, mnemonics dropped; none if the counts differ."""
    ens, des = en.split("\n"), de.split("\n")
    if len(ens) != len(des):
        return []
    return [without_mnemonic(e.strip(), d.strip()) for e, d in zip(ens, des, strict=True)]


def without_mnemonic(en: str, de: str) -> tuple[str, str]:
    """A menu label's access key marker gone, where each side has exactly one."""
    if len(MNEMONIC.findall(en)) == 1 and len(MNEMONIC.findall(de)) == 1 and en.count("_") == 1:
        return MNEMONIC.sub("", en), MNEMONIC.sub("", de)
    return en, de
