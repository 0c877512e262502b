"""gettext catalogues (nmt.documents.gettext_file): a template xgettext made from real
sentences, filled; placeholders byte for byte; what is done left alone; msgfmt --check."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import polib
import pytest
from conftest import (
    document_result,
    identity_translator,
    reversed_translator,
    run_module,
    stand_in,
    uppercase_translator,
)

from nmt.errors import JobError
from nmt.written_numbers import PLACEHOLDERS

TOOLS = pytest.mark.skipif(
    not shutil.which("xgettext") or not shutil.which("msgfmt"),
    reason="Debian's gettext (xgettext, msgfmt) is not installed (.ci/run installs it)",
)


def template(sentences: list[str], folder: Path) -> bytes:
    """A .pot that xgettext extracts from a Python program whose messages are real
    sentences, some with placeholders, one plural, one with a tag."""
    s = [x.rstrip(".") for x in sentences]
    program = folder / "app.py"
    program.write_text(
        "from gettext import gettext as _, ngettext\n"
        f"_({s[0] + '.'!r})\n"
        f"_({s[1] + ' %d times, said %s.'!r})\n"
        f"_({'Hello, %(name)s! ' + s[2] + ' {count} times.'!r})\n"
        f"ngettext({'One photo: ' + s[3] + '.'!r}, {'%d photos: ' + s[3] + '.'!r}, 2)\n"
        f"_({'<b>' + s[4] + '</b> outside.'!r})\n"
        f"_({s[5] + chr(10) + s[6] + '.' + chr(10)!r})\n"
    )
    out = folder / "app.pot"
    subprocess.run(
        ["xgettext", "-o", str(out), "--from-code=UTF-8", "-L", "Python", str(program)],
        check=True,
    )
    return out.read_bytes()


def filled(data: bytes, translate, **options) -> bytes:
    return document_result(stand_in(translate), "po", data=data, name="app.pot", **options).data


def msgfmt_check(data: bytes, folder: Path) -> None:
    path = folder / "out.po"
    path.write_bytes(data)
    done = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()


@TOOLS
def test_a_template_is_filled_each_placeholder_kept_and_passes_msgfmt(overfit_pairs, tmp_path):
    source = template(overfit_pairs[0], tmp_path)
    out = filled(source, uppercase_translator)
    msgfmt_check(out, tmp_path)
    catalogue = polib.pofile(out.decode())
    assert catalogue.metadata["Language"] == "de"
    assert catalogue.metadata["Plural-Forms"] == "nplurals=2; plural=(n != 1);"
    entries = [e for e in catalogue if e.msgid]
    assert len(entries) == 6
    for entry in entries:
        forms = [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values())
        sources = [entry.msgid] if not entry.msgid_plural else [entry.msgid, entry.msgid_plural]
        assert len(forms) == len(sources)  # German's two forms
        for text, form in zip(sources, forms, strict=True):
            # the placeholders byte for byte, the words translated, edges kept
            assert Counter(PLACEHOLDERS.findall(form)) == Counter(PLACEHOLDERS.findall(text))
            words = re.sub(r"<[^>]+>", "", PLACEHOLDERS.sub("", form))
            assert words.upper() == words and words.strip()
            assert form.endswith("\n") == text.endswith("\n")
    tagged = next(e for e in entries if "<b>" in e.msgid)
    assert tagged.msgstr.startswith("<b>") and "</b>" in tagged.msgstr
    plural = next(e for e in entries if e.msgid_plural)
    assert "fuzzy" in plural.flags  # a Python format's singular without its plural's %d


@TOOLS
def test_what_is_translated_fuzzy_or_obsolete_is_left_and_a_done_file_comes_back_as_it_was(
    overfit_pairs, tmp_path
):
    catalogue = polib.pofile(template(overfit_pairs[0], tmp_path).decode())
    entries = [e for e in catalogue if e.msgid]
    entries[0].msgstr = "Schon übersetzt."
    entries[1].flags.append("fuzzy")
    catalogue.append(polib.POEntry(msgid="A dog.", msgstr="Ein Hund.", obsolete=True))
    source = str(catalogue).encode()
    once = filled(source, uppercase_translator)
    again = polib.pofile(once.decode())
    assert again.find(entries[0].msgid).msgstr == "Schon übersetzt."
    assert again.find(entries[1].msgid).msgstr == ""
    assert [e.msgid for e in again.obsolete_entries()] == ["A dog."]
    asked = []
    filled(once, lambda texts, numbers: asked.extend(texts) or [])
    assert asked == []  # nothing left to translate
    assert filled(once, identity_translator) == once  # byte for byte
    # asked to, the translated messages are done again; fuzzy and obsolete ones still not
    redone = polib.pofile(filled(once, uppercase_translator, retranslate=True).decode())
    assert redone.find(entries[0].msgid).msgstr == entries[0].msgid.upper()
    assert redone.find(entries[2].msgid).msgstr == again.find(entries[2].msgid).msgstr
    assert (
        redone.find(entries[1].msgid).msgstr == ""
        and "fuzzy" in redone.find(entries[1].msgid).flags
    )
    assert [e.msgstr for e in redone.obsolete_entries()] == ["Ein Hund."]
    msgfmt_check(str(redone).encode(), tmp_path)


@TOOLS
def test_placeholders_moved_out_of_their_order_mark_a_message_fuzzy(overfit_pairs, tmp_path):
    out = filled(template(overfit_pairs[0], tmp_path), reversed_translator)
    msgfmt_check(out, tmp_path)  # fuzzy messages are neither used nor rejected
    moved = polib.pofile(out.decode()).find(overfit_pairs[0][1].rstrip(".") + " %d times, said %s.")
    assert "fuzzy" in moved.flags and sorted(PLACEHOLDERS.findall(moved.msgstr)) == ["%d", "%s"]


def test_a_catalogue_that_names_a_file_is_not_read_from_disk(tmp_path):
    secret = tmp_path / "secret.po"
    secret.write_text('msgid "A secret."\nmsgstr ""\n')
    with pytest.raises(JobError, match="not a gettext catalogue") as refused:
        filled(str(secret).encode(), uppercase_translator)
    assert refused.value.status == 422
    with pytest.raises(JobError, match="3 messages: the limit is max_file_segments=2"):
        from nmt.jobs.check import check
        from nmt.jobs.job import Job, Limits

        data = b'msgid ""\nmsgstr ""\n\nmsgid "a"\nmsgstr ""\n\nmsgid "b"\nmsgstr ""\n'
        check(Job(data=data, name="a.po", format="po"), Limits.unbounded(max_file_segments=2))


@TOOLS
def test_translate_fills_a_template_on_the_model(tmp_path, model_pt, overfit_pairs):
    source = tmp_path / "app.pot"
    source.write_bytes(template(overfit_pairs[0], tmp_path))
    out = tmp_path / "app.de.po"
    args = [f"ckpt={model_pt}", f"input={source}", f"output={out}", "decode=greedy"]
    done = run_module("nmt.translate", args, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    msgfmt_check(out.read_bytes(), tmp_path)
    entries = [e for e in polib.pofile(str(out)) if e.msgid]
    assert all(e.msgstr or any(e.msgstr_plural.values()) for e in entries)
    for entry in entries:
        if not entry.msgid_plural:
            assert Counter(PLACEHOLDERS.findall(entry.msgstr)) == Counter(
                PLACEHOLDERS.findall(entry.msgid)
            )
    # a message changed by hand is kept by a second run, and done again with retranslate=true
    catalogue = polib.pofile(str(out))
    first = next(e for e in catalogue if e.msgid and not e.msgid_plural)
    fresh, first.msgstr = first.msgstr, "Von Hand."
    catalogue.save(str(source))
    for again, expected in (("false", "Von Hand."), ("true", fresh)):
        done = run_module("nmt.translate", [*args, f"retranslate={again}"], tmp_path)
        assert done.returncode == 0, done.stderr.decode()
        assert polib.pofile(str(out)).find(first.msgid).msgstr == expected
