"""Greedy and beam search on the session's tiny model, which memorised 64 real Multi30k pairs.

The `trained` fixture is the only part that knows the model: it returns (model, sources), the
model in eval mode and sources as lists of ids without EOS. Every test builds its own batches
from those.
"""

from __future__ import annotations

import random

import pytest
import torch
from conftest import one_thread, pad
from torch import Tensor

from nmt.decoding import beam as beam_module
from nmt.decoding.beam import beam_search
from nmt.decoding.constrained import NONE, Progress, Table, allocate, constrained_beam_search
from nmt.decoding.constraints import constrain, repeated_ngram_mask
from nmt.decoding.greedy import greedy_search
from nmt.decoding.penalties import (
    best_reachable_score,
    length_penalty,
    max_output_lengths,
    normalized_score,
    output_length,
    sentence_done,
)
from nmt.decoding.results import Hypothesis
from nmt.decoding.search import translate_batch
from nmt.decoding.settings import DecodeConfig, SearchError, check_search
from nmt.decoding.state import SearchOptions, StepDecoder
from nmt.decoding.steering import Steering
from nmt.decoding.top import block_size, row_top
from nmt.model import Ensemble, ModelConfig, Transformer
from nmt.vocabulary import BOS_ID, EOS_ID, PAD_ID

BEAM = dict(beam_size=4, len_penalty=0.6, max_len_a=1.0, max_len_b=15)
GREEDY = dict(max_len_a=1.0, max_len_b=15)


def run_greedy(model, src, record_attention=False, use_cache=True, target_prefix=None, **fields):
    """greedy_search with the DecodeConfig of `fields` and those options."""
    options = SearchOptions(target_prefix, record_attention, use_cache)
    return greedy_search(model, src, DecodeConfig(**fields), options)


def run_beam(model, src, record_attention=False, use_cache=True, target_prefix=None, **fields):
    """beam_search with the beam DecodeConfig of `fields` and those options."""
    options = SearchOptions(target_prefix, record_attention, use_cache)
    return beam_search(model, src, DecodeConfig(strategy="beam", **fields), options)


# Overfit pairs of 12 to 36 source pieces; the last two translate into outputs that repeat a
# bigram (for the no-repeat test), and 34, 40 and 54 into outputs that repeat no piece.
SOURCES = [58, 54, 42, 38, 6, 22, 12, 34, 40, 13, 60]


def source_batch(sources: list[list[int]]) -> Tensor:
    """Sources without EOS -> (B, S) as training sees them: EOS appended, right-padded."""
    return pad([s + [EOS_ID] for s in sources])


@pytest.fixture(scope="module", autouse=True)
def single_thread(overfit_engine):
    """Tiny tensors gain nothing from intra-op threads, which thrash when the cores are busy.
    (The shared model is trained first, on every thread.)"""
    with one_thread():
        yield


@pytest.fixture(scope="module")
def trained(overfit_engine, overfit_pairs) -> tuple[Transformer, list[list[int]]]:
    """(model in eval mode, sources without EOS), real sentences of varied length."""
    sources = overfit_engine.tokenizer.encode([overfit_pairs[0][i] for i in SOURCES])
    return overfit_engine.model.eval(), sources


def tokens_of(results: list[list[Hypothesis]]) -> list[list[list[int]]]:
    return [[h.tokens for h in nbest] for nbest in results]


def assert_same(a: list[list[Hypothesis]], b: list[list[Hypothesis]]) -> None:
    """Identical tokens, close scores and log-probs, n-best list by n-best list."""
    assert tokens_of(a) == tokens_of(b)
    for x, y in zip(sum(a, []), sum(b, []), strict=True):
        assert x.score == pytest.approx(y.score, abs=1e-4)
        assert x.log_prob == pytest.approx(y.log_prob, abs=1e-4)


def teacher_forced(
    model: Transformer, source: list[int], tokens: list[int]
) -> tuple[float, Tensor]:
    """Score a given output: (sum of log-probs of tokens + EOS, cross-attention (T + 1, S))."""
    src = source_batch([source])
    src_pad_mask = model.source_padding_mask(src)
    with torch.inference_mode():
        memory = model.encode(src, src_pad_mask)
        cache = model.start_cache(memory, record_attention=True)
        logits, cache = model.decode(torch.tensor([[BOS_ID] + tokens]), memory, src_pad_mask, cache)
    log_probs = logits[0].float().log_softmax(dim=-1)  # (T + 1, V)
    gold = torch.tensor(tokens + [EOS_ID])
    return log_probs.gather(1, gold[:, None]).sum().item(), cache.cross_attention[0]


def has_repeated_ngram(tokens: list[int], n: int) -> bool:
    ngrams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(ngrams)) < len(ngrams)


# Pure functions, by hand.


def test_length_penalty_values() -> None:
    assert length_penalty(1, 0.6) == pytest.approx(1.0)  # |Y| = 1: just EOS
    assert length_penalty(7, 1.0) == pytest.approx(2.0)  # (5 + 7) / 6
    assert length_penalty(13, 0.5) == pytest.approx(3**0.5)  # (5 + 13) / 6 = 3
    assert length_penalty(40, 0.0) == pytest.approx(1.0)
    assert normalized_score(-4.0, 7, 1.0) == pytest.approx(-2.0)
    lengths = torch.tensor([1.0, 7.0, 13.0])
    assert torch.allclose(length_penalty(lengths, 1.0), torch.tensor([1.0, 2.0, 3.0]))


def test_max_output_lengths() -> None:
    src_lengths = torch.tensor([3, 10, 0])
    # floor(1.5 * |x| + 2), capped at max_positions - 1 = 19
    assert max_output_lengths(src_lengths, 1.5, 2, 20).tolist() == [6, 17, 2]
    assert max_output_lengths(src_lengths, 1.5, 2, 10).tolist() == [6, 9, 2]
    assert max_output_lengths(src_lengths, 0.0, 0, 10).tolist() == [0, 0, 0]
    # the torch search's limits and the planner's (CTranslate2's) agree, to the integer the
    # decimal a * |x| + b is: 1.4 * 45 = 63 (62.99... in floats), 1.3 * 90 = 117
    assert max_output_lengths(torch.tensor([45, 90]), 1.4, 0, 1024).tolist() == [63, 126]
    assert max_output_lengths(torch.tensor([90]), 1.3, 0, 1024).tolist() == [117]
    lengths = torch.arange(300)
    for a in [k / d for d in (10, 20, 100) for k in range(1, 3 * d)]:
        expected = [output_length(a, n, 0) for n in range(300)]
        assert max_output_lengths(lengths, a, 0, 1024).tolist() == expected, a


def test_stopping_rule_by_hand() -> None:
    # alpha = 1, max |Y| = 10: lp = (5 + 10) / 6 = 2.5, so a live log-prob s can reach s / 2.5.
    max_length, alpha = torch.tensor([10.0]), 1.0
    assert best_reachable_score(torch.tensor([-3.0]), max_length, alpha).item() == pytest.approx(
        -1.2
    )
    worst = torch.tensor([-1.0])  # k-th best finished score
    assert not sentence_done(worst, torch.tensor([-1.5]), max_length, alpha)  # -0.6 > -1
    assert sentence_done(worst, torch.tensor([-3.0]), max_length, alpha)  # -1.2 <= -1
    assert sentence_done(worst, torch.tensor([-2.5]), max_length, alpha)  # a tie cannot beat it
    # Fewer than k finished: the k-th best is -inf and the rule cannot fire.
    assert not sentence_done(
        torch.tensor([float("-inf")]), torch.tensor([-50.0]), max_length, alpha
    )
    # alpha = 0: the bound is the log-prob itself. Vectorised over sentences.
    done = sentence_done(torch.tensor([-1.0, -1.0]), torch.tensor([-0.9, -1.1]), max_length, 0.0)
    assert done.tolist() == [False, True]


def test_repeated_ngram_mask_by_hand() -> None:
    tokens = torch.tensor([[5, 6, 7, 5], [5, 6, 7, 8]])
    bigram = repeated_ngram_mask(tokens, 2, 10)  # after "5": "5 6" was seen -> 6 banned
    assert bigram[0].nonzero().flatten().tolist() == [6]
    assert bigram[1].nonzero().flatten().tolist() == []
    unigram = repeated_ngram_mask(tokens, 1, 10)
    assert unigram[1].nonzero().flatten().tolist() == [5, 6, 7, 8]
    assert not repeated_ngram_mask(tokens[:, :1], 2, 10).any()


# Search properties on the trained model.


@pytest.mark.parametrize("n", [1, 8, 10])
def test_row_top_is_the_rows_topk(n: int) -> None:
    """Block maxima first gives each row's n largest entries and their columns, as a
    whole-row topk does: log-probs of an 8,000-entry vocabulary, some rows mostly -inf (as
    constraints leave them), on the block path and on both fallbacks."""
    torch.manual_seed(0)
    x = torch.randn(12, 8000).mul(4).log_softmax(dim=1)
    x[3, 100:] = float("-inf")  # the finite entries in the first two blocks only
    x[4, :7995] = float("-inf")  # five, in the last block: fewer than n
    assert block_size(8000, n) == 100 and block_size(8009, n) == 0
    for rows in (x, x.t().contiguous().t(), torch.cat([x, x[:, :9]], dim=1)):
        values, columns = row_top(rows, n)
        expected_values, expected_columns = rows.topk(n, dim=1)
        assert torch.equal(values, expected_values)
        finite = expected_values.isfinite()
        assert torch.equal(columns[finite], expected_columns[finite])
        assert torch.equal(rows.gather(1, columns), values)


def test_top_candidates_rank_every_extension_of_the_beams() -> None:
    """The two-stage candidates (each beam's 2k best, then the sentence's 2k best of those)
    are the 2k best of all beams * V extensions, with their parents, tokens and log-probs."""
    torch.manual_seed(1)
    sentences, beams, V, k = 3, 5, 8000, 5
    log_prob = torch.randn(sentences, beams).mul(3).sub(10)
    step = torch.randn(sentences * beams, V).mul(4).log_softmax(dim=1)
    cand, parent, token, token_lp = beam_module.top_candidates(log_prob, step, k)
    every = (log_prob[:, :, None] + step.view(sentences, beams, V)).view(sentences, -1)
    expected, flat = every.topk(2 * k, dim=1)
    first_row = torch.arange(sentences)[:, None] * beams
    assert torch.equal(cand, expected)
    assert torch.equal(parent, first_row + flat // V) and torch.equal(token, flat % V)
    assert torch.equal(token_lp, step[parent, token])


def test_beam_size_one_equals_greedy(trained) -> None:
    # With alpha = 0 the beam's score is the log-prob, which greedy maximises token by token.
    # With alpha > 0, one beam may keep going past a finished EOS hypothesis, since a longer one
    # can still win once divided by its larger penalty, so it may legitimately differ.
    model, sources = trained
    src = source_batch(sources)
    greedy = run_greedy(model, src, **GREEDY)
    beam = run_beam(model, src, **{**BEAM, "beam_size": 1, "len_penalty": 0.0})
    assert_same(greedy, beam)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_cached_equals_recomputed(trained, search: str) -> None:
    model, sources = trained
    src = source_batch(sources)
    if search == "greedy":
        run = lambda use_cache: run_greedy(  # noqa: E731
            model, src, **GREEDY, record_attention=True, use_cache=use_cache
        )
    else:
        run = lambda use_cache: run_beam(  # noqa: E731
            model, src, **BEAM, nbest=4, record_attention=True, use_cache=use_cache
        )
    cached, recomputed = run(True), run(False)
    assert_same(cached, recomputed)
    for x, y in zip(sum(cached, []), sum(recomputed, []), strict=True):
        assert torch.allclose(x.attention, y.attention, atol=1e-5)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_batch_equals_alone(trained, search: str) -> None:
    model, sources = trained
    if search == "greedy":
        run = lambda src: run_greedy(model, src, **GREEDY)  # noqa: E731
    else:
        run = lambda src: run_beam(model, src, **BEAM, nbest=2)  # noqa: E731
    batched = run(source_batch(sources))
    alone = [run(source_batch([s]))[0] for s in sources]
    assert_same(batched, alone)


def test_beam_outputs_are_well_formed(trained) -> None:
    model, sources = trained
    results = run_beam(model, source_batch(sources), **BEAM, nbest=3)
    assert len(results) == len(sources)
    for nbest, source in zip(results, sources, strict=True):
        assert len(nbest) == 3
        scores = [h.score for h in nbest]
        assert scores == sorted(scores, reverse=True)
        max_len = len(source) + 1 + BEAM["max_len_b"]  # a * |x| + b, |x| counts EOS
        for h in nbest:
            assert not {PAD_ID, BOS_ID, EOS_ID} & set(h.tokens)
            assert len(h.tokens) <= max_len
            # The score is the log-prob over the penalty of |Y| = tokens + EOS.
            expected = normalized_score(h.log_prob, len(h.tokens) + 1, BEAM["len_penalty"])
            assert h.score == pytest.approx(expected, rel=1e-5)


def test_greedy_outputs_are_well_formed(trained) -> None:
    model, sources = trained
    results = run_greedy(model, source_batch(sources), **GREEDY)
    for nbest, source in zip(results, sources, strict=True):
        assert len(nbest) == 1
        (h,) = nbest
        assert not {PAD_ID, BOS_ID, EOS_ID} & set(h.tokens)
        # The model's own EOS ended it, before the forced end at a * |x| + b.
        assert len(h.tokens) < len(source) + 1 + GREEDY["max_len_b"]
        assert h.score == h.log_prob < 0


@pytest.mark.parametrize("max_len_b", [0, 2])
def test_tiny_max_length_forces_the_end(trained, max_len_b: int) -> None:
    model, sources = trained
    src = source_batch(sources)
    greedy = run_greedy(model, src, max_len_a=0.0, max_len_b=max_len_b)
    beam = run_beam(model, src, **{**BEAM, "max_len_a": 0.0, "max_len_b": max_len_b}, nbest=4)
    # Live hypotheses are finished at the maximum length, so the n-best list is full (with
    # max length 0 the empty output is the only one).
    assert all(len(nbest) == (4 if max_len_b else 1) for nbest in beam)
    for nbest, source in zip(greedy + beam, sources + sources, strict=True):
        for h in nbest:
            assert len(h.tokens) <= max_len_b
            # A forced EOS is scored with the model's own log-prob of EOS there.
            assert h.log_prob == pytest.approx(teacher_forced(model, source, h.tokens)[0], abs=1e-4)


def test_length_capped_by_max_positions(trained) -> None:
    model, sources = trained
    huge = dict(max_len_a=0.0, max_len_b=10_000, min_len=10_000)  # EOS forbidden until the cap
    (nbest,) = run_greedy(model, source_batch(sources[:1]), **huge)
    assert len(nbest[0].tokens) == model.cfg.max_positions - 1


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_min_len(trained, search: str) -> None:
    model, sources = trained
    src = source_batch(sources)
    limits = dict(max_len_a=1.0, max_len_b=40)
    if search == "greedy":
        run = lambda min_len: run_greedy(model, src, **limits, min_len=min_len)  # noqa: E731
    else:
        run = lambda min_len: run_beam(  # noqa: E731
            model, src, beam_size=3, len_penalty=0.6, **limits, min_len=min_len, nbest=3
        )
    min_len = max(map(len, sources)) + 3
    assert any(len(h.tokens) < min_len for h in sum(run(0), []))
    assert all(len(h.tokens) >= min_len for h in sum(run(min_len), []))


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_no_repeat_ngram(trained, search: str, n: int) -> None:
    model, sources = trained
    src = source_batch(sources)
    if search == "greedy":
        run = lambda size: run_greedy(model, src, **GREEDY, no_repeat_ngram_size=size)  # noqa: E731
    else:
        run = lambda size: run_beam(  # noqa: E731
            model, src, **BEAM, no_repeat_ngram_size=size, nbest=2
        )
    free, blocked = sum(run(0), []), sum(run(n), [])
    assert any(has_repeated_ngram(h.tokens, n) for h in free)
    assert not any(has_repeated_ngram(h.tokens, n) for h in blocked)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_scores_and_attention_match_teacher_forcing(trained, search: str) -> None:
    """Each hypothesis carries its own log-prob and attention, whatever reordering happened."""
    model, sources = trained
    src = source_batch(sources)
    if search == "greedy":
        results = run_greedy(model, src, **GREEDY, record_attention=True)
    else:
        results = run_beam(model, src, **BEAM, nbest=3, record_attention=True)
    for nbest, source in zip(results, sources, strict=True):
        for h in nbest:
            log_prob, attention = teacher_forced(model, source, h.tokens)
            assert h.log_prob == pytest.approx(log_prob, abs=1e-4)
            assert h.attention.shape == (len(h.tokens) + 1, len(source) + 1)
            assert torch.allclose(h.attention.sum(dim=1), torch.ones(len(h.tokens) + 1), atol=1e-5)
            assert torch.allclose(h.attention, attention, atol=1e-5)
    assert run_greedy(model, src, **GREEDY)[0][0].attention is None


@pytest.mark.parametrize("nbest", [1, 4])
@pytest.mark.parametrize("len_penalty", [0.6, 3.0])
def test_early_stop_loses_nothing(trained, monkeypatch, len_penalty: float, nbest: int) -> None:
    """The stopping rule is exact: searching on to the maximum length finds the same n-best
    lists (the rule waits for nbest finished, fewer than the beam's), and stopping early (and
    dropping done sentences) decodes fewer rows."""
    model, sources = trained
    src = source_batch(sources)
    rows = {"early": 0, "full": 0}
    run = "early"
    step = StepDecoder.step

    def counting_step(self, prefix):
        rows[run] += prefix.size(0)
        return step(self, prefix)

    monkeypatch.setattr(StepDecoder, "step", counting_step)
    args = {**BEAM, "len_penalty": len_penalty, "max_len_b": 15, "nbest": nbest}
    early = run_beam(model, src, **args)
    run = "full"
    never = lambda worst, *_: torch.zeros_like(worst, dtype=torch.bool)  # noqa: E731
    monkeypatch.setattr(beam_module, "sentence_done", never)
    full = run_beam(model, src, **args)
    assert_same(early, full)
    assert rows["early"] < rows["full"]


def test_translate_batch_dispatches_and_the_search_rules_are_one_check(trained) -> None:
    model, sources = trained
    src = source_batch(sources[:3])
    greedy_cfg = DecodeConfig(strategy="greedy", max_len_b=15)
    assert_same(translate_batch(model, src, greedy_cfg), run_greedy(model, src, **GREEDY))
    beam_cfg = DecodeConfig(strategy="beam", beam_size=4, len_penalty=0.6, max_len_b=15, nbest=2)
    assert_same(translate_batch(model, src, beam_cfg), run_beam(model, src, **BEAM, nbest=2))
    with pytest.warns(UserWarning, match="len_penalty=0.6 does nothing with strategy greedy"):
        check_search(DecodeConfig(strategy="greedy", len_penalty=0.6))
    with pytest.warns(UserWarning, match="beam_size=4 does nothing with strategy sample"):
        check_search(DecodeConfig(strategy="sample", beam_size=4))
    with pytest.raises(SearchError, match="strategy beam needs len_penalty"):
        check_search(DecodeConfig(strategy="beam", beam_size=4))
    with pytest.raises(SearchError, match="exceeds half the vocabulary"):
        check_search(DecodeConfig(strategy="beam", beam_size=600, len_penalty=0.0), 1000)


def test_an_engine_refuses_a_bad_search_as_the_commands_do(overfit_engine) -> None:
    """Library callers get the same one-line SearchError as the command line and the server."""
    bad = DecodeConfig(strategy="beam", beam_size=2, nbest=3, len_penalty=1.0)
    with pytest.raises(SearchError, match="nbest=3 exceeds beam_size=2"):
        overfit_engine.translate(["A man."], bad)


def first_k_reference(model, source: list[int], k: int, alpha: float, max_len: int):
    """Beam search at its plainest, for one sentence: every step recomputes the whole prefix,
    ranks the 2k best extensions of the live hypotheses, finishes the EOS ones among the first
    k and keeps the k best others; it ends once k hypotheses have finished. -> (tokens, score)
    of the finished ones, best first."""
    src = torch.tensor([source + [EOS_ID]])
    live, finished = [([], 0.0)], []
    for t in range(max_len + 1):
        prefixes = torch.tensor([[BOS_ID, *tokens] for tokens, _ in live])
        with torch.inference_mode():
            logits = model(src.expand(len(live), -1), prefixes)[:, -1].float()
            log_probs = constrain(
                logits.log_softmax(-1),
                prefixes[:, 1:],
                torch.full((len(live),), max_len),
                0,
                0,
                model.cfg.special_ids,
            ).tolist()  # one row of Python floats per hypothesis, read once
        candidates = sorted(
            (
                (lp + row[v], i, v)
                for i, ((_, lp), row) in enumerate(zip(live, log_probs, strict=True))
                for v in range(len(row))
                if row[v] > float("-inf")
            ),
            reverse=True,
        )[: 2 * k]
        for total, i, v in candidates[:k]:
            if v == EOS_ID:
                finished.append((live[i][0], normalized_score(total, t + 1, alpha, "power")))
        live = [(live[i][0] + [v], total) for total, i, v in candidates if v != EOS_ID][:k]
        if len(finished) >= k:
            break
    return sorted(finished, key=lambda f: -f[1])


@pytest.mark.parametrize("alpha", [0.0, 4.0])
def test_stop_first_k_is_the_peers_rule(trained, alpha: float) -> None:
    """stop=first_k gives, batched and cached, what the plain definition gives; and with a
    penalty that rewards length (strongly: at 2.0 the memorised model's first three ends can
    be the exact rule's three best too) it stops where the exact rule runs on."""
    model, sources = trained
    chosen = sources[:4]
    args = dict(beam_size=3, nbest=3, len_penalty=alpha, length_norm="power", max_len_b=12)
    ours = run_beam(model, source_batch(chosen), stop="first_k", **args)
    for nbest, source in zip(ours, chosen, strict=True):
        expected = first_k_reference(model, source, 3, alpha, len(source) + 1 + 12)
        assert [h.tokens for h in nbest] == [tokens for tokens, _ in expected[:3]]
        assert [h.score for h in nbest] == pytest.approx([s for _, s in expected[:3]], abs=1e-4)
    exact = run_beam(model, source_batch(chosen), stop="exact", **args)
    first_k, runs_on = (
        [max(len(h.tokens) for h in nbest) for nbest in run] for run in (ours, exact)
    )
    assert all(a <= b for a, b in zip(first_k, runs_on, strict=True))  # sentence by sentence
    assert alpha == 0.0 or first_k != runs_on, runs_on  # rewarded length: exact runs on


# Ensembles: models searched as one, with the mean of their next-token probabilities.


@pytest.fixture(scope="module")
def perturbed(trained) -> Transformer:
    """The trained model with noise on every weight: still a reverser, with other scores."""
    model, _ = trained
    other = Transformer(model.cfg)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for mine, theirs in zip(other.parameters(), model.parameters(), strict=True):
            mine.copy_(theirs + 0.05 * torch.randn(theirs.shape, generator=generator))
    return other.eval()


def ensemble_teacher_forced(models: list[Transformer], source: list[int], tokens: list[int]):
    """Sum over tokens + EOS of log(mean over members of p(token | prefix))."""
    src = source_batch([source])
    per_member = []
    with torch.inference_mode():
        for model in models:
            logits = model(src, torch.tensor([[BOS_ID] + tokens]))
            per_member.append(logits[0].float().log_softmax(dim=-1))  # (T + 1, V)
    mean_log_probs = torch.stack(per_member).logsumexp(dim=0) - torch.log(torch.tensor(2.0))
    return mean_log_probs.gather(1, torch.tensor(tokens + [EOS_ID])[:, None]).sum().item()


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_ensemble_of_copies_equals_the_model(trained, search: str) -> None:
    model, sources = trained
    src = source_batch(sources)
    if search == "greedy":
        run = lambda m: run_greedy(m, src, **GREEDY, record_attention=True)  # noqa: E731
    else:
        run = lambda m: run_beam(m, src, **BEAM, nbest=3, record_attention=True)  # noqa: E731
    alone, ensemble = run(model), run(Ensemble([model, model]))
    assert_same(alone, ensemble)
    for x, y in zip(sum(alone, []), sum(ensemble, []), strict=True):
        assert torch.allclose(x.attention, y.attention, atol=1e-5)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_ensemble_scores_are_the_mean_probability(trained, perturbed, search: str) -> None:
    """Each hypothesis's log-prob is the members' mean probability, teacher-forced; cached
    equals recomputed and a batch equals its sentences alone, as for one model."""
    model, sources = trained
    members = Ensemble([model, perturbed])
    if search == "greedy":
        run = lambda src, cache=True: run_greedy(  # noqa: E731
            members, src, **GREEDY, use_cache=cache
        )
    else:
        run = lambda src, cache=True: run_beam(  # noqa: E731
            members, src, **BEAM, nbest=3, use_cache=cache
        )
    results = run(source_batch(sources))
    moved_by_the_second_member = 0
    for nbest, source in zip(results, sources, strict=True):
        for h in nbest:
            assert h.log_prob == pytest.approx(
                ensemble_teacher_forced([model, perturbed], source, h.tokens), abs=1e-4
            )
            alone, _ = teacher_forced(model, source, h.tokens)
            moved_by_the_second_member += abs(h.log_prob - alone) > 1e-3
    assert moved_by_the_second_member > 0
    assert_same(results, run(source_batch(sources), cache=False))
    assert_same(results, [run(source_batch([s]))[0] for s in sources])


def test_ensemble_members_must_share_a_tokenizer(trained) -> None:
    model, sources = trained
    vocab_size = model.cfg.vocab_size + 1
    stranger = Transformer(ModelConfig(**{**vars(model.cfg), "vocab_size": vocab_size})).eval()
    with pytest.raises(ValueError, match="must share a tokenizer"):
        Ensemble([model, stranger])
    with pytest.raises(ValueError, match="at least one model"):
        Ensemble([])


@pytest.mark.parametrize("stop", ["exact", "first_k"])
def test_more_hypotheses_returned_leave_the_search_as_it_was(trained, stop: str) -> None:
    """SearchOptions.hypotheses gives each sentence up to that many of the hypotheses it
    finished, best first, with nbest=1's best first; first_k stops by beam_size whatever
    nbest, so there they are nbest=4's, and the exact rule, which stops by nbest, finishes
    fewer for some sentences."""
    model, sources = trained
    src = source_batch(sources)
    cfg = DecodeConfig(strategy="beam", stop=stop, **BEAM)
    one = beam_search(model, src, cfg)
    more = beam_search(model, src, cfg, SearchOptions(hypotheses=4))
    assert_same([nbest[:1] for nbest in more], one)
    assert all(1 <= len(nbest) <= 4 for nbest in more)
    for nbest in more:
        assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
    four = run_beam(model, src, stop=stop, nbest=4, **BEAM)
    if stop == "first_k":
        assert_same(more, four)
    else:
        assert sum(map(len, more)) < sum(map(len, four))


# --- hard constraints (nmt.decoding.constrained) ---


def run_constrained(model, src, constraints, **fields):
    """Constraints that may end anywhere: every id counts as ending a word."""
    ends = [True] * model.cfg.vocab_size
    cfg = DecodeConfig(strategy="beam", **fields)
    return constrained_beam_search(model, src, cfg, constraints, ends)


def run_steered(model, src, constraints, bonus, **fields):
    """beam_search steered to constraints that may end anywhere."""
    steering = Steering.of(constraints, [True] * model.cfg.vocab_size, bonus, src.device)
    return beam_search(model, src, DecodeConfig(strategy="beam", **fields), None, steering)


def holds(tokens: list[int], constraint: list[int]) -> bool:
    n = len(constraint)
    return any(tokens[i : i + n] == constraint for i in range(len(tokens) - n + 1))


@pytest.mark.parametrize("nbest", [1, 4])
def test_constrained_search_without_constraints_is_beam_search(trained, nbest: int) -> None:
    model, sources = trained
    src = source_batch(sources)
    assert_same(
        run_constrained(model, src, [[] for _ in sources], nbest=nbest, **BEAM),
        run_beam(model, src, nbest=nbest, **BEAM),
    )


def test_the_best_output_holds_its_constraints_alone_or_batched(trained) -> None:
    """Each sentence must write two pieces of another sentence's translation (one of them a
    pair, which the memorised model would not write there): its best hypothesis holds them,
    hypotheses that hold them rank before those that do not (which only a forced end at the
    maximum length makes), and a sentence alone gets what it gets in a batch."""
    model, sources = trained
    src = source_batch(sources)
    plain = [nbest[0].tokens for nbest in run_beam(model, src, **BEAM)]
    constraints = others_pieces(plain)
    found = run_constrained(model, src, constraints, nbest=4, **BEAM)
    limits = max_output_lengths((src != PAD_ID).sum(1), 1.0, 15, model.cfg.max_positions)
    for nbest, wanted, plain_tokens, limit in zip(found, constraints, plain, limits, strict=True):
        met = [all(holds(h.tokens, c) for c in wanted) for h in nbest]
        assert len(nbest) == 4 and met[0] and met == sorted(met, reverse=True), wanted
        assert all(len(h.tokens) == limit for h, ok in zip(nbest, met, strict=True) if not ok)
        assert nbest[0].tokens != plain_tokens
        assert nbest[0].log_prob == pytest.approx(sum(nbest[0].token_log_probs), abs=1e-4)
    for i in (0, 5):
        one = source_batch(sources[i : i + 1])
        alone = run_constrained(model, one, constraints[i : i + 1], nbest=4, **BEAM)
        assert tokens_of(alone) == tokens_of(found[i : i + 1])


def others_pieces(plain: list[list[int]]) -> list[list[list[int]]]:
    """Per sentence, two pieces of other sentences' translations (one a pair), which the
    memorised model would not write there."""
    return [
        [plain[(i + 1) % len(plain)][2:4], [plain[(i + 2) % len(plain)][1]]]
        for i in range(len(plain))
    ]


@pytest.mark.parametrize("stop", ["exact", "first_k"])
def test_a_steered_search_without_a_bonus_is_beam_search_stopped_by_first_k(
    trained, stop: str
) -> None:
    """Whatever rule is asked: a steered beam stops once k hypotheses have finished."""
    model, sources = trained
    src = source_batch(sources)
    plain = [nbest[0].tokens for nbest in run_beam(model, src, **BEAM)]
    assert_same(
        run_steered(model, src, others_pieces(plain), 0.0, nbest=3, stop=stop, **BEAM),
        run_beam(model, src, nbest=3, stop="first_k", **BEAM),
    )


def test_a_bonus_steers_the_beam_to_the_constraints_and_leaves_the_scores_the_models(
    trained,
) -> None:
    """The more bonus, the more best outputs hold their (odd) constraints, all of them at a
    large one; nothing is required, so at none only the model's own choice would. Every
    hypothesis's log-prob and score are the model's (a teacher-forced pass), its list sorted
    by score, and a sentence alone gets what it gets in a batch."""
    model, sources = trained
    src = source_batch(sources)
    plain = [nbest[0].tokens for nbest in run_beam(model, src, **BEAM)]
    constraints = others_pieces(plain)
    held = []
    for bonus in (0.0, 5.0, 10.0, 20.0, 50.0):
        found = run_steered(model, src, constraints, bonus, nbest=3, **BEAM)
        best = [nbest[0].tokens for nbest in found]
        held.append(
            sum(all(holds(b, c) for c in cs) for b, cs in zip(best, constraints, strict=True))
        )
    assert held == sorted(held) and held[0] < held[-1] == len(sources), held
    for source, nbest in zip(sources, found, strict=True):
        assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
        for h in nbest:
            log_prob, _ = teacher_forced(model, source, h.tokens)
            assert h.log_prob == pytest.approx(log_prob, abs=1e-3)
            expected = normalized_score(log_prob, len(h.tokens) + 1, BEAM["len_penalty"])
            assert h.score == pytest.approx(expected, abs=1e-3)
    for i in (0, 5):
        one = source_batch(sources[i : i + 1])
        alone = run_steered(model, one, constraints[i : i + 1], 50.0, nbest=3, **BEAM)
        assert tokens_of(alone) == tokens_of(found[i : i + 1])


def one_row(constraints: list[list[int]]):
    """A sentence's constraints as a one-row table, and nothing written yet."""
    table = Table.of([constraints], torch.device("cpu"))
    return Progress.start(table.lengths), table.tokens, table.lengths


def ahead(p: Progress, tokens: Tensor) -> set[int]:
    return {t for t in p.next_tokens(tokens)[0].tolist() if t != NONE}


def test_a_constraint_counts_as_whole_words_and_a_broken_one_starts_over() -> None:
    start, tokens, lengths = one_row([[5, 6], [8]])
    ends = torch.tensor([i != 7 for i in range(10)])  # 7 goes on with a word

    def after(p: Progress, *stream: int) -> Progress:
        for token in stream:
            p = p.advance(torch.tensor([token]), tokens, lengths, ends)
        return p

    p = after(start, 5)
    assert p.written.item() == 1 and ahead(p, tokens) == {6}
    p = after(p, 6)
    assert p.met.tolist() == [[True, False]] and p.written.item() == 2
    assert after(p, 7).met.tolist() == [[False, False]]  # "Helmen" + "syste"
    assert after(p, 8).complete().item()  # 8 ends the word, and is the other
    broken = after(start, 5, 9)
    assert broken.written.item() == 0 and ahead(broken, tokens) == {5, 8}


def advance_one(state: tuple, token: int, constraints: list[list[int]], ends: list[bool]):
    """The rule of `Progress.advance` for one hypothesis, as plainly as it can be written:
    state = (met, (constraint, tokens written) under way or None, constraint closing or None,
    constraint tokens written)."""
    met, active, closing, written = list(state[0]), state[1], state[2], state[3]
    if closing is not None and not ends[token]:
        met[closing] = False
        written -= len(constraints[closing])
    if active is not None:
        c, at = active
        if constraints[c][at] == token:
            if at + 1 < len(constraints[c]):
                return met, (c, at + 1), None, written + 1
            met[c] = True
            return met, None, c, written + 1
        written -= at
    for c, tokens in enumerate(constraints):
        if tokens[0] == token and not met[c]:
            if len(tokens) == 1:
                met[c] = True
                return met, None, c, written + 1
            return met, (c, 1), None, written + 1
    return met, None, None, written


def test_progress_of_many_rows_at_once_follows_the_rule_of_one() -> None:
    """Rows of sentences with different constraints (1-3 of 1-3 tokens, from 6 ids, so they
    share tokens and break off) advance on random token streams together as each would alone;
    and `written` is what a recount of `met` and the one under way gives."""
    rng = random.Random(0)
    for _ in range(20):
        rows = [
            [[rng.randrange(6) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 3))]
            for _ in range(30)
        ]
        ends = [rng.random() < 0.7 for _ in range(6)]
        table = Table.of(rows, torch.device("cpu"))
        p = Progress.start(table.lengths)
        states = [([False] * len(c), None, None, 0) for c in rows]
        for _ in range(12):
            stream = [rng.randrange(6) for _ in rows]
            p = p.advance(torch.tensor(stream), table.tokens, table.lengths, torch.tensor(ends))
            states = [advance_one(*a, ends) for a in zip(states, stream, rows, strict=True)]
            for r, (met, active, closing, written) in enumerate(states):
                assert p.met[r, : len(rows[r])].tolist() == met and p.met[r, len(rows[r]) :].all()
                assert (p.active[r].item(), p.at[r].item()) == (active or (NONE, 0))
                assert p.closing[r].item() == (NONE if closing is None else closing)
                recount = sum(len(c) for c, m in zip(rows[r], met, strict=True) if m)
                assert p.written[r].item() == written == recount + (active[1] if active else 0)


def test_gains_are_what_advancing_by_each_token_would_write() -> None:
    """`Progress.gains`, for every token at once (any token's gain, less undo where it goes on
    a word, else its place's), is the change in `written` that advancing by that token makes,
    on rows in every state (random streams over constraints that share tokens and break off);
    a token placed twice in a row has one gain."""
    rng = random.Random(1)
    V = 7
    for _ in range(20):
        rows = [
            [
                [rng.randrange(1, V) for _ in range(rng.randint(1, 3))]
                for _ in range(rng.randint(1, 3))
            ]
            for _ in range(30)
        ]
        ends = torch.tensor([rng.random() < 0.7 for _ in range(V)])
        table = Table.of(rows, torch.device("cpu"))
        p = Progress.start(table.lengths)
        for _ in range(12):
            any_token, undo, places, gains = p.gains(table.tokens, table.lengths, ends)
            moved = [
                (
                    p.advance(torch.full_like(p.at, v), table.tokens, table.lengths, ends).written
                    - p.written
                ).tolist()
                for v in range(V)
            ]
            for r in range(len(rows)):
                dense = [any_token[r].item() - undo[r].item() * (not ends[v]) for v in range(V)]
                placed: dict[int, int] = {}
                for v, gain in zip(places[r].tolist(), gains[r].tolist(), strict=True):
                    if v != NONE:
                        assert placed.setdefault(v, gain) == gain
                dense = [placed.get(v, gain) for v, gain in enumerate(dense)]
                for v in range(V):
                    assert dense[v] == moved[v][r], (r, v)
            stream = torch.tensor([rng.randrange(V) for _ in rows])
            p = p.advance(stream, table.tokens, table.lengths, ends)


def test_beams_are_dealt_out_by_constraint_tokens_written() -> None:
    """The best of each bank in turn, fullest first: a hypothesis that wrote a constraint keeps
    a place among k=2 though both others score higher; a sentence with fewer valid candidates
    than places gets them all, then places that are no candidate."""
    bank = torch.tensor([[0, 0, 1], [0, 0, 1]])  # candidates best first
    valid = torch.tensor([[True, True, True], [False, True, False]])
    place, real = allocate(valid, bank, 2)
    assert place[0].tolist() == [2, 0] and real[0].all()
    assert place[1, 0].item() == 1 and real[1].tolist() == [True, False]
    assert allocate(valid, bank, 3)[0][0].tolist() == [2, 0, 1]


def test_a_batch_holds_no_more_decoder_state_than_its_budget_and_translates_alike(
    overfit_engine, overfit_pairs
) -> None:
    """The planner cuts a batch where its rows x longest output x one row's state per
    token would pass max_state_bytes; the lines translate as in the unbounded batches."""
    from dataclasses import replace as replaced

    from nmt.config import ModelConfig
    from nmt.inference.planner import rows_per_sentence
    from nmt.jobs.job import state_bytes_per_token

    lines = overfit_pairs[0][:24]
    search = DecodeConfig(strategy="beam", beam_size=4, nbest=2, len_penalty=1.0)
    planner = overfit_engine.planner
    per_token = state_bytes_per_token(ModelConfig(**overfit_engine.card.shape))
    unbounded = planner.plan(lines, search)
    budget = 8 * rows_per_sentence(search) * per_token * 40  # 8 sentences of 40 tokens
    bounded = replaced(planner, max_state_bytes=budget, state_bytes_per_token=per_token)
    batches = bounded.plan(lines, search)
    assert len(batches) > len(unbounded)
    for batch in batches:
        state = len(batch.lines) * 4 * per_token * (max(batch.max_lengths) + 1)
        assert state <= budget or len(batch.lines) == 1
    overfit_engine.planner = bounded
    try:
        cut = overfit_engine.translate(lines, search)
    finally:
        overfit_engine.planner = planner
    assert tokens_of(cut) == tokens_of(overfit_engine.translate(lines, search))


def test_every_search_steps_in_inference_mode(overfit_engine, overfit_pairs, monkeypatch):
    """No search records autograd: every decoder step of greedy, beam, sampling, a steered
    and a constrained beam runs under inference mode (beam search once lost it to a helper,
    and each step then built a graph no one read)."""
    from nmt.decoding.state import StepDecoder

    modes = []
    step = StepDecoder.step

    def recorded(self, prefix):
        modes.append(torch.is_inference_mode_enabled())
        return step(self, prefix)

    monkeypatch.setattr(StepDecoder, "step", recorded)
    sources, references = overfit_pairs
    lines, terms = sources[:2], [[references[0].split()[1]], [references[1].split()[1]]]
    beam = DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0)
    runs = [
        dict(search=DecodeConfig()),
        dict(search=beam),
        dict(search=DecodeConfig(strategy="sample", seed=1, nbest=2)),
        dict(search=beam, constraints=terms, steer=True),
        dict(search=beam, constraints=terms),
    ]
    for run in runs:
        modes.clear()
        overfit_engine.translate(lines, **run)
        assert modes and all(modes), run
