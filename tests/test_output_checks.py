"""The output checks (nmt.inference.output_checks): what must come through, loops, the safe
fix, and how every door reports them."""

from __future__ import annotations

import pytest
from conftest import run_module

from nmt.inference.calibration import Calibration
from nmt.inference.output_checks import (
    Findings,
    check,
    compare,
    fix_numbers,
    loop_sign,
    missing,
    tally,
)
from nmt.translation.texts import translate_texts

URL = "https://example.org/a1?b=2"


def test_numbers_urls_and_addresses_must_come_through():
    source = f"Call 0800 123 or mail ann@example.org about the 1,250 boxes at {URL} by 3.5 pm."
    assert compare(source, source) == ([], [])
    german = f"Ruf 0800 123 an oder schreib ann@example.org wegen 1.250 Kisten auf {URL} um 3,5."
    # German separators keep the value, not the form: changed where numbers are kept as written
    assert compare(source, german) == ([], ["1,250", "3.5 pm"])
    assert missing(source, "Ruf an oder schreib wegen 1.250 Kisten um 3,5.") == [
        URL,
        "ann@example.org",
        "0800",
        "123",
    ]
    assert missing("2 dogs and 2 cats", "2 Hunde und Katzen") == ["2"]  # counted, not just seen
    assert missing("A dog runs.", "Ein Hund rennt 3 mal.") == []  # an extra number is no loss


@pytest.mark.parametrize(
    "source, output, sign",
    [
        ("A girl kicks.", "Ein Mädchen mit Mick Kick Kick Kick Kick", "'Kick' repeated"),
        ("A man.", "Ein Mann auf dem Weg auf dem Weg auf dem Weg auf dem Weg", "'auf dem Weg'"),
        ("A MAN IN AN ORANGE HAT.", "Ein ICATATTTTTTTEEEEEEE", "TTTTTT…"),
        (
            "A dog.",
            "Ein Hund, " + " ".join(f"der {i}. Hund rennt schnell," for i in range(3)),
            "characters for a source of 6",
        ),
    ],
)
def test_a_loop_is_flagged(source, output, sign):
    assert sign in loop_sign(source, output)


def test_what_the_source_repeats_is_no_loop():
    assert loop_sign("Go go go go!", "Los los los los!") == ""
    assert loop_sign("zzzzzzz", "zzzzzzz") == ""
    assert loop_sign("Two dogs run in the grass.", "Zwei Hunde rennen im Gras.") == ""


def test_a_number_linked_to_one_number_word_is_fixed_and_reported():
    source, output = "17 dogs run.", "Zwei Hunde rennen."
    findings = check(source, output)
    assert findings.missing == ["17"]
    assert fix_numbers(source, output, [(0, 0), (1, 1), (2, 2)], findings) == "17 Hunde rennen."
    assert findings.missing == [] and findings.fixed == ["17"]
    assert findings.warnings == ["fixed number 17"] and findings.lowered(0.8) == 0.8
    wrong = check("It costs 250 euros.", "Es kostet 205 Euro.")
    assert fix_numbers("It costs 250 euros.", "Es kostet 205 Euro.", [(2, 2)], wrong) == (
        "Es kostet 250 Euro."
    )
    # not safe: linked to a word that is no number, or to two words, or to none
    for links in ([(0, 1)], [(0, 0), (0, 1)], []):
        findings = check(source, output)
        assert fix_numbers(source, output, links, findings) == output
        assert findings.missing == ["17"] and findings.lowered(0.8) == 0.4


def test_a_loop_leaves_little_confidence_and_the_run_is_tallied():
    looped = Findings(loop="loop: 'Kick' repeated")
    assert looped.lowered(0.8) == pytest.approx(0.2) and looped.lowered(None) is None
    changed = "changed number 10:45: its value kept, not its form"
    line = tally(
        [[], ["missing 17"], ["fixed number 3"], ["loop: 'a' repeated", "missing 2"], [changed]]
    )
    assert line == (
        "output checks: 3 of 5 lines flagged (2 missing numbers, URLs or addresses, "
        "1 numbers in another form, 1 loops); 1 numbers fixed"
    )


# --- on both engines: a planted mismatch and a planted loop ---


@pytest.fixture(params=["torch", "ctranslate2"])
def engine(request, overfit_engine):
    return overfit_engine if request.param == "torch" else request.getfixturevalue("ct2_f32")


def test_both_engines_flag_a_planted_mismatch_and_a_planted_loop(
    engine, overfit_pairs, monkeypatch
):
    sources = overfit_pairs[0][:3]
    lines = [
        sources[0],
        f"{sources[1]} See {URL}",  # the model never saw a URL: it cannot carry it
        sources[2],
    ]
    prefixes = ["", "", "Ein Kick Kick Kick Kick "]  # a loop, forced, its last word ended
    search = engine.search
    calibration = Calibration([-5.0, 0.0], [0.0, 1.0], {})
    monkeypatch.setattr(type(engine), "calibration", property(lambda self: calibration))
    plain = translate_texts(engine, lines, search, scores=True)
    forced = translate_texts(engine, lines, search, prefixes=prefixes, scores=True)
    assert plain[0].warnings == []
    assert f"missing {URL}" in plain[1].warnings
    assert forced[2].text.startswith("Ein Kick Kick Kick Kick")
    assert any(w.startswith("loop: ") for w in forced[2].warnings)  # 'Kick', or what follows
    for found, warned in ((plain, 1), (forced, 2)):
        raw = calibration.confidence(found[warned].scores.mean_log_prob)
        warnings = found[warned].warnings
        factor = 0.5 if any(w.startswith("missing") for w in warnings) else 1.0
        factor *= 0.25 if any(w.startswith("loop") for w in warnings) else 1.0
        assert factor < 1.0  # each was flagged, so each is lowered
        assert found[warned].scores.confidence == pytest.approx(raw * factor)
        assert found[0].scores.confidence == pytest.approx(
            calibration.confidence(found[0].scores.mean_log_prob)
        )


def test_a_planted_number_is_fixed_or_flagged_never_silently_lost(engine, overfit_pairs):
    """The memorised line with its first word, "Two", made 17: the model writes "Zwei" from
    memory; either the alignment links "17" to it alone and it becomes 17 (reported), or the
    line is flagged."""
    twos = [s for s in overfit_pairs[0] if s.startswith("Two ")][:3]
    lines = ["17 " + s.split(" ", 1)[1] for s in twos]
    for source, found in zip(lines, translate_texts(engine, lines, engine.search), strict=True):
        assert ("17" in found.text.split()) == ("fixed number 17" in found.warnings) or (
            "missing 17" in found.warnings
        ), (source, found.text, found.warnings)
        assert found.warnings  # the model never writes 17 on its own: it is fixed or flagged


def test_translate_reports_them_in_its_columns_and_its_log(model_pt, overfit_pairs, tmp_path):
    lines = [overfit_pairs[0][0], f"{overfit_pairs[0][1]} See {URL}"]
    stdin = "".join(line + "\n" for line in lines).encode()
    result = run_module(
        "nmt.translate",
        [f"ckpt={model_pt}", "scores=true", "progress=false", "protect=[]"],
        tmp_path,
        stdin=stdin,
    )
    assert result.returncode == 0, result.stderr.decode()
    rows = [row.split("\t") for row in result.stdout.decode().splitlines()]
    assert [len(row) for row in rows] == [6, 6]
    assert rows[0][5] == "" and f"missing {URL}" in rows[1][5].split("; ")
    assert "output checks: 1 of 2 lines flagged (1 missing" in result.stderr.decode()
