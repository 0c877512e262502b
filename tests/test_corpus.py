"""The corpus built from Debian packages (nmt.corpus): real packages, a small slice of them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from nmt.config import CorpusConfig, DataConfig
from nmt.corpus import catalogs, ding, documentation
from nmt.corpus.build import corpus_folder, held_out_split
from nmt.corpus.cleaning import REASONS, cleaned
from nmt.corpus.documentation import DOC_SETS
from nmt.corpus.packages import MissingPackage, candidate_version, unpacked
from nmt.data.sources import load_split, provenance
from nmt.files import read_lines

pytestmark = pytest.mark.xdist_group("corpus")

# A real line of the dictionary (trans-de-en 1.9-6): a headword and two example sentences.
LINE = (
    "eine Abkürzung über einen Ort nehmen {v} | Auf dem Heimweg nehme ich immer die Abkürzung "
    "über den Park. | Hier geht der kurze Weg. :: to cut across a place | I usually cut across "
    "the park on my way home. | You can cut across here."
)
SMALL = {
    "domains": {"everyday": 1.0, "words": 0.01, "software": 1.0},
    "catalogs": ["sed", "grep"],
    "val_catalogs": ["psmisc"],
    "test_catalogs": ["xz-utils"],
    "kept_catalogs": ["nano"],
    "eval_pairs": 60,
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus-cache")


@pytest.fixture(scope="module")
def built(cache: Path) -> Path:
    return corpus_folder(CorpusConfig(**SMALL), None, cache)


def pairs(folder: Path, split: str) -> list[tuple[str, str]]:
    return list(
        zip(read_lines(folder / f"{split}.en"), read_lines(folder / f"{split}.de"), strict=True)
    )


def test_a_dictionary_line_gives_its_headword_and_its_example_sentences():
    entry = ding.parse(LINE)
    assert entry.words == ("to cut across a place", "eine Abkürzung über einen Ort nehmen")
    home = "Auf dem Heimweg nehme ich immer die Abkürzung über den Park."
    assert entry.sentences == [
        ("I usually cut across the park on my way home.", home),
        ("You can cut across here.", "Hier geht der kurze Weg."),
    ]
    # annotations, placeholders and alternatives are not sentences as people write them
    odd = (
        "Schiff {n} | Das Schiff durchschneidet die Wellen / schneidet durch. :: "
        "ship | The ship cuts the waves / through them."
    )
    assert ding.parse(odd).sentences == []
    assert ding.parse("a | b :: only one sub-entry").words is None  # sides that do not match


def test_a_catalog_message_pairs_line_by_line_and_loses_its_mnemonic():
    assert catalogs.line_pairs("Usage: %s FILE\nRead FILE.", "Aufruf: %s DATEI\nDATEI lesen.") == [
        ("Usage: %s FILE", "Aufruf: %s DATEI"),
        ("Read FILE.", "DATEI lesen."),
    ]
    assert catalogs.line_pairs("one\ntwo", "eins zwei") == []  # reflowed: no pairing
    assert catalogs.line_pairs("_Open", "Ö_ffnen") == [("Open", "Öffnen")]
    assert catalogs.line_pairs("snake_case _x", "a_b") == [("snake_case _x", "a_b")]


def test_cleaning_counts_every_pair_under_its_first_broken_rule():
    given = [
        ("", "leer"),
        (" ".join(["word"] * 90), "Wort"),
        ("one two three four five six seven", "eins"),
        ("GNU sed", "GNU sed"),
        ("cannot open %s", "kann nicht öffnen"),
        ("cannot  open %s", "kann %s nicht öffnen"),
        ("cannot open %s", "kann %s nicht öffnen"),  # the one before, spaces made single
    ]
    kept, report = cleaned(given, max_words=80, max_ratio=3.0)
    assert kept == [("cannot open %s", "kann %s nicht öffnen")]
    assert report == {"read": 7, "kept": 1, **dict.fromkeys(REASONS, 1)}


def test_the_built_corpus_holds_out_whole_units_and_trains_on_no_twin(built: Path):
    manifest = json.loads((built / "manifest.json").read_text())
    train = pairs(built, "train")
    held = {
        en
        for split in manifest["splits"]
        if split.startswith(("val", "test"))
        for en, _ in pairs(built, split)
    }
    assert train and not held & {en for en, _ in train}
    nano = {
        " ".join(en.split())
        for en, _ in catalogs.messages(unpacked("nano", built.parents[1] / "packages").root)
    }
    assert nano and not nano & {en for en, _ in train}  # kept packages are never trained on
    for split in ("val_everyday", "test_everyday", "val_software", "test_software"):
        assert 0 < manifest["splits"][split] == len(pairs(built, split)) <= 60
    assert "val_words" not in manifest["splits"]  # word pairs train only
    # every sentence of a dictionary line in one split: the line's hash decides
    assert {held_out_split(LINE, 0.03)} == {held_out_split(LINE, 0.03) for _ in range(3)}
    for domain, splits in manifest["report"].items():
        for split, counts in splits.items():
            if isinstance(counts, dict):
                assert counts["read"] == counts["kept"] + sum(counts[r] for r in REASONS), (
                    domain,
                    split,
                )
    assert manifest["packages"]["sed"] == candidate_version("sed")


def test_the_same_settings_build_the_same_bytes_and_others_a_new_folder(
    built: Path, cache: Path, tmp_path: Path
):
    # a cache of its own around the same downloaded packages: the build itself runs again
    (tmp_path / "packages").symlink_to(cache / "packages", target_is_directory=True)
    again = corpus_folder(CorpusConfig(**SMALL), None, tmp_path)
    assert again.name == built.name
    for path in built.iterdir():
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name
    # other settings: the catalogs alone (no dictionary to parse, most of a build's time)
    other = corpus_folder(CorpusConfig(**{**SMALL, "domains": {"software": 1.0}}), None, cache)
    assert (
        other != built and not (other / "train.en").read_text() == (built / "train.en").read_text()
    )


def test_a_package_apt_does_not_know_is_one_line_naming_apt_get(tmp_path: Path):
    with pytest.raises(MissingPackage, match="apt-get") as raised:
        corpus_folder(
            CorpusConfig(**{**SMALL, "catalogs": ["nmt-no-such-package"]}), None, tmp_path
        )
    assert "\n" not in str(raised.value) and "nmt-no-such-package" in str(raised.value)


def test_package_versions_come_from_one_apt_cache_call_as_each_packages_own(monkeypatch):
    """apt-cache reads its lists anew at every call (~0.7 s): data=general's 62 packages took
    48 s a command, built corpus or not, one call at a time."""
    import subprocess

    from nmt.corpus import packages

    names = ["sed", "grep", "trans-de-en"]
    own = {name: candidate_version(name) for name in names}
    calls = []
    run = subprocess.run
    monkeypatch.setattr(packages.subprocess, "run", lambda *a, **k: calls.append(a) or run(*a, **k))
    assert packages.candidate_versions(names) == own and len(calls) == 1
    with pytest.raises(MissingPackage, match="nmt-no-such-package is unknown to apt"):
        packages.candidate_versions(["sed", "nmt-no-such-package"])


def test_data_debian_loads_the_built_splits_and_model_pt_records_their_packages(
    built: Path, cache: Path
):
    cfg = DataConfig(
        source="debian",
        name="corpus",
        corpus=CorpusConfig(**SMALL, cache_dir=str(cache)),
        splits={"train": "train", "valid": "val", "test": "test_software"},
    )
    test = load_split(cfg, "test")
    assert list(zip(test["src"], test["tgt"], strict=True)) == pairs(built, "test_software")
    sources = provenance(cfg)
    assert sources["corpus"] == built.name and sources["packages"][
        "trans-de-en"
    ] == candidate_version("trans-de-en")


def test_documentation_pages_pair_by_their_blocks_and_are_held_out_whole(cache: Path):
    """data=docs on Debian's reference (debian-reference-en and -de): a German page has its
    English page's blocks in order, so they pair by position, then by sentence; every pair
    of a page lands in the split its name's hash picks."""
    cfg = CorpusConfig(
        domains={"docs": 1.0}, documentation=["debian-reference"], eval_pairs=100_000
    )
    built = corpus_folder(cfg, None, cache)
    # the domains a one-domain config turns off (weight 0) are not built: the same corpus
    off = CorpusConfig(**{**asdict(cfg), "domains": {"docs": 1.0, "everyday": 0, "software": 0}})
    assert corpus_folder(off, None, cache) == built
    manifest = json.loads((built / "manifest.json").read_text())
    assert set(manifest["report"]) == {"docs"}
    report = manifest["report"]["docs"]
    assert report["pages read"] > report["pages skipped, blocks differ"] >= 0
    for split in ("train", "val", "test"):
        assert report[split]["read"] == report[split]["kept"] + sum(
            report[split][r] for r in REASONS
        )
    roots = [unpacked(p, cache / "packages").root for p in DOC_SETS["debian-reference"].packages]
    train = dict(pairs(built, "train"))
    held = {split: dict(pairs(built, f"{split}_docs")) for split in ("val", "test")}
    assert train and held["val"] and held["test"]
    assert ("Package dependencies", "Paketabhängigkeiten") in {**train, **held["val"]}.items()
    assert not (held["val"].keys() | held["test"].keys()) & train.keys()
    for page, found in documentation.pages(DOC_SETS["debian-reference"], roots):
        split = held_out_split(f"debian-reference/{page}", cfg.page_share)
        if found is None or split == "train":
            continue
        kept = [(en, de) for en, de in found if held[split].get(en) == de]
        assert kept and all(en not in train for en, _ in found)  # the whole page held out
