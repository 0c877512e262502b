"""Our Transformer as Hugging Face's `MarianMTModel`: the config, the weights and the search.

Marian is the transformers class our model maps onto exactly: post-norm layers, embeddings
scaled by sqrt(d_model), sinusoidal positions from position 0, shared (or separate)
embeddings, relu, gelu or swish, LayerNorm epsilon 1e-5, a logits bias (zero for our own
models), a source ending in EOS and a decoder that starts from a configurable token (our BOS;
an imported model's own special ids are carried). nmt.hf.marian_import reads the other way.

One layout differs. Marian's position table puts sin in the first half of the features and
cos in the second; ours interleaves them (sin on even features, cos on odd). `feature_order`
permutes the model dimension: Marian's feature j is our feature order[j]. Every weight that
reads or writes the residual stream is permuted the same way (embeddings, the input columns
of Q/K/V and FFN-in, the output rows of attention-out and FFN-out, LayerNorm), so Marian's
hidden states are ours, permuted. LayerNorm, attention and the FFN do not care about the
order of the features, and the logits come out in vocabulary order, unpermuted.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.decoding.penalties import gnmt_as_power
from nmt.decoding.settings import DecodeConfig
from nmt.model import ModelConfig, Transformer

# ours -> transformers' ACT2FN (each exact)
HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish"}
MAX_LENGTH = 512  # generate's ceiling on output tokens (MarianTokenizer's model_max_length)


def unsupported(cfg: ModelConfig) -> str | None:
    """The first model setting MarianMTModel cannot express, as a one-line reason, or None."""
    if cfg.norm != "post":
        return (
            f"model.norm={cfg.norm!r}: MarianMTModel is post-norm (LayerNorm after each "
            "residual) with no final LayerNorm"
        )
    if cfg.activation not in HF_ACTIVATIONS:
        return f"model.activation={cfg.activation!r}: the export knows {list(HF_ACTIVATIONS)}"
    if cfg.d_model % 2:
        return f"model.d_model={cfg.d_model}: the sinusoidal table needs an even width"
    return None


def feature_order(d_model: int) -> Tensor:
    """(D,) Marian's feature j is our feature order[j]: our even features, then our odd."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_config(cfg: ModelConfig):
    """The `MarianConfig` of a model of ours."""
    from transformers import MarianConfig

    return MarianConfig(
        vocab_size=cfg.vocab_size,
        decoder_vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function=HF_ACTIVATIONS[cfg.activation],
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        max_position_embeddings=cfg.max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=cfg.tie_embeddings,
        tie_word_embeddings=cfg.tie_embeddings,
        pad_token_id=cfg.pad_id,
        bos_token_id=cfg.bos_id,
        eos_token_id=cfg.eos_id,
        forced_eos_token_id=cfg.eos_id,  # a sentence held to max_length ends with EOS, as ours
        decoder_start_token_id=cfg.bos_id,
    )


def marian_model(model: Transformer):
    """A float32 `MarianMTModel` in eval mode that computes what `model` computes."""
    from transformers import MarianMTModel

    cfg = model.cfg
    reason = unsupported(cfg)
    if reason:
        raise ValueError(f"cannot export: {reason}")
    hf = MarianMTModel(marian_config(cfg))
    order = feature_order(cfg.d_model)
    ours = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    bias = ours.pop("output_bias", torch.zeros(cfg.vocab_size))
    weights = {"final_logits_bias": bias.reshape(1, -1)}
    weights.update(embedding_weights(model, ours, order))
    for i in range(cfg.encoder_layers):
        weights.update(layer_weights(ours, order, f"encoder_layers.{i}.", f"encoder.layers.{i}."))
    for i in range(cfg.decoder_layers):
        weights.update(layer_weights(ours, order, f"decoder_layers.{i}.", f"decoder.layers.{i}."))
    weights = {
        k if k.startswith(("lm_head", "final")) else f"model.{k}": v for k, v in weights.items()
    }
    missing, unexpected = hf.load_state_dict(weights, strict=False)
    # Marian makes its position tables; a tied embedding is stored once, as model.shared.
    made = {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}
    if cfg.tie_embeddings:
        made |= {f"model.{s}.embed_tokens.weight" for s in ("encoder", "decoder")}
        made.add("lm_head.weight")
    if unexpected or set(missing) - made:
        raise RuntimeError(f"weights left over {unexpected} or missing {missing}")
    return hf.eval()


def embedding_weights(model: Transformer, ours: dict[str, Tensor], order: Tensor) -> dict:
    """The token embeddings and the output projection, their feature columns permuted."""
    if model.cfg.tie_embeddings:
        return {"shared.weight": ours["src_embed.weight"][:, order]}
    return {
        "encoder.embed_tokens.weight": ours["src_embed.weight"][:, order],
        "decoder.embed_tokens.weight": ours["tgt_embed.weight"][:, order],
        "lm_head.weight": ours["output_proj.weight"][:, order],
    }


def layer_weights(ours: dict[str, Tensor], order: Tensor, src: str, dst: str) -> dict:
    """One encoder or decoder layer's weights under Marian's names, permuted (module doc)."""

    def reads(name: str, chunks: int, targets: list[str]) -> dict:
        """A linear map from the residual stream: its input columns permuted; a fused one
        (Q, K, V) split into Marian's separate projections."""
        w, b = ours[src + name + ".weight"][:, order], ours[src + name + ".bias"]
        out = {}
        for target, wi, bi in zip(targets, w.chunk(chunks), b.chunk(chunks), strict=True):
            out[dst + target + ".weight"], out[dst + target + ".bias"] = wi, bi
        return out

    def writes(name: str, target: str) -> dict:
        """A linear map into the residual stream (or a LayerNorm): its outputs permuted."""
        w, b = ours[src + name + ".weight"], ours[src + name + ".bias"]
        return {dst + target + ".weight": w[order], dst + target + ".bias": b[order]}

    out = reads(
        "self_attn.qkv_proj", 3, ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]
    )
    out |= writes("self_attn.out_proj", "self_attn.out_proj")
    out |= writes("self_attn_res.norm", "self_attn_layer_norm")
    if src + "cross_attn.q_proj.weight" in ours:
        out |= reads("cross_attn.q_proj", 1, ["encoder_attn.q_proj"])
        out |= reads("cross_attn.kv_proj", 2, ["encoder_attn.k_proj", "encoder_attn.v_proj"])
        out |= writes("cross_attn.out_proj", "encoder_attn.out_proj")
        out |= writes("cross_attn_res.norm", "encoder_attn_layer_norm")
    out |= reads("ffn.fc1", 1, ["fc1"])
    out |= writes("ffn.fc2", "fc2")
    out |= writes("ffn_res.norm", "final_layer_norm")
    return out


def generation_settings(search: DecodeConfig | None, cfg: ModelConfig) -> tuple[dict, list[str]]:
    """`GenerationConfig` fields that run `search` (greedy without one), and what could not
    be carried exactly, one line each.

    Exact: greedy, sampling's temperature/top-k/top-p, min_len, no_repeat_ngram_size, the
    power-law length penalty, first_k stopping (HF's early_stopping=True), PAD and BOS never
    chosen. Not exact: a GNMT alpha runs as its power-law counterpart (`gnmt_as_power`, as in
    CTranslate2); our `exact` stop as HF's heuristic one; our relative maximum length
    (a * source + b) as a fixed ceiling.
    """
    search = search or DecodeConfig()
    settings: dict = {
        "bos_token_id": cfg.bos_id,
        "eos_token_id": cfg.eos_id,
        "pad_token_id": cfg.pad_id,
        "decoder_start_token_id": cfg.bos_id,
        "forced_eos_token_id": cfg.eos_id,
        # our searches never choose them
        "suppress_tokens": sorted({cfg.pad_id, cfg.bos_id}),
        "max_new_tokens": min(cfg.max_positions, MAX_LENGTH) - 1,  # after the start token
        "num_beams": 1,
        "do_sample": False,
    }
    notes = [
        f"maximum length: ours is {search.max_len_a} x source + {search.max_len_b} tokens; "
        f"generate stops at {settings['max_new_tokens']} (max_new_tokens)"
    ]
    if search.min_len:
        settings["min_new_tokens"] = search.min_len
    if search.no_repeat_ngram_size:
        settings["no_repeat_ngram_size"] = search.no_repeat_ngram_size
    if search.strategy == "beam":
        alpha = search.len_penalty or 0.0
        if search.length_norm == "gnmt" and alpha:
            notes.append(
                f"length penalty: GNMT alpha {alpha} runs as the power law's "
                f"{gnmt_as_power(alpha):.3f} (transformers has no GNMT form)"
            )
            alpha = gnmt_as_power(alpha)
        settings.update(
            num_beams=search.beam_size,
            length_penalty=alpha,
            early_stopping=search.stop == "first_k",
        )
        if search.stop == "exact":
            notes.append(
                "stopping: ours is exact (no live hypothesis can still win); generate's is its "
                'heuristic (early_stopping=false; "never" would run a rewarded length to '
                "max_length)"
            )
    elif search.strategy == "sample":
        settings.update(
            do_sample=True, temperature=search.temperature, top_k=search.top_k, top_p=search.top_p
        )
    return settings, notes
