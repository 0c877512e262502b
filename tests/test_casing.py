"""Lines in capitals read in sentence case (search.fold_case, nmt.translation.casing)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nmt.translation.casing import TITLE, UPPER, fold, kind, restore
from nmt.translation.texts import translate_texts


@pytest.mark.parametrize(
    "line, folded, found",
    [
        (
            "A MAN IN AN ORANGE HAT STARRING AT SOMETHING.",
            "A man in an orange hat starring at something.",
            UPPER,
        ),
        (
            "A Girl In Karate Uniform Breaking A Stick.",
            "A girl in karate uniform breaking a stick.",
            TITLE,
        ),
        ("Two Men Visit The USA In May", "Two men visit the USA in may", TITLE),
        ("A man in an orange hat.", "A man in an orange hat.", ""),
        ("Two young, White males are outside.", "Two young, White males are outside.", ""),
        ("USA", "USA", ""),
        ("WARNING: 230 V!", "Warning: 230 v!", UPPER),
    ],
)
def test_capitals_are_folded_to_sentence_case(line, folded, found):
    assert kind(line) == found
    assert fold(line) == (folded, found)
    assert len(fold(line)[0].split()) == len(line.split())  # alignments keep their words


def test_an_all_caps_lines_translation_comes_back_in_capitals():
    assert restore("Ein Mann mit Straße.", UPPER) == "EIN MANN MIT STRASSE."
    assert restore("Ein Mädchen in Uniform.", TITLE) == "Ein Mädchen in Uniform."


@pytest.fixture(params=["torch", "ctranslate2"])
def engine(request, overfit_engine):
    return overfit_engine if request.param == "torch" else request.getfixturevalue("ct2_f32")


def test_a_line_in_capitals_translates_as_the_line_itself_on_both_engines(engine, overfit_pairs):
    """A memorised line whose sentence case is itself: in ALL CAPS its translation is the
    plain one in capitals, in Title Case the plain one; with fold_case off, neither (the
    model never saw capitals)."""
    plain = [s for s in overfit_pairs[0] if fold(s.upper())[0] == s][:4]
    assert len(plain) >= 2
    search = engine.search
    want = [t.text for t in translate_texts(engine, plain, search)]
    upper = translate_texts(engine, [s.upper() for s in plain], search)
    assert [t.text for t in upper] == [w.upper() for w in want]
    titled = [" ".join(w[:1].upper() + w[1:] for w in s.split()) for s in plain]
    assert [t.text for t in translate_texts(engine, titled, search)] == want
    unfolded = translate_texts(engine, [s.upper() for s in plain], replace(search, fold_case=False))
    assert [t.text for t in unfolded] != [w.upper() for w in want]
