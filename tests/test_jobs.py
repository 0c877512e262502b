"""A request is a job (nmt.jobs): its rules and limits checked once, before the work, whoever
sends it; decoding that stops between batches; the cache bounded in bytes; the keys file."""

from __future__ import annotations

import io
import time
import zipfile
from dataclasses import replace

import pytest

from nmt.decoding.settings import DecodeConfig
from nmt.jobs.check import check, search_cost
from nmt.jobs.job import Job, JobError, Limits

LIMITS = Limits(
    max_lines=16,
    max_line_chars=400,
    max_file_bytes=100_000,
    max_file_segments=50,
    max_segment_words=40,
    max_segment_tags=10,
    max_file_tags=100,
    max_inflated_bytes=1_000_000,
    max_zip_ratio=100.0,
    max_search_cost=200_000,
    max_pattern_seconds=0.5,
    max_output_tokens=255,
)


def refused(job: Job, limits: Limits = LIMITS) -> JobError:
    with pytest.raises(JobError) as caught:
        check(job, limits)
    assert "\n" not in str(caught.value)
    return caught.value


def test_each_limit_is_named_in_its_refusal():
    beam = DecodeConfig(strategy="beam", beam_size=5, len_penalty=1.0)
    cases = [
        (Job(texts=["a"] * 17), 413, "max_lines=16"),
        (Job(texts=["a" * 401]), 413, "max_line_chars=400"),
        (Job(texts=["a"], prefixes=["b" * 401]), 413, "prefix 1 has 401"),
        (Job(data=b"x" * 100_001, name="a.txt"), 413, "max_file_bytes"),
        (Job(data=b"a\n" * 51, name="a.txt"), 413, "max_file_segments=50"),
        (Job(data=b"<p>" + b"<b>a</b> " * 11 + b"</p>", format="html"), 413, "max_segment_tags"),
        (Job(texts=["<p>" + "a " * 41 + "</p>"], format="html"), 413, "max_segment_words"),
        (Job(texts=["A man."] * 16, search=replace(beam, beam_size=64, nbest=64)), 413, "cost"),
        (Job(data=b"<br>" * 101, name="a.html", format="html"), 413, "max_file_tags=100"),
        (Job(texts=["<br>" * 60] * 2, format="html"), 413, "max_file_tags=100"),
        (Job(data=b"\xff\xfe", name="a.txt"), 422, "not UTF-8"),
        (Job(texts=["a"], format="html", scores=True), 422, "drop scores"),
        (Job(texts=["a"], segment="words"), 422, "segment"),
        (Job(texts=["a", "b"], prefixes=["c"]), 422, "one prefix per line"),
    ]
    for job, status, named in cases:
        error = refused(job)
        assert error.status == status and named in str(error), (job, error)


def test_a_search_costs_its_worst_case_and_a_plain_request_passes():
    beam = DecodeConfig(strategy="beam", beam_size=5, len_penalty=1.0, max_len_a=1.0, max_len_b=50)
    assert search_cost(Job(search=beam), ["abc"], 255) == 5 * (4 + 50)
    assert search_cost(Job(search=replace(beam, min_len=1000)), ["abc"], 255) == 5 * 255
    sample = DecodeConfig(strategy="sample", nbest=4)
    assert search_cost(Job(search=sample), ["abc"], 255) == 4 * (4 + 50)
    plan = check(Job(texts=["A man rides a bike."] * 16, search=beam), LIMITS)
    assert plan.segments == ["A man rides a bike."] * 16


def test_a_sentence_with_protected_spans_is_priced_as_two_searches():
    """Read whole first, then again with its spans taken out where its translation lost one
    (nmt.translation.carried): only the sentence holding a span costs twice."""
    from nmt.terms.spans import DEFAULT_RULES

    beam = DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0, max_len_b=10)
    line = "Run %s now. A dog runs."
    unprotected = search_cost(Job(search=beam), [line], 255)
    first = search_cost(Job(search=beam), ["Run %s now."], 255)
    assert search_cost(Job(search=beam, protect=DEFAULT_RULES), [line], 255) == unprotected + first


def test_the_search_is_priced_per_sentence_as_the_translator_cuts_them():
    """Each sentence of a line is searched with its own limit, at least min_len: a line of
    200 short sentences costs 200 searches (priced as one line it was ~15x under), while
    segment=lines prices the line once; an empty text costs nothing."""
    from nmt.translation.sentences import SentenceSplitter

    beam = DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0, min_len=100)
    line = "A dog runs. " * 200  # 2,400 characters
    per_sentence = search_cost(Job(search=beam), [line], 255)
    assert per_sentence == 200 * 4 * 100  # each "A dog runs." at least min_len
    assert search_cost(Job(search=beam, segment="lines"), [line], 255) == 4 * 255
    assert search_cost(Job(search=beam), ["", "  "], 255) == 0
    # captions run together, no stop between them: the server's max_words cuts them
    run = "A man rides a bike A woman walks a dog A child plays with a ball A cat sleeps"
    assert search_cost(Job(search=beam), [run], 255, SentenceSplitter(max_words=10)) == (
        4 * 4 * 100
    )
    limits = replace(LIMITS, max_line_chars=3000, max_search_cost=50_000)
    error = refused(Job(texts=[line], search=beam), limits)
    assert error.status == 413 and "80,000 tokens" in str(error)
    assert check(Job(texts=[line], search=beam, segment="lines"), limits).segments == [line]


def test_a_search_whose_decoder_state_passes_the_budget_is_refused_before_it_runs():
    """One sentence's rows x its longest output x the model's state per token (keys and
    values of every decoder layer): over max_decoder_bytes, a 413 naming it."""
    from nmt.config import ModelConfig
    from nmt.jobs.job import state_bytes_per_token

    shape = ModelConfig(d_model=64, decoder_layers=2, max_positions=256)
    per_token = state_bytes_per_token(shape)
    assert per_token == 2 * 2 * 64 * 4
    beam = DecodeConfig(strategy="beam", beam_size=8, len_penalty=1.0, min_len=200)
    budget = 8 * 150 * per_token  # 8 rows of 150 tokens
    limits = replace(LIMITS, state_bytes_per_token=per_token, max_decoder_bytes=budget)
    error = refused(Job(texts=["A man."], search=beam), limits)
    assert error.status == 413 and "max_decoder_bytes" in str(error)
    assert check(Job(texts=["A man."], search=replace(beam, min_len=100)), limits)


def test_a_word_zip_bomb_is_refused_before_it_is_unzipped():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"<w:p/>" * 1_000_000)  # 6 MB of paragraphs
    error = refused(Job(data=out.getvalue(), name="bomb.docx", format="docx"))
    assert error.status == 413 and "max_inflated_bytes" in str(error)
    garbage = refused(Job(data=b"PK not a zip", name="a.docx", format="docx"))
    assert garbage.status == 422


def test_a_word_files_runs_are_counted_before_it_is_read():
    run = b'<w:r><w:t xml:space="preserve">a </w:t></w:r>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"<w:document><w:p>" + run * 101 + b"</w:p></w:document>")
    error = refused(Job(data=out.getvalue(), name="runs.docx", format="docx"))
    assert error.status == 413 and "max_file_tags=100" in str(error)


def test_a_files_characters_are_its_texts_not_its_bytes():
    page = b"<html><head><style>p { color: red }</style></head><p>A <b>man</b>.</p></html>"
    plan = check(Job(data=page, name="a.html", format="html"), LIMITS)
    assert plan.characters == len("A man.")


def test_decoding_stops_between_batches_and_within_one_when_told(overfit_engine, overfit_pairs):
    """`stop` is asked before each batch and, on our engine, every STOP_EVERY decoder steps
    within one; asked and never true, it changes nothing."""
    from nmt.decoding.results import STOP_EVERY, Stopped

    lines = overfit_pairs[0][:8]
    engine, beam = overfit_engine, DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0)
    with pytest.raises(Stopped, match="stopped before"):
        engine.translate(lines, DecodeConfig(), stop=lambda: True)
    asked = []

    def stop() -> bool:
        asked.append(True)
        return len(asked) > 1  # the one batch starts, and stops at its first check within

    for search in (DecodeConfig(), beam):
        asked.clear()
        with pytest.raises(Stopped, match=f"after {STOP_EVERY} decoder steps"):
            engine.translate(lines, search, stop=stop)
        assert len(asked) == 2
        assert engine.translate(lines, search, stop=lambda: False) == engine.translate(
            lines, search
        )


def test_batches_searched_two_at_a_time_give_one_streams_answers_and_stop_alike(
    overfit_engine, overfit_pairs
):
    """On the CPU the engine searches `workers` batches at once, each in a thread of one CPU
    thread: greedy and an n-best beam with alignments and scores come out as from one stream,
    and a stop within a batch still ends the call; the caller's thread count is kept."""
    import torch

    from nmt.decoding.results import Stopped

    lines, engine = overfit_pairs[0][:24], overfit_engine
    beam = DecodeConfig(strategy="beam", beam_size=4, nbest=2, len_penalty=1.0)
    runs = [dict(search=DecodeConfig()), dict(search=beam, alignments=True, scores=True)]
    budget, engine.planner.max_tokens = engine.planner.max_tokens, 96  # several batches
    try:
        assert len(engine.planner.plan(lines, beam)) > 2
        alone = [engine.translate(lines, **run) for run in runs]
        engine.workers, threads = 2, torch.get_num_threads()
        assert [engine.translate(lines, **run) for run in runs] == alone
        assert torch.get_num_threads() == threads
        asked = []
        with pytest.raises(Stopped, match="decoder steps"):
            engine.translate(lines, beam, stop=lambda: asked.append(1) or len(asked) > 1)
    finally:
        engine.workers, engine.planner.max_tokens = 1, budget


def test_ctranslate2_stops_a_greedy_or_sampled_batch_within_it_when_told(ct2_f32, overfit_pairs):
    """On CTranslate2, `stop` is asked within a batch too where it can end one (its step
    callback, beam_size 1): the batch ends at its first check, its partial translations are
    not kept; asked and never true, it changes nothing."""
    from nmt.decoding.results import Stopped

    lines = overfit_pairs[0][:8]
    long = DecodeConfig(min_len=200)  # a batch of 200 steps at least: stopped at step 0
    asked = []

    def stop() -> bool:
        asked.append(True)
        return len(asked) > 1  # the batch starts, and stops at its first check within

    for search in (long, replace(long, strategy="sample", seed=3)):
        asked.clear()
        with pytest.raises(Stopped, match="stopped within a batch"):
            ct2_f32.translate(lines, search, stop=stop)
        # before; each queued batch (a line each, at this length) once, at its step 0, where
        # it ends; after. Decoded whole, each would be asked at 25 steps.
        assert len(asked) <= 2 + len(lines), len(asked)
        assert ct2_f32.translate(lines, search, stop=lambda: False) == ct2_f32.translate(
            lines, search
        )


def test_a_request_past_its_time_or_whose_client_left_is_answered_504(api_model, overfit_pairs):
    """Its decoding stops: past its deadline, its client gone as the batcher's threads see
    it (`gone`), or as a LitServe worker reads it on the departure board in shared memory."""
    from dataclasses import replace

    from conftest import worker_takes

    from nmt.serving.api import TimedOut
    from nmt.serving.dispatch import Departures

    body = {"text": overfit_pairs[0][:4]}
    _, (taken,) = worker_takes(api_model, [body])
    taken.deadline = time.monotonic() - 1
    (answer,) = api_model.predict([taken])
    assert isinstance(answer, TimedOut) and answer.status == 504
    _, (gone,) = worker_takes(api_model, [body])
    gone.gone = lambda: True
    assert isinstance(api_model.predict([gone])[0], TimedOut)
    board = Departures(2)
    api_model.departures = board
    try:
        _, (work,) = worker_takes(api_model, [body])
        stays, leaves = board.take(), board.take()
        assert board.take() == -1  # no slot left: such work cannot be told of a departure
        board.leave(leaves)
        left = api_model.decode_request(replace(work.work, slot=leaves))
        still = api_model.decode_request(replace(work.work, slot=stays))
        assert isinstance(api_model.predict([left])[0], TimedOut)
        assert [t.text for t in api_model.predict([still])[0]] == [
            t.text for t in api_model.predict([work])[0]
        ]
        board.release(leaves)
        assert board.take() == leaves and not board.gone(leaves)  # a slot taken is fresh
    finally:
        api_model.departures = None


@pytest.fixture(scope="module")
def api_model(model_pt):
    from conftest import compose

    from nmt.serving.api import TranslationAPI

    cfg = compose("serve", [f"ckpt={model_pt}", "threads=1", "cache_sentences=0"])
    api = TranslationAPI(cfg, [], "overfit")
    api.setup("cpu")
    return api


def test_the_cache_holds_no_more_bytes_than_it_is_given():
    from nmt.decoding.results import Hypothesis
    from nmt.inference.cache import TranslationCache, entry_bytes

    search = DecodeConfig()
    hyp = Hypothesis(tokens=list(range(100)), score=0.0, log_prob=0.0)
    key = TranslationCache.key("x" * 100, "", search, False, False)
    cache = TranslationCache(1000, max_bytes=10 * entry_bytes(key, [hyp]))
    for i in range(50):
        cache.put(TranslationCache.key("x" * 98 + f"{i:02d}", "", search, False, False), [hyp])
    assert len(cache.entries) == 10 and cache.bytes <= cache.max_bytes


def test_the_keys_file_skips_blank_lines_comments_and_a_byte_order_mark(tmp_path):
    from nmt.serving.access import read_keys

    keys = tmp_path / "keys.txt"
    keys.write_bytes("\ufeffk-first\n\n   # an indented comment\n\tk-second  \n".encode())
    assert read_keys(str(keys)) == [b"k-first", b"k-second"]
