"""An XML element's mixed content as the HTML fragment nmt.documents.markup translates, and
the translated fragment back into the element: for formats read with lxml (XLIFF,
OpenDocument). Paired codes (a span, a link) become elements carried onto the words they
hold, written with the prefixes the file uses; every other child is a point, its XML kept
byte for byte; the text's placeholders are points too (nmt.documents.inline).

The parser reads no DTD, resolves no entity and fetches nothing.
"""

from __future__ import annotations

import html
import re

from lxml import etree

from nmt.documents.inline import escaped, flat, kept

PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
DECLARATIONS = re.compile(r'\s+xmlns(:[\w.-]+)?="[^"]*"')


def local(element: etree._Element) -> str:
    """An element's name without its namespace ("" for a comment or an instruction)."""
    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def written_name(element: etree._Element, name: str) -> str:
    """`name` ("{uri}local" or "local") with the prefix the element's file gives its uri."""
    qname = etree.QName(name)
    prefixes = {uri: prefix for prefix, uri in element.nsmap.items()}
    prefix = prefixes.get(qname.namespace) if qname.namespace else None
    return f"{prefix}:{qname.localname}" if prefix else qname.localname


def point(element: etree._Element, space: bool = False) -> str:
    """A child as a point: its XML as the file has it, without the namespace declarations
    lxml adds to a piece serialized alone; with `space`, read as a space (inline.kept)."""
    raw = etree.tostring(element, encoding="unicode", with_tail=False)
    start_end = raw.find(">")
    return kept(html.escape(DECLARATIONS.sub("", raw[:start_end]) + raw[start_end:]), space)


def between_words(element: etree._Element, before: str) -> bool:
    """Whether a child stands between two words with no space of its own: the text `before`
    it and its tail each end and start with a character that is not whitespace."""
    after = element.tail or ""
    return bool(before) and not before[-1].isspace() and bool(after) and not after[0].isspace()


def fragment(element: etree._Element, paired: set[str], spacing: frozenset = frozenset()) -> str:
    """The element's content as a fragment; `paired`: the local names of codes around words;
    `spacing`: those of codes that make a space (a tab), read as one between two words."""
    out = [escaped(element.text or "")]
    for child in element:
        if isinstance(child.tag, str) and local(child) in paired:
            name = written_name(child, child.tag)
            attributes = "".join(
                f' {written_name(child, k)}="{html.escape(v)}"' for k, v in child.attrib.items()
            )
            out.append(f"<{name}{attributes}>{fragment(child, paired, spacing)}</{name}>")
        else:
            before = next(filter(None, reversed(out)), "")  # the last text or tag written
            space = local(child) in spacing and between_words(child, before)
            out.append(point(child, space))
        out.append(escaped(child.tail or ""))
    return "".join(out)


def code_names(elements: list[etree._Element], paired: set[str]) -> frozenset[str]:
    """The names the fragments of `elements` write their paired codes under (the file's
    prefixes: "text:span"), for nmt.documents.markup to read them as inline."""
    return frozenset(
        written_name(e, e.tag)
        for element in elements
        for e in element.iter()
        if e is not element and isinstance(e.tag, str) and local(e) in paired
    )


def refill(element: etree._Element, page: str) -> None:
    """The element's content replaced by a translated fragment (its attributes and tail
    kept), parsed under the namespaces the element's file declares."""
    declared = "".join(
        f' xmlns{":" + prefix if prefix else ""}="{uri}"' for prefix, uri in element.nsmap.items()
    )
    holder = etree.fromstring(f"<holder{declared}>{flat(page, unescape=False)}</holder>", PARSER)
    for child in list(element):
        element.remove(child)
    element.text = holder.text
    for child in holder:
        element.append(child)
