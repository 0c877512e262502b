"""XLIFF 1.2 and 2.x (nmt.documents.xliff_file): real sentences filled in, inline codes and
placeholders kept, what is done or not to translate left alone; translate-toolkit, a library
made for the format, reads the result; hostile files refused in one line."""

from __future__ import annotations

import pytest
from conftest import document_result, reversed_translator, stand_in, uppercase_translator
from lxml import etree
from translate.storage import xliff, xliff2

from nmt.errors import JobError
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits

V1 = "urn:oasis:names:tc:xliff:document:1.2"
V2 = "urn:oasis:names:tc:xliff:document:2.0"


def v1_file(s: list[str]) -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="{V1}">
  <file original="app" source-language="en" datatype="plaintext">
    <body>
      <trans-unit id="plain"><source>{s[0]}</source></trans-unit>
      <trans-unit id="codes"><source><g id="1">{s[1]}</g> said %s<x id="2"/> twice.</source>
      </trans-unit>
      <trans-unit id="done"><source>{s[2]}</source><target>Schon übersetzt.</target></trans-unit>
      <trans-unit id="no" translate="no"><source>{s[3]}</source></trans-unit>
      <trans-unit id="empty"><source>{s[4]} &amp; more</source><target/></trans-unit>
    </body>
  </file>
</xliff>
""".encode()


def v2_file(s: list[str]) -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="{V2}" srcLang="en">
  <file id="f1">
    <unit id="u1"><segment><source>{s[0]}</source></segment></unit>
    <unit id="u2"><segment>
      <source><pc id="1">{s[1]}</pc> at {{count}}<ph id="2"/>.</source></segment>
    </unit>
    <unit id="u3"><segment state="final">
      <source>{s[2]}</source><target>Fertig.</target></segment></unit>
    <unit id="u4" translate="no"><segment><source>{s[3]}</source></segment></unit>
  </file>
</xliff>
""".encode()


def translated(data: bytes, name: str, translate=uppercase_translator, **options) -> bytes:
    return document_result(stand_in(translate), "xliff", data=data, name=name, **options).data


def units(data: bytes, version: str) -> dict[str, etree._Element]:
    root = etree.fromstring(data)
    tag = "trans-unit" if version == V1 else "unit"
    return {u.get("id"): u for u in root.iter(f"{{{version}}}{tag}")}


def text_of(element) -> str:
    return "".join(element.itertext())


def test_xliff_1_2_fills_what_is_to_do_with_its_codes_and_keeps_the_rest(overfit_pairs):
    s = [x.rstrip(".") for x in overfit_pairs[0][:5]]
    out = translated(v1_file(s), "app.xlf")
    found = units(out, V1)
    target = {k: u.find(f"{{{V1}}}target") for k, u in found.items()}
    assert text_of(target["plain"]) == s[0].upper()
    codes = target["codes"]
    assert [(etree.QName(c).localname, c.get("id")) for c in codes] == [("g", "1"), ("x", "2")]
    assert codes[0].text == s[1].upper()
    # the placeholder as it was, glued to the code after it as in the source (`%s<x/>`)
    assert (codes[0].tail, codes[1].tail) == (" SAID %s", " TWICE.")
    assert codes.get("state") == "needs-review-translation"
    assert codes.get("state-qualifier") == "mt-suggestion"
    assert text_of(target["done"]) == "Schon übersetzt."  # a translation there is kept
    assert target["no"] is None  # translate="no"
    assert text_of(target["empty"]) == f"{s[4].upper()} & MORE"
    assert etree.fromstring(out).find(f"{{{V1}}}file").get("target-language") == "de"
    # the format's own library reads every target back
    store = xliff.xlifffile(out)
    read = {u.getid().split("\x04")[-1]: u.target for u in store.units}
    assert read["plain"] == s[0].upper() and read["done"] == "Schon übersetzt."


def test_xliff_2_fills_segments_keeps_codes_and_final_ones(overfit_pairs):
    s = [x.rstrip(".") for x in overfit_pairs[0][5:9]]
    out = translated(v2_file(s), "app.xliff")
    found = units(out, V2)
    segment = {k: u.find(f"{{{V2}}}segment") for k, u in found.items()}
    target = {k: seg.find(f"{{{V2}}}target") for k, seg in segment.items()}
    assert text_of(target["u1"]) == s[0].upper() and segment["u1"].get("state") == "translated"
    assert [(etree.QName(c).localname, c.get("id")) for c in target["u2"]] == [
        ("pc", "1"),
        ("ph", "2"),
    ]
    assert (target["u2"][0].tail, target["u2"][1].tail) == (" AT {count}", ".")  # `{count}<ph/>.`
    assert text_of(target["u3"]) == "Fertig." and segment["u3"].get("state") == "final"
    assert target["u4"] is None
    assert etree.fromstring(out).get("trgLang") == "de"
    store = xliff2.Xliff2File(out)
    assert s[0].upper() in [u.target for u in store.units]


def test_a_source_is_read_whole_through_its_paired_codes(overfit_pairs):
    """`<g>` (1.2) and `<pc>` (2.x) are inline, as HTML's tags are: the model reads the
    source's words in and around them as one text, not each piece alone."""
    s = [x.rstrip(".") for x in overfit_pairs[0][:9]]
    for data, name, whole in [
        (v1_file(s[:5]), "app.xlf", f"{s[1]} said twice."),
        (v2_file(s[5:9]), "app.xliff", f"{s[6]} at ."),
    ]:
        seen: list[str] = []

        def spy(texts, numbers, seen=seen):
            seen.extend(texts)
            return uppercase_translator(texts, numbers)

        translated(data, name, spy)
        assert whole in [" ".join(t.split()) for t in seen], seen


@pytest.mark.parametrize("version", ["1.2", "2"])
def test_retranslate_translates_the_targets_a_file_has_again(overfit_pairs, version):
    """retranslate=true: a target already written is replaced by the new translation, in
    its place, with a machine translation's state (not the "final" it had); translate="no"
    still is not."""
    s = [x.rstrip(".") for x in overfit_pairs[0][:5]]
    v1 = version == "1.2"
    data, name, ns = (v1_file(s), "app.xlf", V1) if v1 else (v2_file(s), "a.xliff", V2)
    done = "done" if version == "1.2" else "u3"
    out = translated(data, name, retranslate=True)
    unit = units(out, ns)[done]
    holder = unit if version == "1.2" else unit.find(f"{{{ns}}}segment")
    targets = holder.findall(f"{{{ns}}}target")
    assert len(targets) == 1 and text_of(targets[0]) == s[2].upper()
    assert etree.QName(targets[0].getprevious()).localname == "source"
    if version == "1.2":
        assert targets[0].get("state") == "needs-review-translation"
    else:
        assert holder.get("state") == "translated"
    no = units(out, ns)["no" if version == "1.2" else "u4"]
    assert not list(no.iter(f"{{{ns}}}target"))
    # without it, the same file keeps its translation (the tests above), so two runs differ
    assert translated(data, name) != out


def test_codes_the_alignment_cannot_place_alike_mark_the_target_for_review(overfit_pairs):
    """A crossing alignment still gives a target that parses, every code once."""
    s = [x.rstrip(".") for x in overfit_pairs[0][:5]]
    out = translated(v1_file(s), "app.xlf", reversed_translator)
    codes = units(out, V1)["codes"].find(f"{{{V1}}}target")
    assert sorted(etree.QName(c).localname for c in codes.iter() if c is not codes) == ["g", "x"]


@pytest.mark.parametrize(
    "data, status, words",
    [
        (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><xliff/>', 422, "declaration"),
        (b"<xliff version='1.2'><file>", 422, "not XML"),
        (b"<html><body>hi</body></html>", 422, "not XLIFF"),
        (b"\xff\xfe<xliff/>", 422, "UTF-8"),
        (f'<xliff xmlns="{V1}">{"<source>a</source>" * 11}</xliff>'.encode(), 413, "max_file"),
    ],
    ids=["entity", "broken", "not-xliff", "not-utf8", "too-many"],
)
def test_a_hostile_or_broken_file_is_one_line_before_any_work(data, status, words):
    limits = Limits(max_file_segments=10)
    with pytest.raises(JobError, match=words) as refused:
        check(Job(data=data, name="bad.xlf", format="xliff"), limits)
    assert refused.value.status == status and "\n" not in str(refused.value)
