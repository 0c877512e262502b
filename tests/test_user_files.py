"""data=files: a user's own pairs as TSV, TMX or a pair of text files, cleaned with counts,
a validation split carved off when none is given, and bad files named with their line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import compose_train_config, run_module

from nmt.data.sources import load_splits
from nmt.data.user_files import DataFileError, language, read_tmx, read_tsv

TMX_HEAD = (
    '<?xml version="1.0" encoding="utf-8"?>\n<tmx version="1.4"><header srclang="en"/><body>\n'
)


def tmx(units: list[tuple[str, str, str, str]]) -> str:
    """(source language, source seg XML, target language, target seg XML) per unit."""
    variant = '<tuv xml:lang="{}"><seg>{}</seg></tuv>'.format
    body = "".join(f"<tu>{variant(a, x)}{variant(b, y)}</tu>\n" for a, x, b, y in units)
    return TMX_HEAD + body + "</body></tmx>\n"


@pytest.fixture(scope="module")
def pairs(multi30k_dir: Path) -> list[tuple[str, str]]:
    read = lambda name: (multi30k_dir / name).read_text(encoding="utf-8").splitlines()[:300]  # noqa: E731
    return list(zip(read("train.en"), read("train.de"), strict=True))


def test_language_codes_match_loosely():
    assert {language(c) for c in ("en", "en-US", "EN_gb", "eng", "En-Latn")} == {"en"}
    assert {language(c) for c in ("de", "de-DE", "DE", "deu", "ger")} == {"de"}


def test_tmx_gives_each_units_two_segments(tmp_path, pairs):
    """Codes of the original format (<bpt>, <ept>, <ph>) are left out, highlighted text kept;
    a unit in other languages is skipped and counted; the order of variants does not matter."""
    units = [("en-US", x, "DE-de", y) for x, y in pairs[:3]]
    units.append(
        (
            "en",
            'Click <bpt i="1">&lt;b&gt;</bpt>here<ept i="1">&lt;/b&gt;</ept> <hi>now</hi>'
            "<ph>&lt;br/&gt;</ph>.",
            "de",
            'Jetzt <bpt i="1">&lt;b&gt;</bpt>hier<ept i="1">&lt;/b&gt;</ept> klicken.',
        )
    )
    units.append(("fr", "Bonjour", "de", "Hallo"))
    units.append(("de", pairs[3][1], "en", pairs[3][0]))
    path = tmp_path / "memory.tmx"
    path.write_text(tmx(units), encoding="utf-8")
    sources, targets, skipped = read_tmx(path, "en", "de")
    assert sources == [x for x, _ in pairs[:3]] + ["Click here now.", pairs[3][0]]
    assert targets == [y for _, y in pairs[:3]] + ["Jetzt hier klicken.", pairs[3][1]]
    assert skipped == {"unit without both en and de": 1}


def test_bad_files_are_named_with_their_line(tmp_path, pairs):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("".join(f"{x}\t{y}\n" for x, y in pairs[:5]) + "a\tb\tc\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=rf"^{tsv}:6: expected source<TAB>target, found 2"):
        read_tsv(tsv)
    broken = tmp_path / "bad.tmx"
    broken.write_text(TMX_HEAD + "<tu><tuv xml:lang='en'><seg>a</tuv></tu>\n</body></tmx>\n")
    with pytest.raises(DataFileError, match=rf"^{broken}:3: not well-formed TMX"):
        read_tmx(broken, "en", "de")


def test_files_carve_a_validation_split_and_clean_with_counts(tmp_path, pairs, caplog):
    """A TMX train split with repeats and untranslated units, a TSV test split, no dev: the
    dev split is carved off the training pairs (none in both), and cleaning counts what it
    drops."""
    from nmt.data.encoding import clean_train, encode_split

    train = pairs[:200] + pairs[:20] + [(x, x) for x, _ in pairs[200:205]]
    (tmp_path / "train.tmx").write_text(
        tmx([("en", esc(x), "de", esc(y)) for x, y in train]), encoding="utf-8"
    )
    (tmp_path / "test.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in pairs[250:300]))
    cfg = compose_train_config(
        [
            "experiment=multi30k_cpu",
            "data=files",
            f"data.data_files.train={tmp_path / 'train.tmx'}",
            f"data.data_files.test={tmp_path / 'test.tsv'}",
            "data.carve_valid=10",
        ]
    ).data
    splits = load_splits(cfg)
    assert (len(splits["valid"]), len(splits["test"])) == (10, 50)
    valid = zip(splits["valid"]["src"], splits["valid"]["tgt"], strict=True)
    repeated = sum(pair in pairs[:20] for pair in valid)
    assert len(splits["train"]) == len(train) - 10 - repeated
    train_pairs = set(zip(splits["train"]["src"], splits["train"]["tgt"], strict=True))
    assert not train_pairs & set(zip(splits["valid"]["src"], splits["valid"]["tgt"], strict=True))
    assert splits["test"]["src"] == [x for x, _ in pairs[250:300]]

    tokenizer = train_or_load_small(tmp_path, splits["train"])
    encoded = encode_split(splits["train"], tokenizer, 1)
    with caplog.at_level(logging.INFO, logger="nmt.data.encoding"):
        cleaned = clean_train(encoded, 250, 3.0, drop_duplicates=True, drop_copies=True)
    kept = list(zip(cleaned["src"], cleaned["tgt"], strict=True))
    assert len(kept) == len(set(kept)) and all(x != y for x, y in kept)
    copies = sum(
        x == y for x, y in zip(splits["train"]["src"], splits["train"]["tgt"], strict=True)
    )
    repeats = len(splits["train"]) - copies - len(set(train_pairs) - {(x, x) for x, _ in pairs})
    assert f"{copies} whose target is their source, {repeats} repeats" in caplog.text


def esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def train_or_load_small(folder: Path, train):
    from nmt.config import TokenizerConfig
    from nmt.tokenizer_training import train_or_load

    cfg = TokenizerConfig(name="user_files", dir=str(folder / "tok"), vocab_size=600)
    return train_or_load(cfg, lambda: [*train["src"], *train["tgt"]], "the test's pairs")


def test_a_bad_file_stops_training_in_one_line(tmp_path, pairs):
    bad = tmp_path / "train.tsv"
    bad.write_text("".join(f"{x}\t{y}\n" for x, y in pairs[:30]) + "only one side\n")
    args = [
        "experiment=multi30k_cpu",
        "data=files",
        f"data.data_files.train={bad}",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    done = run_module("nmt.train", args, tmp_path)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode != 0 and lines[-1].endswith(
        f"{bad}:31: expected source<TAB>target, found 0 tabs"
    ), lines[-3:]


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_replay_mixes_in_a_seeded_share_of_general_pairs(tmp_path, pairs, share):
    """data.replay: the domain's training pairs, all of them, then general pairs from another
    file making up `share` of the whole, drawn with a fixed seed; valid and test untouched."""
    write = lambda name, rows: (tmp_path / name).write_text(  # noqa: E731
        "".join(f"{x}\t{y}\n" for x, y in rows), encoding="utf-8"
    )
    write("domain.tsv", pairs[:60])
    write("dev.tsv", pairs[60:70])
    write("general.tsv", pairs[100:300])
    overrides = [
        "data=files",
        f"data.data_files.train={tmp_path / 'domain.tsv'}",
        f"data.data_files.dev={tmp_path / 'dev.tsv'}",
        f"data.data_files.test={tmp_path / 'dev.tsv'}",
        f"data.replay.file={tmp_path / 'general.tsv'}",
        f"data.replay.share={share}",
    ]
    splits = load_splits(compose_train_config(overrides).data)
    train = list(zip(splits["train"]["src"], splits["train"]["tgt"], strict=True))
    replayed = train[60:]
    assert train[:60] == pairs[:60] and len(replayed) == round(share / (1 - share) * 60)
    assert set(replayed) <= set(pairs[100:300]) and len(set(replayed)) == len(replayed)
    assert splits["valid"]["src"] == [x for x, _ in pairs[60:70]]
    again = load_splits(compose_train_config(overrides).data)["train"]
    assert again["src"] == splits["train"]["src"]  # the same sample every time
    with pytest.raises(ValueError, match="needs data.replay.file"):
        compose_train_config(["data.replay.share=0.3"])
