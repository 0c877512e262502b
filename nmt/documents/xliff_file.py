"""format=xliff: an XLIFF 1.2 or 2.x file with its untranslated segments translated.

Read and written with lxml (python-docx's and python-pptx's XML library), which keeps the
file's namespaces, prefixes and everything we do not touch as they were. A DOCTYPE or an
entity declaration is refused before parsing, and the parser reads no DTD, resolves no
entity and fetches nothing (nmt.documents.xml_inline). XLIFF 1.2: each `trans-unit` (not
`translate="no"`) whose `target` is missing or empty gets one,
`state="needs-review-translation"` with `state-qualifier="mt-suggestion"`, and its `file` a
`target-language` where it has none.
XLIFF 2.x: each `segment` of a unit (not `translate="no"`) with no or an empty `target`, its
state `translated` unless the file's own says more; the root a `trgLang` where it has none.
A target already written is kept, unless `retranslate=true`: then it is translated again,
its 1.2 state as a new target's, its 2.x segment's `translated` (or `initial`).

Inline codes: paired ones (1.2 `g` and `mrk`, 2.x `pc` and `mrk`) are carried like HTML's
inline tags, onto the words they hold; standalone ones (1.2 `x`, `bx`, `ex`, `ph`, `bpt`,
`ept`, `it`; 2.x `ph`, `sc`, `ec`, `cp`) and the text's format placeholders (`%s`,
`{count}`) are points put back byte for byte (nmt.documents.inline). A target whose codes
are not its source's (by count of each) is marked for review (1.2 `state="needs-review-
translation"` without the qualifier; 2.x `state="initial"`), so a tool does not take it.
"""

from __future__ import annotations

import re
from collections import Counter

from lxml import etree

from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.text_file import decode_utf8
from nmt.documents.xml_inline import PARSER, code_names, fragment, local, refill
from nmt.errors import JobError

NAMESPACES = {
    "urn:oasis:names:tc:xliff:document:1.2": "1.2",
    "urn:oasis:names:tc:xliff:document:2.0": "2",
    "urn:oasis:names:tc:xliff:document:2.1": "2",
    "urn:oasis:names:tc:xliff:document:2.2": "2",
}
PAIRED_CODES = {"g", "mrk", "pc"}  # codes around words
DECLARATION = re.compile(rb"<!(DOCTYPE|ENTITY)", re.IGNORECASE)


def codes(element: etree._Element) -> Counter:
    """The inline codes under an element, by name and id."""
    return Counter((local(e), e.get("id")) for e in element.iter() if e is not element)


def parse_file(data: bytes, name: str, limits) -> etree._ElementTree:
    """The file's tree, or JobError: 413 over max_file_segments sources (counted before
    parsing), 422 a declaration, not XML, or not XLIFF."""
    decode_utf8(data, name)  # one line naming the byte where the text is not UTF-8
    if DECLARATION.search(data):
        raise JobError(422, f"{name or 'the file'}: a DOCTYPE or entity declaration is refused")
    if (found := data.count(b"<source")) > limits.max_file_segments:
        raise JobError(
            413, f"{found} segments: the limit is max_file_segments={limits.max_file_segments}"
        )
    try:
        tree = etree.ElementTree(etree.fromstring(data, PARSER))
    except etree.XMLSyntaxError as error:
        raise JobError(422, f"{name or 'the file'}: not XML ({error})") from None
    if etree.QName(tree.getroot()).namespace not in NAMESPACES or local(tree.getroot()) != "xliff":
        raise JobError(422, f"{name or 'the file'}: not XLIFF 1.2 or 2.x")
    return tree


def todo(
    tree: etree._ElementTree, retranslate: bool = False
) -> list[tuple[etree._Element, etree._Element]]:
    """(the element a target goes into, its source) for every source still to translate,
    with `retranslate` those translated already too."""
    namespace = etree.QName(tree.getroot()).namespace
    ns = {"x": namespace}
    holders = "//x:trans-unit" if NAMESPACES[namespace] == "1.2" else "//x:unit/x:segment"
    found = []
    for holder in tree.xpath(holders, namespaces=ns):
        unit = holder if NAMESPACES[namespace] == "1.2" else holder.getparent()
        source, target = holder.find("x:source", ns), holder.find("x:target", ns)
        done = target is not None and (len(target) or (target.text or "").strip())
        if source is not None and unit.get("translate") != "no" and (retranslate or not done):
            found.append((holder, source))
    return found


def put_target(holder: etree._Element, source: etree._Element, page: str, v1: bool) -> None:
    """The translated fragment as the holder's target, after its source (in place of the
    target it had), and its state."""
    # made under the holder, so that it has the file's namespaces, then placed after the source
    target = etree.SubElement(holder, f"{{{etree.QName(source).namespace}}}target")
    holder.remove(target)
    refill(target, page)
    old = holder.find(target.tag)
    replaced = old is not None and bool(len(old) or (old.text or "").strip())
    if old is not None:
        kept = {k: v for k, v in old.attrib.items() if k not in ("state", "state-qualifier")}
        target.attrib.update(kept)
        holder.remove(old)
    target.tail = source.tail
    source.addnext(target)
    same = codes(source) == codes(target)
    if v1:
        target.set("state", "needs-review-translation")
        if same:
            target.set("state-qualifier", "mt-suggestion")
    elif not same or replaced or holder.get("state") is None:
        holder.set("state", "translated" if same else "initial")


def read_file(data: bytes, name: str, limits, retranslate: bool = False) -> Parsed:
    """An XLIFF file's sources still to translate (with `retranslate`, those translated
    already too), each one segment of HTML fragment."""
    tree = parse_file(data, name, limits)
    root = tree.getroot()
    v1 = NAMESPACES[etree.QName(root).namespace] == "1.2"
    units = todo(tree, retranslate)

    def write(pages: list[str]) -> bytes:
        for (holder, source), page in zip(units, pages, strict=True):
            put_target(holder, source, page, v1)
        if units and v1:
            for file in root.iter(f"{{{etree.QName(root).namespace}}}file"):
                if file.get("target-language") is None:
                    file.set("target-language", "de")
        elif units and root.get("trgLang") is None:
            root.set("trgLang", "de")
        return etree.tostring(tree, xml_declaration=True, encoding="UTF-8")

    fragments = [fragment(s, PAIRED_CODES) for _, s in units]
    codes = code_names([s for _, s in units], PAIRED_CODES)
    return fragment_file(fragments, name, limits.max_file_tags, write, codes)
