"""Documents, not lines (nmt.documents): sentences inside paragraphs, cut by the splitter and
translated with every other sentence, joined back in the text's own shape, on both engines."""

from __future__ import annotations

import re

import pytest
from conftest import run_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.decoding.results import Hypothesis
from nmt.decoding.settings import DecodeConfig
from nmt.inference.output_text import SPLITS_A_LINE, best_text, one_line
from nmt.translation.layout import lay_out
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.texts import translate_texts

SPLITTER = SentenceSplitter()
GREEDY = DecodeConfig(strategy="greedy")
BEAM3 = DecodeConfig(strategy="beam", beam_size=3, nbest=3, len_penalty=1.0)
ENDS = re.compile(r"[.!?]$")


@pytest.fixture(scope="module", params=["torch", "ctranslate2"])
def engine(request, overfit_engine, ct2_f32):
    return overfit_engine if request.param == "torch" else ct2_f32


@pytest.fixture(scope="module")
def sentences(overfit_pairs) -> list[str]:
    """Real sentences with final punctuation, each one sentence to the splitter."""
    return [s for s in overfit_pairs[0] if ENDS.search(s) and len(SPLITTER.spans(s)) == 1]


# --- the layout: exact shape, over generated documents ---

SPACES = st.sampled_from([" ", "  ", "   ", "\t", " \t "])
MARKERS = st.sampled_from(["", "", "# ", "## ", "- ", "* ", "+ ", "1. ", "12) ", "> ", "> - "])
BREAKS = st.sampled_from(["\n", "\n\n", "\n   \n", "\r\n", "\n\n\n"])


@st.composite
def documents(draw, pool: list[str]) -> tuple[str, list[str]]:
    """A document of Markdown-ish lines of real sentences, and its sentences in order."""
    text, used = "", []
    for n in range(draw(st.integers(1, 5))):
        if n:
            text += draw(BREAKS)
        line = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))
        used += line
        text += draw(st.sampled_from(["", " ", "  "])) + draw(MARKERS)
        text += "".join(s + draw(SPACES) for s in line[:-1]) + line[-1]
        text += draw(st.sampled_from(["", " ", "   "]))
    return text, used


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_document_lays_out_into_its_sentences_and_joins_back_exactly(data, overfit_pairs):
    pool = [s for s in overfit_pairs[0] if ENDS.search(s) and len(SPLITTER.spans(s)) == 1]
    text, used = data.draw(documents(pool))
    layout = lay_out(text, SPLITTER)
    assert layout.sentences == used
    assert layout.join(layout.sentences)[0] == text
    # what is kept is whitespace and markers only: a stand-in translation leaves it intact
    marked, starts = layout.join([f"<{i}>" for i in range(len(used))])
    assert re.sub(r"<\d+>", "", marked) == "".join(layout.kept)
    assert all(marked[s : s + 3] == f"<{i}>" for i, s in enumerate(starts) if i < 10)
    for kept in layout.kept:
        assert re.fullmatch(r"(\s|#|-|\*|\+|\d+[.)]|>)*", kept), kept


@given(st.text(alphabet=st.sampled_from("ab äß\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029\x00")))
def test_one_line_leaves_no_line_break_and_changes_nothing_else(text):
    out = one_line(text)
    assert len(out) == len(text) and out.splitlines() == ([out] if out else [])
    assert "\t" not in out and out == text.translate(SPLITS_A_LINE)
    assert all(not chr(c).isprintable() for c in SPLITS_A_LINE)  # what its shortcut trusts


def test_a_lone_word_boundary_piece_at_either_end_is_no_text(overfit_engine):
    """A model that writes "▁" alone first or last (an unseen line's wandering output) gets
    no outer space: the text MarianTokenizer's join gives, so a format=hf export translates to
    the same bytes (test_marian_import); inner spaces stay as written."""
    tokenizer = overfit_engine.tokenizer
    boundary = tokenizer.sp.piece_to_id("▁")
    words = tokenizer.encode(["ein  Mann"])[0]
    raw = tokenizer.decode([[boundary, *words, boundary]])[0]
    assert raw == " ein  Mann "  # the tokenizer itself keeps whitespace
    assert best_text(tokenizer, [[Hypothesis([boundary, *words, boundary], 0.0, 0.0)]]) == [
        "ein  Mann"
    ]


def test_runs_without_final_punctuation_are_cut_but_sentences_are_not():
    captions = [
        "A man is smiling at a stuffed lion",
        "A black dog and a spotted dog are fighting",
        "Two men in a city wearing black near the Eiffel Tower",
    ]
    run = " ".join(captions)
    assert [run[a:b] for a, b in SPLITTER.spans(run)] == captions
    # a short run too, where a capitalised "A", "The", "Two" ... starts the next sentence
    short = "A child is splashing in the water Two men wearing black in a city. A dog runs"
    assert [short[a:b] for a, b in SPLITTER.spans(short)] == [
        "A child is splashing in the water",
        "Two men wearing black in a city.",
        "A dog runs",
    ]
    # a sentence of ordinary length is never cut at a capital, names and all
    one = "A man from New York walks past Central Park with Mary and Bob"
    assert SPLITTER.spans(one) == [(0, len(one))]
    long = (
        "A man in New York and a woman in Central Park and a child in Boston with a dog near "
        "the Eiffel Tower and two cats on the USA map and a TV"
    )
    assert len(long.split()) > SPLITTER.max_words and SPLITTER.spans(long) == [(0, len(long))]


def test_no_single_val_or_test_sentence_is_cut(multi30k_dir):
    """Why segment=sentences is the default: on one sentence per line it cuts nothing (every
    val and test_2016_flickr line stays one segment; one test line that starts "# 8 for Iowa
    State" keeps its "# " as a Markdown heading's), while paragraphs gain (docs/benchmarks.md)."""
    for split in ("val", "test_2016_flickr"):
        for line in (multi30k_dir / f"{split}.en").read_text(encoding="utf-8").splitlines():
            layout = lay_out(line, SPLITTER)
            assert len(layout.sentences) == 1, line  # "# 8 for Iowa State ...": a heading
            assert layout.sentences[0] == line.strip() or layout.kept[0].strip() == "#", line


def test_markers_and_rules_alone_are_kept_not_translated():
    layout = lay_out("- \n---\n# Title", SPLITTER)
    assert layout.sentences == ["Title"] and layout.kept == ["- \n---\n# ", ""]


# --- translating documents: the sentences alone, in one call, joined in the text's shape ---


def test_a_paragraph_translates_as_its_sentences_alone_joined_in_its_shape(engine, sentences):
    a, b, c = sentences[:3]
    texts = [f"  {a}  {b}\t{c} ", f"- {b}", "", "   ", c, f"# {a}\n\n1. {c}\n"]
    each = best_text(engine.tokenizer, engine.translate([a, b, c], GREEDY))
    alone = dict(zip([a, b, c], each, strict=True))
    calls = []
    real = engine.translate

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    engine.translate = counted
    try:
        found = translate_texts(engine, texts, GREEDY)
    finally:
        del engine.translate
    assert len(calls) == 1 and calls[0] == [a, b, c, b, c, a, c]  # one call, every sentence
    assert [t.text for t in found] == [
        f"  {alone[a]}  {alone[b]}\t{alone[c]} ",
        f"- {alone[b]}",
        "",
        "",
        alone[c],
        f"# {alone[a]}\n\n1. {alone[c]}\n",
    ]
    lines = translate_texts(engine, texts, GREEDY, segment="lines")
    assert [t.text for t in lines] == best_text(engine.tokenizer, engine.translate(texts, GREEDY))


def test_alignments_and_scores_of_a_paragraph_are_its_sentences_shifted(engine, sentences):
    a, b = sentences[3:5]
    [one_a, one_b] = translate_texts(engine, [a, b], GREEDY, alignments=True, scores=True)
    [both] = translate_texts(engine, [f"- {a}  {b}"], GREEDY, alignments=True, scores=True)
    words_a, words_b = len(a.split()), len(one_a.text.split())
    shifted = [(s + 1, t + 1) for s, t in one_a.alignments[0]]  # after "- " on both sides
    shifted += [(s + 1 + words_a, t + 1 + words_b) for s, t in one_b.alignments[0]]
    assert both.alignments[0] == sorted(shifted)
    assert both.scores.words == both.text.split()
    assert both.scores.word_log_probs == pytest.approx(
        [0.0, *one_a.scores.word_log_probs, *one_b.scores.word_log_probs], abs=1e-5
    )
    assert both.scores.token_log_probs == pytest.approx(
        one_a.scores.token_log_probs + one_b.scores.token_log_probs, abs=1e-5
    )


def test_alternatives_of_a_paragraph_join_its_sentences_by_rank(overfit_engine, sentences):
    a, b = sentences[5:7]
    alone = translate_texts(overfit_engine, [a, b], BEAM3)
    [both] = translate_texts(overfit_engine, [f"{a} {b}"], BEAM3)
    assert len(both.alternatives) == 3
    for k, (text, score) in enumerate(both.alternatives):
        ka, kb = (t.alternatives[min(k, len(t.alternatives) - 1)] for t in alone)
        assert text == f"{ka[0]} {kb[0]}"
        assert score == pytest.approx(ka[1] + kb[1], abs=1e-5)


def test_translate_cuts_sentences_by_default_and_not_with_segment_lines(
    model_pt, sentences, overfit_engine, tmp_path
):
    a, b = sentences[7:9]
    stdin = f"{a}  {b}\n\n".encode()
    default = run_module("nmt.translate", [f"ckpt={model_pt}"], tmp_path, stdin)
    lines = run_module("nmt.translate", [f"ckpt={model_pt}", "segment=lines"], tmp_path, stdin)
    own = overfit_engine.search
    alone = best_text(overfit_engine.tokenizer, overfit_engine.translate([a, b], own))
    assert default.stdout.decode() == f"{alone[0]}  {alone[1]}\n\n"
    whole = best_text(overfit_engine.tokenizer, overfit_engine.translate([f"{a}  {b}"], own))
    assert lines.stdout.decode() == whole[0] + "\n\n"
    bad = run_module("nmt.translate", [f"ckpt={model_pt}", "segment=words"], tmp_path, stdin)
    assert bad.returncode != 0 and "segment must be sentences or lines" in bad.stderr.decode()


def test_a_text_with_a_forced_prefix_is_translated_whole(overfit_engine, sentences):
    a, b = sentences[9:11]
    text, prefix = f"{a} {b}", "Ein"
    calls = []
    real = overfit_engine.translate

    def counted(*args, **kwargs):
        calls.append((args[0], args[3]))
        return real(*args, **kwargs)

    overfit_engine.translate = counted
    try:
        [found] = translate_texts(overfit_engine, [text], GREEDY, prefixes=[prefix])
    finally:
        del overfit_engine.translate
    assert calls == [([text], [prefix])]  # one segment, the prefix starting it
    assert found.text.startswith(prefix)
