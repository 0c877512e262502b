"""Sampling and forced target prefixes, on both backends, with the session's overfit model."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from conftest import one_thread, pad

from nmt.config import DecodeConfig
from nmt.decoding.sampling import nucleus
from nmt.decoding.search import translate_batch
from nmt.decoding.state import SearchOptions
from nmt.inference.ct2_engine import CTranslate2Engine
from nmt.inference.torch_engine import TorchEngine
from nmt.vocabulary import EOS_ID

GREEDY = DecodeConfig(max_len_b=15)
SAMPLE = DecodeConfig(strategy="sample", max_len_b=15, seed=7)
BEAM = DecodeConfig(strategy="beam", beam_size=4, len_penalty=0.6, max_len_b=15)
LINES = [3, 17, 29, 41, 58]  # overfit pairs of varied length


@pytest.fixture(scope="module", autouse=True)
def single_thread(overfit_engine):
    with one_thread():
        yield


@pytest.fixture(scope="module", params=["torch", "ctranslate2"])
def backend(request, model_pt, ct2_f32_dir):
    """The overfit model on either backend (CTranslate2: exported in float32)."""
    if request.param == "torch":
        return TorchEngine.load([str(model_pt)], "cpu", "float32", 4096)
    return CTranslate2Engine(ct2_f32_dir, "cpu", "default", 1, 4096)


@pytest.fixture(scope="module")
def sources(overfit_pairs) -> list[str]:
    return [overfit_pairs[0][i] for i in LINES]


def tokens(nbests) -> list[list[list[int]]]:
    return [[h.tokens for h in nbest] for nbest in nbests]


def test_top_k_1_and_temperature_0_sample_the_greedy_output(backend, sources):
    greedy = tokens(backend.translate(sources, GREEDY))
    for cfg in (replace(SAMPLE, top_k=1), replace(SAMPLE, temperature=0.0)):
        assert tokens(backend.translate(sources, cfg)) == greedy, cfg
    near_zero = replace(SAMPLE, temperature=1e-4, nbest=3)
    assert tokens(backend.translate(sources, near_zero)) == [g * 3 for g in greedy]


def test_a_seed_repeats_its_samples_and_another_seed_does_not(backend, sources):
    hot = replace(SAMPLE, temperature=1.5, nbest=4)
    first = tokens(backend.translate(sources, hot))
    assert tokens(backend.translate(sources, hot)) == first
    assert tokens(backend.translate(sources, replace(hot, seed=8))) != first
    assert all(len(nbest) == 4 for nbest in first)


def first_token_probs(translator, source: str, temperature: float) -> torch.Tensor:
    """softmax(log p(y1 | x) / temperature) of the torch model: what sampling should follow."""
    model = translator.model
    src = pad([translator.tokenizer.encode([source])[0] + [EOS_ID]])
    with torch.inference_mode():
        memory = model.encode(src, model.source_padding_mask(src))
        logits, _ = model.decode(torch.tensor([[2]]), memory, model.source_padding_mask(src))
    log_probs = logits[0, -1].float().log_softmax(-1)
    log_probs[[0, 2]] = float("-inf")  # PAD and BOS are never chosen
    return (log_probs / temperature).softmax(-1)


@pytest.mark.parametrize("top_k", [0, 3])
def test_sampling_frequencies_follow_the_model(backend, overfit_engine, sources, top_k):
    """4,000 one-token samples of one sentence at temperature 3 (a flat enough distribution
    to test): over the 5 most probable tokens and the rest as one bucket, their frequencies
    match the model's probabilities within 0.03 total variation (sampling noise is ~0.01),
    and top-k draws only from the k most probable tokens."""
    n = 4000
    cfg = replace(SAMPLE, temperature=3.0, top_k=top_k, nbest=n, max_len_a=0.0, max_len_b=1)
    samples = backend.translate(sources[:1], cfg)[0]
    drawn = [h.tokens[0] if h.tokens else EOS_ID for h in samples]  # [] when EOS came first
    probs = first_token_probs(overfit_engine, sources[0], 3.0)
    if top_k:
        top = probs.topk(top_k)
        assert set(drawn) <= set(top.indices.tolist())
        probs = torch.zeros_like(probs).scatter(0, top.indices, top.values / top.values.sum())
    freq = torch.bincount(torch.tensor(drawn), minlength=probs.numel()).float() / n
    top = probs.topk(5).indices
    buckets = [(freq[top], 1 - freq[top].sum()), (probs[top], 1 - probs[top].sum())]
    (f_top, f_rest), (p_top, p_rest) = buckets
    total_variation = 0.5 * ((f_top - p_top).abs().sum() + (f_rest - p_rest).abs()).item()
    assert total_variation < 0.03, total_variation


def test_nucleus_keeps_the_fewest_tokens_reaching_top_p():
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = nucleus(logits, 0.75).isfinite()[0].tolist()
    assert kept == [True, True, False, False]
    assert nucleus(logits, 0.2).isfinite()[0].tolist() == [True, False, False, False]
    assert nucleus(logits, 1.0).isfinite().all()


@pytest.mark.parametrize("cfg", [GREEDY, BEAM, replace(SAMPLE, top_k=1)], ids=str)
def test_a_prefix_of_the_greedy_output_continues_into_it(backend, sources, cfg):
    """Line i gets the first i + 1 words of its own greedy translation as prefix (whole words
    encode to the same pieces as inside the sentence)."""
    tokenizer = backend.tokenizer
    greedy_ids = [n[0].tokens for n in backend.translate(sources, cfg)]
    texts = tokenizer.decode(greedy_ids)
    prefixes = [" ".join(text.split(" ")[: i + 1]) for i, text in enumerate(texts)]
    forced = backend.translate(sources, cfg, prefixes=prefixes)
    assert [n[0].tokens for n in forced] == greedy_ids
    assert tokenizer.decode([n[0].tokens for n in forced]) == texts


def test_any_prefix_starts_the_output_and_empty_lines_stay_empty(backend, sources):
    prefixes = ["Zwei Hunde", "", "Ein"]
    lines = [sources[0], sources[1], ""]
    out = backend.translate(lines, BEAM, prefixes=prefixes)
    text = backend.tokenizer.decode([n[0].tokens for n in out[:2]])
    assert text[0].startswith("Zwei Hunde") and out[2] == []  # continued, maybe mid-word
    assert (
        text[1] == backend.tokenizer.decode([backend.translate(lines[1:2], BEAM)[0][0].tokens])[0]
    )


@pytest.mark.parametrize("cfg", [GREEDY, BEAM, replace(SAMPLE, top_k=1)], ids=str)
def test_a_prefix_ending_in_a_space_ends_its_word(backend, sources, cfg):
    """Each line's prefix is its greedy translation's first word less its last letter, which
    the search writes on into a longer word for some lines. The same prefix with a space
    after holds the same pieces (a trailing space is no piece), and the next token starts a
    word (or is punctuation alone) for every line, alone or batched with lines whose
    prefixes do not end a word."""
    tokenizer = backend.tokenizer
    greedy = backend.translate(sources, GREEDY)
    cut = [text.split()[0][:-1] for text in tokenizer.decode([n[0].tokens for n in greedy])]
    assert all(len(c) >= 2 for c in cut), cut
    prefixes = [tokenizer.target.encode([c])[0] for c in cut]
    ends_word = tokenizer.word_ends

    def next_ends_word(nbests) -> list[bool]:
        for prefix, nbest in zip(prefixes, nbests, strict=True):
            assert nbest[0].tokens[: len(prefix)] == prefix
        return [ends_word[n[0].tokens[len(p)]] for p, n in zip(prefixes, nbests, strict=True)]

    assert not all(next_ends_word(backend.translate(sources, cfg, prefixes=cut)))
    ended = backend.translate(sources, cfg, prefixes=[c + " " for c in cut])
    assert all(next_ends_word(ended)), [tokenizer.pieces(n[0].tokens) for n in ended]
    mixed = [c + " " * (i % 2) for i, c in enumerate(cut)]
    batched = backend.translate(sources, cfg, prefixes=mixed)
    alone = [
        backend.translate([s], cfg, prefixes=[p])[0] for s, p in zip(sources, mixed, strict=True)
    ]
    assert tokens(batched) == tokens(alone)
    assert tokens(batched)[1::2] == tokens(ended)[1::2]


def test_a_prefix_longer_than_the_length_limit_is_kept_whole(overfit_engine, sources):
    model, tokenizer = overfit_engine.model, overfit_engine.tokenizer
    prefix = tokenizer.encode(["Ein Mann mit einem Hut und ein Hund"])[0]
    src = pad([tokenizer.encode([sources[0]])[0] + [EOS_ID]])
    short = replace(GREEDY, max_len_a=0.0, max_len_b=2)
    out = translate_batch(model, src, short, SearchOptions(target_prefix=pad([prefix])))[0][0]
    assert out.tokens == prefix  # the limit grew to the prefix, then EOS
