"""Numbers as people write them (nmt.written_numbers): each form one span, whole; carried byte
for byte (or localized on request) whatever the model writes, on both engines and through the
doors; the output checks compare them by value and by form."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest
from conftest import run_module
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.inference.output_checks import check, compare, fix_numbers
from nmt.terms.spans import DEFAULT_RULES, Rules, protect, restore
from nmt.translation.texts import translate_texts
from nmt.written_numbers import find, localize, same_value

# (kind, the form as written) as the issue lists them, each to come out whole
FORMS = [
    ("time", "10:45"),
    ("time", "2:03:59"),
    ("time", "9:00 AM"),
    ("time", "9 pm"),
    ("date", "2026-12-01"),
    ("date", "14.03.2025"),
    ("date", "1 May 2019"),
    ("date", "May 1, 2019"),
    ("money", "$4.99"),
    ("money", "€12.50"),
    ("money", "EUR 30"),
    ("money", "12,50 €"),
    ("percentage", "50%"),
    ("range", "45-67"),
    ("score", "3-2"),
    ("version", "v2.1.3"),
    ("version", "3.10.4"),
    ("phone", "+49 30 1234567"),
    ("phone", "+1 415-555-2671"),
    ("ip", "192.168.0.1"),
    ("dimensions", "30x40x50 cm"),
    ("size", "4.7 GB"),
    ("size", "3.5 kg"),
    ("fraction", "3/4"),
    ("fraction", "1½"),
    ("fraction", "½"),  # no digit: a sign of its own
    ("time", "１０:４５"),  # fullwidth digits are digits too
    ("number", "٣٠"),  # and Arabic-Indic ones
    ("ordinal", "21st"),
    ("code", "A-2291-X"),
    ("code", "LH 454"),
    ("code", "#58213"),
    ("code", "MP3"),
    ("number", "1,000"),
    ("number", "-5 °C"),
]
PLACEHOLDERS = ["%1$s", "%-10s", "%ld", "{0:>8}", "%(count)d", "%s", "%.2f", "{name}", "%1"]


def spans_of(text: str, rules: Rules = DEFAULT_RULES) -> list[str]:
    from nmt.terms.spans import find as find_spans

    return [text[r.start : r.stop] for r in find_spans(text, rules.compiled())]


@pytest.mark.parametrize("kind, form", FORMS, ids=[f"{k}:{f}" for k, f in FORMS])
def test_each_form_is_one_span_whole_wherever_it_stands(kind, form):
    for sentence in (f"A man pays {form} today.", f"{form} is here", f"See it at {form}."):
        assert [m.text for m in find(sentence)] == [form], sentence
        assert spans_of(sentence) == [form]


@pytest.mark.parametrize("placeholder", PLACEHOLDERS)
def test_every_format_placeholder_is_one_span(placeholder):
    assert spans_of(f"Deleted {placeholder} files, 50% of them.") == [placeholder, "50%"]


@pytest.mark.parametrize("placeholder", [*PLACEHOLDERS, "{{name}}", "$HOME", "${x}", ":user"])
def test_every_placeholder_begins_with_a_character_the_cleaning_looks_for(placeholder):
    """A corpus's cleaning searches only texts that hold one of PLACEHOLDER_STARTS: every kind
    the pattern matches must begin with one, or its pairs would pass unchecked."""
    from nmt.written_numbers import PLACEHOLDER_STARTS
    from nmt.written_numbers import PLACEHOLDERS as PATTERN

    match = PATTERN.search(f"Deleted {placeholder} files.")
    assert match and match.group(0) == placeholder and placeholder[0] in PLACEHOLDER_STARTS


def test_captions_and_capitals_keep_their_words_for_the_model():
    """Words stay the model's: only digits and what belongs to them are spans (an ALL CAPS
    line's words are no codes, a percent sign in prose no placeholder)."""
    assert [m.text for m in find("Two men in 3 boats, a 5-year-old and 10 dogs.")] == [
        "3",
        "5",
        "10",
    ]
    assert [m.text for m in find("A 5-YEAR-OLD BOY IN A RED SHIRT AT 5 PM ON 3 BIKES.")] == [
        "5",
        "5 PM",
        "3",
    ]
    assert spans_of("A 100% sure man and a % sign, 5 men at 2 girls.") == ["100%", "5", "2"]
    assert find("Two dogs play in the snow.") == []


def test_localize_writes_an_amounts_german_separators_and_nothing_else():
    cases = {
        "3.5 kg": "3,5 kg",
        "1,000": "1.000",
        "$1,250.50": "$1.250,50",
        "€12.50": "€12,50",
        "50.5%": "50,5%",
        "2.00": "2,00",
        "1000": "1000",
    }
    for written, german in cases.items():
        assert localize(written) == german
        assert same_value(written, german)
    for kept in ("10:45", "v2.1.3", "3.10.4", "192.168.0.1", "14.03.2025", "+49 30 1234567"):
        assert localize(kept) == kept


def test_the_checks_compare_value_and_form_and_say_which_failed():
    source = "At 10:45 he paid $4.99 for 3.5 kg and 2 pies."
    assert compare(source, "Um 10:45 zahlte er $4.99 für 3.5 kg und 2 Kuchen.") == ([], [])
    missing, changed = compare(source, "Um 10 45 zahlte er 4,99 für 3,5 kg und Kuchen.")
    assert missing == ["2"] and changed == ["10:45", "$4.99", "3.5 kg"]
    findings = check(source, "Um 10 45 zahlte er 4,99 für 3,5 kg und Kuchen.")
    assert "changed number 10:45: its value kept, not its form" in findings.warnings
    assert "missing 2" in findings.warnings
    # localize: the German form is the one expected, the English one changed
    german = "Um 10:45 zahlte er $4,99 für 3,5 kg und 2 Kuchen."
    assert compare(source, german, "localize") == ([], [])
    assert compare(source, german) == ([], ["$4.99", "3.5 kg"])
    # a number in another form, linked to one word, is written back in its own
    fixed = check("It costs $4.99 now.", "Es kostet 4,99 jetzt.")
    out = fix_numbers("It costs $4.99 now.", "Es kostet 4,99 jetzt.", [(2, 2)], fixed)
    assert out == "Es kostet $4.99 jetzt." and fixed.fixed == ["$4.99"] and not fixed.changed


@st.composite
def numbered_sentence(draw):
    """A sentence of plain words with numbers of every form drawn, digits of its own, a word
    or more between two (`45-67 EUR 30` side by side is a range in euros, then 30)."""
    plain = st.lists(st.sampled_from(["A", "man", "pays", "the", "red", "bike"]), max_size=3)
    words, forms = draw(plain), []
    for _ in range(draw(st.integers(1, 3))):
        _, template = draw(st.sampled_from(FORMS))
        digits = iter(draw(st.lists(st.integers(1, 9), min_size=12, max_size=12)))
        form = "".join(str(next(digits)) if c.isdigit() else c for c in template)
        if "+" in form:  # a phone number must be one its plan allows
            form = template
        forms.append(form)
        words += [form, "and", *draw(plain)]
    return " ".join(words) + draw(st.sampled_from(["", ".", "!"])), forms


@settings(max_examples=300, deadline=None)
@given(numbered_sentence(), st.booleans(), st.sampled_from(["keep", "lose", "garble", "double"]))
def test_a_drawn_number_comes_back_byte_for_byte_whatever_the_model_writes(case, learnt, fate):
    sentence, forms = case
    protected = protect(sentence, DEFAULT_RULES.compiled(), learnt)
    assert [span for _, span in protected.spans] == forms  # each whole, none cut
    out = []
    for word in protected.text.split():
        if word.startswith("#") and fate != "keep":
            out += {"lose": [], "garble": ["Nr.9"], "double": [word, word]}[fate]
        else:
            out.append(word)
    links = [(i, i) for i in range(min(len(protected.text.split()), len(out)))]
    restored = restore(protected, " ".join(out), links).text
    for form in forms:
        assert restored.count(form) >= 1, (sentence, restored)
    assert restored.count(forms[0]) == sentence.count(forms[0])


SENTENCES = [
    "A man opens the door at 10:45 for his friend.",
    "The bike costs $4.99 and weighs 3.5 kg.",
    "The race on 2026-12-01 had 1,000 runners.",
    "Call +49 30 1234567 before 9 pm.",
    "Version v2.1.3 fixes 50% of the bugs.",
    "The box is 30x40x50 cm, the file 4.7 GB and flight LH 454 leaves at 9:00 AM.",
    "Order #58213 for EUR 30 on 14.03.2025, part A-2291-X, won 3-2.",
    "Deleted %1$s of %-10s and {0:>8} with %(count)d left.",
]


def drawn_lines(captions: list[str]) -> list[str]:
    """Real captions, each with three forms of FORMS put in, their digits drawn (seed 0)."""
    rng = random.Random(0)
    out = []
    for caption in captions:
        words = caption.split()
        for _, template in rng.sample(FORMS, 3):
            form = (
                template
                if "+" in template
                else re.sub(r"\d", lambda _: str(rng.randint(1, 9)), template)
            )
            words.insert(rng.randint(0, len(words) - 1), f"{form} and")
        out.append(" ".join(words))
    return out


@pytest.fixture(params=["torch", "ctranslate2"])
def engine(request, overfit_engine):
    return overfit_engine if request.param == "torch" else request.getfixturevalue("ct2_f32")


@pytest.mark.parametrize("learnt", [False, True], ids=["spans taken out", "placeholders"])
def test_both_engines_carry_every_form_alone_and_in_a_batch(
    engine, learnt, overfit_pairs, monkeypatch
):
    """For a model that never saw a placeholder the spans are taken out; for one trained on
    them (its model.pt's placeholders: true, as here set) each is a placeholder."""
    monkeypatch.setitem(engine.card.info, "placeholders", learnt)
    lines = [*SENTENCES, *drawn_lines(overfit_pairs[0][1:7]), overfit_pairs[0][0]]
    together = translate_texts(engine, lines, engine.search, protect=DEFAULT_RULES)
    for line, result in zip(lines, together, strict=True):
        alone = translate_texts(engine, [line], engine.search, protect=DEFAULT_RULES)[0]
        for number in spans_of(line):
            assert result.text.count(number) == line.count(number), (line, result.text)
            assert alone.text.count(number) == line.count(number), (line, alone.text)
    localized = Rules(DEFAULT_RULES.kinds, (), "localize")
    german = translate_texts(engine, SENTENCES[1:3], engine.search, protect=localized)
    assert "$4,99" in german[0].text and "3,5 kg" in german[0].text
    assert "1.000" in german[1].text and "2026-12-01" in german[1].text


def test_translate_keeps_numbers_or_localizes_them_on_request(model_pt, overfit_engine, tmp_path):
    stdin = "".join(line + "\n" for line in SENTENCES).encode()
    for mode in ("keep", "localize"):
        ran = run_module(
            "nmt.translate",
            [f"ckpt={model_pt}", "progress=false", f"numbers={mode}"],
            tmp_path,
            stdin=stdin,
        )
        assert ran.returncode == 0, ran.stderr.decode()
        rules = Rules(DEFAULT_RULES.kinds, (), mode)
        direct = translate_texts(overfit_engine, SENTENCES, overfit_engine.search, protect=rules)
        assert ran.stdout.decode().splitlines() == [t.text for t in direct]
    bad = run_module("nmt.translate", [f"ckpt={model_pt}", "numbers=german"], tmp_path, stdin=b"")
    assert bad.returncode == 2 and "numbers=german: choose one of keep, localize" in (
        bad.stderr.decode()
    )
    assert len(bad.stderr.decode().strip().splitlines()) == 1


def test_unprotected_numbers_are_checked_by_value_and_form(overfit_engine):
    """protect=[]: the model writes the numbers itself, and the checks say what it did."""
    search = replace(overfit_engine.search)
    found = translate_texts(overfit_engine, SENTENCES[:2], search, protect=Rules())
    for result, line in zip(found, SENTENCES[:2], strict=True):
        missing, changed = compare(line, result.text)
        for number in missing:
            assert f"missing {number}" in result.warnings
        for number in changed:
            assert any(w.startswith(f"changed number {number}:") for w in result.warnings)


@pytest.mark.parametrize("exact", [False, True], ids=["glossary", "glossary_exact"])
def test_numbers_come_through_beside_a_glossarys_terms(overfit_engine, exact):
    from nmt.terms.glossary import Entry, Glossary

    glossary = Glossary([Entry("bike", "Fahrrad"), Entry("door", "Tür")], exact=exact)
    lines = SENTENCES[:2]
    found = translate_texts(
        overfit_engine, lines, overfit_engine.search, protect=DEFAULT_RULES, glossary=glossary
    )
    for line, result in zip(lines, found, strict=True):
        assert all(result.text.count(n) == line.count(n) for n in spans_of(line)), result.text
        assert result.terms and all(t["source"] in line for t in result.terms)
