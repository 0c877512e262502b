"""Office files opened in the tool their users open them with: Debian's LibreOffice, headless.

Inputs are made twice: by the libraries (python-docx, python-pptx, odfpy) and by LibreOffice
itself, converting those into each other's format (a Word file saved as OpenDocument, a
presentation saved as PowerPoint, ...), as a user's files come. Each is translated (word by
word in capitals, aligned one to one), then LibreOffice reads the translated file and writes
its text: that text is the input's text as LibreOffice reads it, every word translated and
nothing lost or moved. Runs without LibreOffice are skipped, unless NMT_REQUIRE_OFFICE=1
(set by .ci/run, which installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import document_result, stand_in, uppercase_translator
from lxml import etree
from test_docx import word_file
from test_odf import odp, odt
from test_pptx import deck

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
WRITER, IMPRESS = ("docx", "odt"), ("pptx", "odp")
FIELD = re.compile(r"<[a-z-]+>")  # a field LibreOffice shows by name (a slide's <number>)


@pytest.fixture(scope="module")
def soffice():
    found = shutil.which("soffice")
    if found is None:
        if os.environ.get("NMT_REQUIRE_OFFICE") == "1":
            pytest.fail(
                "soffice (LibreOffice) is not installed, and NMT_REQUIRE_OFFICE=1 asks for it"
            )
        pytest.skip("LibreOffice is not installed (.ci/run installs it)")
    return found


def convert(soffice: str, files: list[Path], to: str, out: Path, profile: Path) -> list[Path]:
    """LibreOffice's own conversion of `files` to format `to`, into `out` (its own profile,
    so that runs in parallel do not share one); the files it wrote, in order."""
    done = subprocess.run(
        [
            soffice,
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--convert-to",
            to,
            "--outdir",
            str(out),
            *map(str, files),
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    written = [out / f"{f.stem}.{to.split(':')[0]}" for f in files]
    assert all(w.exists() for w in written), done.stdout.decode() + done.stderr.decode()
    return written


def shown_text(path: Path) -> str:
    """The text LibreOffice wrote: a Writer file's plain text, or a presentation's flat
    OpenDocument's paragraphs (office:body only: no master page's placeholders)."""
    if path.suffix == ".txt":
        return path.read_text(encoding="utf-8-sig")
    body = etree.parse(str(path)).getroot().find(f"{{{OFFICE}}}body")
    return "\n".join("".join(p.itertext()) for p in body.iter(f"{{{TEXT}}}p"))


def test_libreoffice_reads_every_translated_office_file_as_its_translation(
    soffice, overfit_pairs, tmp_path
):
    s = overfit_pairs[0][:10]
    made = tmp_path / "made"
    made.mkdir()
    libraries = {"word.docx": word_file(s), "letter.odt": odt(s), "deck.pptx": deck(s)}
    libraries["talk.odp"] = odp(s)
    inputs = []
    for name, data in libraries.items():
        (made / name).write_bytes(data)
        inputs.append(made / name)
    profile = tmp_path / "profile"
    # LibreOffice's own files: each library-made one saved in the other format of its kind
    for source, to in [("word.docx", "odt"), ("letter.odt", "docx"), ("deck.pptx", "odp")]:
        inputs += convert(soffice, [made / source], to, tmp_path / "saved", profile)
    inputs += convert(soffice, [made / "talk.odp"], "pptx", tmp_path / "saved", profile)
    # the inputs and their translations, told apart by their names' prefixes, converted to
    # text in one LibreOffice start per kind
    both = tmp_path / "both"
    both.mkdir()
    for i, path in enumerate(inputs):
        fmt = path.suffix[1:]
        out = document_result(
            stand_in(uppercase_translator), fmt, data=path.read_bytes(), name=path.name
        ).data
        (both / f"out_{i}_{path.name}").write_bytes(out)
        (both / f"in_{i}_{path.name}").write_bytes(path.read_bytes())
    files = sorted(both.iterdir())
    writer = [f for f in files if f.suffix[1:] in WRITER]
    impress = [f for f in files if f.suffix[1:] in IMPRESS]
    texts = convert(soffice, writer, "txt:Text", tmp_path / "text", profile)
    texts += convert(soffice, impress, "fodp", tmp_path / "text", profile)
    shown = {"in": {}, "out": {}}
    for t in texts:
        side, stem = t.stem.split("_", 1)
        shown[side][stem] = shown_text(t)
    assert len(shown["out"]) == len(shown["in"]) == 8
    for stem, source in shown["in"].items():
        words = source.split()
        assert len(words) > 20, stem  # the file's text, as LibreOffice reads it
        expected = [w if FIELD.fullmatch(w) else w.upper() for w in words]
        assert shown["out"][stem].split() == expected, stem
