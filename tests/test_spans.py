"""Protected spans (nmt.terms.spans): found where they are, carried byte for byte whatever the
model writes, on both engines and through every door."""

from __future__ import annotations

import re
import time
from dataclasses import replace

import pytest
from conftest import run_module
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.terms.spans import (
    DEFAULT_RULES,
    PLACEHOLDER,
    Rules,
    SpanError,
    find,
    needs_alignment,
    protect,
    restore,
    restored_links,
)
from nmt.translation.texts import translate_texts

SPANS = [
    "https://example.org/a1?b=2",
    "ann@example.org",
    "`make train`",
    "{{name}}",
    "{0}",
    "%s",
    "%(count)d",
    "$HOME",
    ":user",
    "1,250",
    "17",
]


def found(sentence: str, rules: Rules = DEFAULT_RULES) -> list[str]:
    return [sentence[r.start : r.stop] for r in find(sentence, rules.compiled())]


def test_each_kind_finds_its_spans_and_nothing_else():
    sentence = (
        "Mail ann@example.org at 10:30 about https://example.org/a1?b=2, run `make train`, "
        "greet {{name}} and {0} with %s or %(count)d in $HOME as :user: 1,250 boxes, 17 left."
    )
    assert found(sentence) == [
        "ann@example.org",
        "10:30",
        "https://example.org/a1?b=2",
        "`make train`",
        "{{name}}",
        "{0}",
        "%s",
        "%(count)d",
        "$HOME",
        ":user",
        "1,250",
        "17",
    ]
    plain = "A man in a red shirt: he said 50% sale, then left."
    assert found(plain, Rules(("urls", "emails", "code", "variables"))) == []
    assert found("see www.example.com.", Rules(("urls",))) == ["www.example.com"]


def test_the_callers_pattern_wins_a_tie_and_the_longest_match_an_overlap():
    rules = Rules(("numbers",), (r"ACME-\d+",))
    assert found("Order ACME-2000 and 3 more.", rules) == ["ACME-2000", "3"]
    assert found("Call 0800 123.", Rules((), (r"\d+ \d+", r"\d+"))) == ["0800 123"]


@pytest.mark.parametrize(
    "rules, message",
    [
        (Rules(("links",)), "protect: no kind 'links'"),
        (Rules((), ("(unclosed",)), "is no pattern"),
        (Rules((), ("x*",)), "matches the empty text"),
        (Rules((), ("a" * 300,)), "over 200 characters"),
        (Rules((), tuple(f"w{i}" for i in range(17))), "17 given, at most 16"),
    ],
)
def test_a_setting_that_cannot_work_is_one_line(rules, message):
    with pytest.raises(SpanError, match=message) as error:
        rules.check()
    assert "\n" not in str(error.value)


def test_placeholders_are_numbers_the_sentence_does_not_hold():
    protected = protect("Ticket #1 of {{name}} at https://example.org", DEFAULT_RULES.compiled())
    # "#1" is a number as written, a span whole; its placeholder is not #1
    assert protected.spans == [("#2", "#1"), ("#3", "{{name}}"), ("#4", "https://example.org")]
    assert protected.text == "Ticket #2 of #3 at #4"
    assert protected.source_of == [[0], [1], [2], [3], [4], [5]]
    assert protected.placeholder_words == [1, 3, 5]
    glued = protect("Ticket #12b: see https://x.org", DEFAULT_RULES.compiled())
    assert glued.text == "Ticket #12b: see #1" and glued.placeholder_words == [3]
    # a span runs on over the digits after it: its placeholder stays one
    sku = protect("Order SKU123 now.", Rules((), ("SKU",)).compiled())
    assert sku.spans == [("#1", "SKU123")] and sku.text == "Order #1 now."


@st.composite
def sentences_and_outputs(draw):
    """A sentence of plain words and spans, the placeholders it gets, and an output as a model
    might write it: placeholders kept, lost, doubled, garbled or moved, with any links."""
    words = draw(
        st.lists(st.sampled_from(["A", "man", "rides", "a", "red", "bike", ".", ","]), max_size=8)
    )
    for span in draw(st.lists(st.sampled_from(SPANS), min_size=1, max_size=4, unique=True)):
        words.insert(draw(st.integers(0, len(words))), span)
    sentence = " ".join(words)
    protected = protect(sentence, DEFAULT_RULES.compiled(), draw(st.booleans()))
    out = []
    for word in protected.text.split():
        fate = draw(st.sampled_from(["keep", "keep", "lose", "double", "garble", "word", "glue"]))
        if word.startswith("#") and fate != "keep":
            out += {
                "lose": [],
                "double": [word, word],
                "garble": ["Nr.9"],
                "word": ["Hund"],
                "glue": [f"({word}),"],
            }[fate]
        else:
            out.append(word)
    out = draw(st.permutations(out))
    n_src, n_out = len(protected.text.split()), len(out)
    links = draw(
        st.sets(
            st.tuples(st.integers(0, max(n_src - 1, 0)), st.integers(0, max(n_out - 1, 0))),
            max_size=12,
        )
        if n_src and n_out
        else st.just(set())
    )
    return protected, " ".join(out), sorted(links)


@settings(max_examples=400, deadline=None)
@given(sentences_and_outputs())
def test_a_span_is_never_lost_doubled_or_changed_whatever_the_model_writes(case):
    protected, output, links = case
    restored = restore(protected, output, links)
    words = restored.text.split()
    for k, (_, span) in enumerate(protected.spans):
        mine = [w for w, held in zip(words, restored.spans_of, strict=True) if k in held]
        assert span in " ".join(mine)  # the span, byte for byte, in the words that hold it
        # once: as often as the sentence has it (no span is part of another here)
        assert restored.text.count(span) == protected.source.count(span), restored.text
    placeholders = {p for p, _ in protected.spans}
    assert not any(m.group(0) in placeholders for m in PLACEHOLDER.finditer(restored.text))
    assert restored.complete == (not needs_alignment(protected, output))
    assert len(restored.origin) == len(words) == len(restored.spans_of)
    n_source = len(protected.source.split())
    for s, t in restored_links(protected, restored, links):
        assert 0 <= s < n_source and 0 <= t < len(words)


def test_a_lost_span_goes_after_the_words_aligned_to_the_word_before_it_and_is_reported():
    protected = protect("Visit https://example.org today.", DEFAULT_RULES.compiled())
    assert protected.text == "Visit #1 today."
    restored = restore(protected, "Besuchen Sie heute.", [(0, 0), (0, 1), (2, 2)])
    assert restored.text == "Besuchen Sie https://example.org heute."
    assert restored.warnings == [
        "span 'https://example.org' was lost: put back at its aligned position"
    ]
    garbled = restore(protected, "Besuchen Sie Nr.1 heute.", [(0, 0), (1, 2), (2, 3)])
    assert garbled.text == "Besuchen Sie https://example.org heute."
    at_end = restore(protected, "Heute.", [])
    assert at_end.text == "Heute https://example.org."
    bare = restore(protect("Visit https://example.org", DEFAULT_RULES.compiled()), "Besuchen .")
    assert bare.text == "Besuchen https://example.org." and bare.origin == [0, None]
    spaced = protect("Run `make  train` now.", DEFAULT_RULES.compiled())
    assert restore(spaced, "Starte #1 jetzt.").text == "Starte `make  train` jetzt."
    two = protect("Run `a` then `b` today.", DEFAULT_RULES.compiled())
    both = restore(two, "Starte #1/#2 heute.")
    assert both.text == "Starte `a`/`b` heute." and both.spans_of[1] == {0, 1}
    # a model that never saw a placeholder reads the sentence without the span
    out = protect("Visit https://example.org today.", DEFAULT_RULES.compiled(), False)
    assert out.text == "Visit today." and out.placeholder_words == [1] and out.taken_out
    placed = restore(out, "Besuchen Sie heute.", [(0, 0), (0, 1), (1, 2)])
    assert placed.text == "Besuchen Sie https://example.org heute."
    assert placed.warnings == ["span 'https://example.org' put in at its aligned position"]
    assert restored_links(out, placed, [(0, 0), (0, 1), (1, 2)]) == [(0, 0), (0, 1), (1, 2), (2, 3)]
    doubled = restore(protected, "#1 Besuchen Sie #1 heute.", [(1, 3)])
    assert doubled.text == "Besuchen Sie https://example.org heute."
    assert doubled.warnings == ["span 'https://example.org' was written 2 times: kept once"]


@pytest.mark.parametrize(
    ("source", "read", "translation", "links", "restored"),
    [  # a catalog's messages, as a model without placeholders reads and writes them
        ("%s: Deleting %s", "Deleting", "Löschen", [(0, 0)], "%s: Löschen %s"),
        (
            "Cannot open (%s) now",
            "Cannot open now",
            "Kann jetzt nicht öffnen",
            [(0, 0), (1, 3), (2, 1)],
            "Kann jetzt nicht öffnen (%s)",
        ),
        (
            'Saved "{name}", done.',
            "Saved done.",
            "Gespeichert, fertig.",
            [(0, 0), (1, 1)],
            'Gespeichert, "{name}", fertig.',
        ),
        ("It costs $4.99.", "It costs.", "Es kostet.", [(0, 0), (1, 1)], "Es kostet $4.99."),
    ],
)
def test_punctuation_glued_to_a_taken_out_span_goes_with_it(
    source, read, translation, links, restored
):
    """`%s:` is taken out whole, so its colon is neither read alone (and written ` : `) nor
    lost; a sentence's final mark stays with the sentence."""
    protected = protect(source, DEFAULT_RULES.compiled(), placeholders=False)
    assert protected.text == read
    assert restore(protected, translation, links).text == restored
    numbers = protect("Costs (1234.5).", DEFAULT_RULES.compiled(), False, "localize")
    assert numbers.written == ["(1234,5)"]  # localized inside its glue


@pytest.fixture(params=["torch", "ctranslate2"])
def engine(request, overfit_engine):
    return overfit_engine if request.param == "torch" else request.getfixturevalue("ct2_f32")


def spanned(overfit_pairs) -> list[str]:
    """Memorised lines with spans put in, and one as it was."""
    lines = overfit_pairs[0][:4]
    return [
        f"{lines[0][:-1]} at https://example.org/a1?b=2 .",
        f"{lines[1]} Mail ann@example.org or run `make train` for {{{{name}}}}.",
        f"{lines[2][:-1]} 17 times.",
        lines[3],
    ]


def test_both_engines_carry_every_span_alone_and_in_a_batch(engine, overfit_pairs):
    lines = spanned(overfit_pairs)
    together = translate_texts(engine, lines, engine.search, protect=DEFAULT_RULES, alignments=True)
    for line, result in zip(lines, together, strict=True):
        # alone, each span is carried as well (where the alignment places one may differ:
        # the forced pass's attention over a padded batch rounds differently)
        alone = translate_texts(engine, [line], engine.search, protect=DEFAULT_RULES)[0]
        for span in [s for s in SPANS if s in line]:
            assert result.text.count(span) == line.count(span), (line, result.text)
            assert alone.text.count(span) == line.count(span), (line, alone.text)
        assert not any(f"#{k}" in result.text.split() for k in range(1, 6))
        n_src, n_tgt = len(line.split()), len(result.text.split())
        assert all(s < n_src and t < n_tgt for s, t in result.alignments[0])
    plain = translate_texts(engine, lines[3:], engine.search, protect=None)[0]
    assert together[3].text == plain.text  # a line with no span reads as it was
    # a line, or a sentence, of spans alone has nothing to translate: it comes back as it is
    bare = ["https://example.org/a1?b=2", "10:30", f"ann@example.org {lines[3]}"]
    found = translate_texts(engine, bare, engine.search, protect=DEFAULT_RULES, scores=True)
    assert [t.text for t in found[:2]] == bare[:2]
    assert found[2].text.startswith("ann@example.org")


def test_a_span_the_model_writes_itself_keeps_its_own_translation_and_the_rest_read_it_out(
    engine, overfit_pairs
):
    """nmt.translation.carried: the memorised line with "Justin" protected is translated as
    with no protection at all (the model writes the name itself: its text, alignment and
    scores are the plain ones); "bushes", which it translates, comes out byte for byte all
    the same, as the spans-taken-out path gives it (numbers=localize reads every span taken
    out at once), in a batch as alone."""
    justin = overfit_pairs[0][28]  # "You know i am looking like Justin Bieber."
    bushes = overfit_pairs[0][0]  # "Two young, White males are outside near many bushes."
    assert "Justin" in justin and "bushes" in bushes
    rules = Rules(patterns=("Justin", "bushes"))
    lines, search = [justin, bushes], engine.search
    together = translate_texts(engine, lines, search, protect=rules, alignments=True, scores=True)
    alone = [translate_texts(engine, [line], search, protect=rules)[0] for line in lines]
    assert [t.text for t in together] == [t.text for t in alone]
    plain = translate_texts(engine, [justin], search, alignments=True, scores=True)[0]
    assert "Justin" in plain.text and together[0].text == plain.text
    assert together[0].alignments == plain.alignments
    # rated in another batch: the same log-probs but for float rounding
    assert together[0].scores.word_log_probs == pytest.approx(plain.scores.word_log_probs, abs=1e-4)
    taken_out = translate_texts(engine, lines, search, protect=replace(rules, numbers="localize"))
    assert "bushes" not in translate_texts(engine, [bushes], search)[0].text
    assert together[1].text == taken_out[1].text and together[1].text.count("bushes") == 1


def test_translate_carries_spans_as_the_library_does_and_refuses_a_bad_setting_in_one_line(
    model_pt, overfit_engine, overfit_pairs, tmp_path
):
    lines = [*spanned(overfit_pairs), "Order ACME-2000 now."]
    stdin = "".join(line + "\n" for line in lines).encode()
    ok = run_module(
        "nmt.translate",
        [f"ckpt={model_pt}", "progress=false", 'protect_patterns=["ACME-[0-9]+"]'],
        tmp_path,
        stdin=stdin,
    )
    assert ok.returncode == 0, ok.stderr.decode()
    rules = Rules(DEFAULT_RULES.kinds, ("ACME-[0-9]+",))
    direct = translate_texts(overfit_engine, lines, overfit_engine.search, protect=rules)
    assert ok.stdout.decode().splitlines() == [t.text for t in direct]
    assert "ACME-2000" in direct[-1].text and "{{name}}" in direct[1].text
    for args, message in (
        (["protect=[links]"], "protect: no kind 'links'"),
        (["protect_patterns=[x*]"], "matches the empty text"),
    ):
        bad = run_module("nmt.translate", [f"ckpt={model_pt}", *args], tmp_path, stdin=stdin)
        assert bad.returncode == 2
        assert message in bad.stderr.decode()
        assert len(bad.stderr.decode().strip().splitlines()) == 1


def test_a_pattern_that_backtracks_runs_in_linear_time_and_what_re2_cannot_run_is_refused():
    """A client's patterns run on RE2: `(a|aa)+$` took a backtracking engine ~2.6x longer for
    every 2 more a's before a "!"; here 5,000 of them, checked and found, take milliseconds."""
    from nmt.jobs.check import check
    from nmt.jobs.job import Job, JobError, Limits

    rules = Rules((), (r"(a|aa)+$",))
    job = Job(texts=["a" * 5000 + "!"] * 50, protect=rules)
    start = time.perf_counter()
    check(job, Limits.unbounded(max_pattern_seconds=0.5))
    assert find("a" * 5000 + "!", rules.compiled()) == []
    assert found("Go aaaa", rules) == ["aaaa"]
    assert time.perf_counter() - start < 1
    for pattern in (r"(?<=a)b", r"(a)\1"):
        with pytest.raises(JobError, match="no pattern RE2 runs") as error:
            check(replace(job, protect=Rules((), (pattern,))), Limits.unbounded())
        assert error.value.status == 422


def test_a_page_keeps_its_spans_inside_their_tags_and_its_untranslated_elements(
    engine, overfit_pairs
):
    from nmt.jobs.check import check
    from nmt.jobs.job import Job, Limits
    from nmt.jobs.run import engine_translator, run
    from nmt.translation.sentences import SentenceSplitter

    line = overfit_pairs[0][0][:-1]
    page = (
        f'<p>{line} <a href="/x">https://example.org/a1?b=2</a> with '
        '<code translate="no">{{name}}</code>.</p>'
    )
    job = Job(texts=[page], format="html", search=engine.search, protect=DEFAULT_RULES)
    plan = check(job, Limits.unbounded())
    out = run(plan, engine_translator(engine, job, SentenceSplitter())).translations[0].text
    # the URL byte for byte inside its tag (the sentence's final stop may follow it there)
    assert re.search(r'<a href="/x">https://example\.org/a1\?b=2\.?</a>', out), out
    assert '<code translate="no">{{name}}</code>' in out


def test_no_sentence_ends_inside_a_span():
    """A splitter that cuts after each "?" (a URL's query holds one): the two pieces of the
    sentence with the URL are one again; the cut between the sentences stays."""
    from nmt.terms.spans import KeepWhole

    class AtQuestionMarks:
        def spans(self, text):
            cuts = [i + 1 for i, c in enumerate(text) if c in "?."] + [len(text)]
            out, at = [], 0
            for cut in sorted(set(cuts)):
                piece = text[at:cut]
                if piece.strip():
                    start = at + len(piece) - len(piece.lstrip())
                    out.append((start, cut))
                at = cut
            return out

    text = "Go to https://x.org/a?b=1 now. Then stop."
    cut = AtQuestionMarks().spans(text)
    assert len(cut) == 4  # "?", the URL's "." and the stop
    whole = KeepWhole(AtQuestionMarks(), DEFAULT_RULES.compiled()).spans(text)
    assert [text[a:b] for a, b in whole] == ["Go to https://x.org/a?b=1 now.", "Then stop."]
