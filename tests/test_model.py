"""The Transformer: the paper's shapes, causality, padding invariance, the incremental cache."""

import math

import pytest
import torch

from nmt.model import ModelConfig, Transformer, count_parameters

TINY = ModelConfig(
    vocab_size=50, d_model=32, n_heads=4, d_ff=64, encoder_layers=2, decoder_layers=2, dropout=0.0
)


def closed_form_parameters(cfg: ModelConfig) -> int:
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    attention = 4 * d * d + 4 * d  # Q, K, V and output projections with biases
    ffn = 2 * d * f + f + d
    layer_norm = 2 * d
    encoder = cfg.encoder_layers * (attention + ffn + 2 * layer_norm)
    decoder = cfg.decoder_layers * (2 * attention + ffn + 3 * layer_norm)
    embeddings = v * d if cfg.tie_embeddings else 3 * v * d
    final_norms = 2 * layer_norm if cfg.norm == "pre" else 0
    return embeddings + encoder + decoder + final_norms


def test_base_model_has_the_papers_shapes_and_parameter_count():
    cfg = ModelConfig(vocab_size=37000)
    model = Transformer(cfg)
    assert (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.encoder_layers, cfg.decoder_layers) == (
        512,
        8,
        2048,
        6,
        6,
    )
    assert cfg.dropout == 0.1 and cfg.norm == "post" and cfg.tie_embeddings
    assert len(model.encoder_layers) == 6 and len(model.decoder_layers) == 6
    assert model.decoder_layers[0].ffn.fc1.weight.shape == (2048, 512)
    assert count_parameters(model) == closed_form_parameters(cfg)
    # The paper reports 65M parameters for base with its 37k vocabulary.
    assert 60e6 < count_parameters(model) < 66e6


@pytest.mark.parametrize("norm,tie", [("pre", True), ("post", False)])
def test_parameter_count_of_variants(norm, tie):
    cfg = ModelConfig(**{**TINY.__dict__, "norm": norm, "tie_embeddings": tie})
    assert count_parameters(Transformer(cfg)) == closed_form_parameters(cfg)


def test_embeddings_are_tied_three_ways():
    model = Transformer(TINY)
    assert model.src_embed.weight is model.tgt_embed.weight
    x = torch.randn(1, 3, TINY.d_model)
    torch.testing.assert_close(model.project_vocab(x), x @ model.src_embed.weight.T)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_no_look_ahead(norm):
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**{**TINY.__dict__, "norm": norm})).eval()
    src = torch.randint(4, 50, (2, 7))
    tgt = torch.randint(4, 50, (2, 9))
    logits = model(src, tgt)
    for t in range(9):
        changed = tgt.clone()
        changed[:, t + 1 :] = torch.randint(4, 50, changed[:, t + 1 :].shape)
        torch.testing.assert_close(model(src, changed)[:, : t + 1], logits[:, : t + 1])
        if t + 1 < 9:  # and the future does matter, so the test can fail
            assert not torch.allclose(model(src, changed)[:, t + 1 :], logits[:, t + 1 :])


def test_a_sentence_alone_equals_it_inside_a_padded_batch():
    torch.manual_seed(0)
    model = Transformer(TINY).eval()
    short_src, short_tgt = torch.randint(4, 50, (1, 4)), torch.randint(4, 50, (1, 3))
    long_src, long_tgt = torch.randint(4, 50, (1, 9)), torch.randint(4, 50, (1, 8))
    src = torch.zeros(2, 9, dtype=torch.long)
    tgt = torch.zeros(2, 8, dtype=torch.long)
    src[0, :4], tgt[0, :3] = short_src, short_tgt
    src[1], tgt[1] = long_src, long_tgt
    batch_logits = model(src, tgt)
    torch.testing.assert_close(
        batch_logits[0, :3], model(short_src, short_tgt)[0], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(batch_logits[1], model(long_src, long_tgt)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_bf16_training_attention_matches_float32_sdpa(causal):
    """bf16 training on the CPU takes the written-out attention (not SDPA): the same output
    and gradients as float32 SDPA, to bf16's precision, with padded keys or the causal mask."""
    torch.manual_seed(0)
    attention = Transformer(TINY).decoder_layers[0].self_attn
    x = torch.randn(3, 6, TINY.d_model)
    mask = None
    if not causal:
        mask = torch.ones(3, 1, 1, 6, dtype=torch.bool)
        mask[0, ..., 4:] = False  # the first row's last two keys are padding

    def output_and_grads(bf16: bool):
        attention.zero_grad()
        inputs = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out, _ = attention.attend(*attention.project_self(inputs), mask, is_causal=causal)
        out.float().square().sum().backward()
        return [out.float(), inputs.grad, attention.qkv_proj.weight.grad.clone()]

    want = output_and_grads(bf16=False)  # SDPA in float32
    got = output_and_grads(bf16=True)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=0.05 * w.abs().max().item(), rtol=0.05)
    if not causal:  # the padded keys are ignored: changing them changes nothing
        inputs = x.clone()
        inputs[0, 4:] = torch.randn(2, TINY.d_model)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            changed, _ = attention.attend(*attention.project_self(inputs), mask)  # grad mode on
        torch.testing.assert_close(changed[0, :4].float(), got[0][0, :4], atol=0, rtol=0)


@pytest.mark.parametrize("chunks", [[1] * 6, [2, 3, 1], [6]])
def test_incremental_decoding_equals_full_recomputation(chunks):
    torch.manual_seed(0)
    model = Transformer(TINY).eval()
    src = torch.randint(4, 50, (3, 5))
    src[0, 3:] = 0
    tgt = torch.randint(4, 50, (3, sum(chunks)))
    pad = model.source_padding_mask(src)
    memory = model.encode(src, pad)
    full, _ = model.decode(tgt, memory, pad)
    cache, pieces, start = model.start_cache(memory), [], 0
    for size in chunks:
        logits, cache = model.decode(tgt[:, start : start + size], memory, pad, cache)
        pieces.append(logits)
        start += size
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == tgt.size(1)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("reorders", [[[2, 2, 0]], [[2, 2, 0], [2, 1]]])
def test_reorder_cache_selects_rows(reorders, grad):
    """One reorder, or two in a row (composed before the next step gathers them); without
    gradients (search) the gather writes in place, with them it goes through autograd."""
    torch.manual_seed(0)
    model = Transformer(TINY).eval()
    src = torch.randint(4, 50, (3, 5))
    tgt = torch.randint(4, 50, (3, 4))
    with torch.set_grad_enabled(grad):
        pad = model.source_padding_mask(src)
        memory = model.encode(src, pad)
        _, cache = model.decode(tgt[:, :3], memory, pad)
        index = torch.arange(3)
        for rows in map(torch.tensor, reorders):
            cache = model.reorder_cache(cache, rows, rows)
            index = index[rows]
        step, _ = model.decode(tgt[index, 3:], memory[index], pad[index], cache)
        full, _ = model.decode(tgt[index], memory[index], pad[index])
    torch.testing.assert_close(step[:, 0], full[:, 3], atol=1e-5, rtol=1e-5)
    assert step.requires_grad == grad


@pytest.mark.parametrize("record", [False, True])
def test_beams_read_their_sentences_one_source_row(record):
    """Rows 3i..3i+2 (3 beams) decode against source row i: the same logits and recorded
    attention as with every source row repeated per beam, also after the beams' prefixes
    are re-ranked among themselves (reorder_cache keeping the source rows as they are)."""
    torch.manual_seed(0)
    model = Transformer(TINY).eval()
    src = torch.randint(4, 50, (2, 5))
    src[1, 3:] = 0
    tgt = torch.randint(4, 50, (6, 4))
    pad = model.source_padding_mask(src)
    memory = model.encode(src, pad)
    repeated = memory.repeat_interleave(3, 0), pad.repeat_interleave(3, 0)
    shared = model.start_cache(memory, record)
    _, shared = model.decode(tgt[:, :3], memory, pad, shared)
    cross_k = list(shared.cross_k)
    index = torch.tensor([2, 2, 0, 4, 3, 3])  # re-ranked within each sentence's beams
    shared = model.reorder_cache(shared, index, None)
    assert all(a is b for a, b in zip(shared.cross_k, cross_k, strict=True))
    step, shared = model.decode(tgt[index, 3:], memory, pad, shared)
    full = model.start_cache(repeated[0], record)
    full_logits, full = model.decode(tgt[index], *repeated, full)
    torch.testing.assert_close(step[:, 0], full_logits[:, 3], atol=1e-5, rtol=1e-5)
    if record:
        torch.testing.assert_close(
            shared.cross_attention[:, -1], full.cross_attention[:, 3], atol=1e-6, rtol=1e-5
        )
    with pytest.raises(ValueError, match="cannot share"):
        model.decode(tgt[:5, :1], memory, pad)


def test_recorded_cross_attention_is_a_distribution_over_real_source_tokens():
    model = Transformer(TINY).eval()
    src = torch.randint(4, 50, (2, 6))
    src[1, 4:] = 0
    pad = model.source_padding_mask(src)
    memory = model.encode(src, pad)
    cache = model.start_cache(memory, record_attention=True)
    _, cache = model.decode(torch.full((2, 1), 2), memory, pad, cache)
    weights = cache.cross_attention
    assert weights.shape == (2, 1, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 1))
    assert torch.all(weights[1, :, 4:] == 0)


def test_embedding_scale_and_positions():
    model = Transformer(TINY).eval()
    assert model.embed_scale == math.sqrt(TINY.d_model)
    pos = model.positions
    assert torch.allclose(pos[0, 0::2], torch.zeros(TINY.d_model // 2))
    assert torch.allclose(pos[0, 1::2], torch.ones(TINY.d_model // 2))
    assert torch.isclose(pos[3, 2], torch.tensor(math.sin(3 / 10000 ** (2 / TINY.d_model))))


@pytest.mark.parametrize("tie", [True, False])
def test_scaled_embeddings_start_with_unit_variance(tie):
    # Token embeddings as loud as the positions: with Xavier on the (5000 x 128) table they
    # started at std ~0.22 and the CPU recipe took ~700 updates more to use its source.
    cfg = ModelConfig(vocab_size=5000, d_model=128, n_heads=4, d_ff=256, tie_embeddings=tie)
    model = Transformer(cfg)
    for embedding in (model.src_embed, model.tgt_embed):
        scaled = embedding.weight[1:] * model.embed_scale  # row 0 is padding: zero
        assert abs(scaled.std().item() - 1.0) < 0.02
        assert torch.all(embedding.weight[cfg.pad_id] == 0)
    linear = model.encoder_layers[0].ffn.fc1.weight  # (256, 128): Xavier bound sqrt(6 / 384)
    assert linear.abs().max() <= math.sqrt(6 / 384) and linear.std() > 0.07


@pytest.mark.parametrize("activation,function", [("relu", torch.relu), ("gelu", torch.nn.GELU())])
def test_feed_forward_uses_the_configured_activation(activation, function):
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**{**TINY.__dict__, "activation": activation}))
    ffn = model.encoder_layers[0].ffn
    x = torch.randn(3, TINY.d_model)
    torch.testing.assert_close(ffn(x), ffn.fc2(function(ffn.fc1(x))))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="norm"):
        ModelConfig(norm="middle")
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="activation"):
        ModelConfig(activation="tanh")
    with pytest.raises(ValueError, match="token_dropout"):
        ModelConfig(token_dropout=1.0)
    model = Transformer(ModelConfig(**{**TINY.__dict__, "max_positions": 8}))
    with pytest.raises(ValueError, match="max_positions"):
        model(torch.ones(1, 9, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))


def test_dropout_keeps_the_rate_and_the_expectation():
    from nmt.model import Dropout

    torch.manual_seed(0)
    x = torch.ones(400, 500, requires_grad=True)
    dropout = Dropout(0.3)
    y = dropout(x)
    dropped = (y == 0).float().mean().item()
    assert dropped == pytest.approx(0.3, abs=0.005)
    assert y.mean().item() == pytest.approx(1.0, abs=0.01)
    y.sum().backward()
    assert torch.equal(x.grad == 0, y == 0)  # the gradient flows exactly where values were kept
    dropout.eval()
    assert torch.equal(dropout(x), x)


def test_token_dropout_zeroes_whole_tokens_in_training_only():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**{**TINY.__dict__, "token_dropout": 0.25}))
    plain = Transformer(TINY)
    plain.load_state_dict(model.state_dict())
    tokens = torch.randint(1, TINY.vocab_size, (64, 50))
    positions = model.positions[:50]
    embedded = model.embed(model.src_embed, tokens) - positions  # train mode: token part only
    zeroed = embedded.eq(0).all(-1)  # (B, L): whole tokens, never single features
    assert zeroed.float().mean().item() == pytest.approx(0.25, abs=0.02)
    kept = model.src_embed(tokens)[~zeroed] * model.embed_scale
    torch.testing.assert_close(embedded[~zeroed], kept)  # kept tokens are not rescaled
    assert not embedded.eq(0).any(-1)[~zeroed].any()
    model.eval()
    plain.eval()
    src, tgt = tokens[:4, :9], tokens[4:8, :7]
    assert torch.equal(model(src, tgt), plain(src, tgt))  # off at test time
