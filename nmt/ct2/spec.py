"""Our Transformer as a CTranslate2 `TransformerSpec`, built with CTranslate2's own spec API.

What has to be carried exactly, and how:
- positions: ours are the paper's table, sin on even and cos on odd features from position 0;
  CTranslate2 would generate another layout, so the table is exported as `encodings`.
- embeddings are scaled by sqrt(d_model) (`scale_embeddings`), then the position is added.
- post-norm (LayerNorm after each residual) or pre-norm (before each sublayer, plus a final
  LayerNorm per stack); LayerNorm epsilon 1e-5, torch's default.
- FFN activation relu, gelu (erf form, torch's default) or swish; an imported model's
  logits bias as the output projection's bias.
- the tied embedding is set as the source and target embedding and the output projection,
  which the converter stores once.
- the source ends with EOS (`add_source_eos`) and the decoder starts from the model's BOS
  (<s>; an imported Marian model's <pad>), with its EOS and UNK pieces named.
"""

from __future__ import annotations

import numpy as np
import torch
from ctranslate2.specs import common_spec
from ctranslate2.specs.transformer_spec import TransformerSpec
from torch import nn

from nmt.model import DecoderLayer, EncoderLayer, ModelConfig, Residual, Transformer
from nmt.tokenizer import Vocabulary

CT2_ACTIVATIONS = {
    "relu": common_spec.Activation.RELU,
    "gelu": common_spec.Activation.GELU,
    "swish": common_spec.Activation.SWISH,
}
CT2_NORMS = ("post", "pre")
LAYER_NORM_EPSILON = 1e-5  # nn.LayerNorm's default, which the model uses


def unsupported(cfg: ModelConfig) -> str | None:
    """The first model setting the export cannot express, as a one-line reason, or None."""
    if cfg.activation not in CT2_ACTIVATIONS:
        return (
            f"model.activation={cfg.activation!r}: CTranslate2 export knows {list(CT2_ACTIVATIONS)}"
        )
    if cfg.norm not in CT2_NORMS:
        return f"model.norm={cfg.norm!r}: CTranslate2 export knows {list(CT2_NORMS)}"
    if cfg.d_model % 2:
        return f"model.d_model={cfg.d_model}: the sinusoidal table needs an even width"
    return None


def transformer_spec(model: Transformer, tokenizer: Vocabulary) -> TransformerSpec:
    """The spec of `model` (float32 weights) with its tokenizer's vocabulary, shared by both
    sides."""
    cfg = model.cfg
    pieces = tokenizer.vocabulary_pieces
    reason = unsupported(cfg)
    if reason:
        raise ValueError(f"cannot export: {reason}")
    spec = TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers),
        cfg.n_heads,
        pre_norm=cfg.norm == "pre",
        activation=CT2_ACTIVATIONS[cfg.activation],
        # return_attention gives what our record_attention gives: this layer, these heads
        alignment_layer=cfg.alignment_layer_index,
        alignment_heads=cfg.alignment_heads or cfg.n_heads,
    )
    positions = array(model.positions)
    set_stack_inputs(spec.encoder, model.src_embed, positions)
    set_stack_inputs(spec.decoder, model.tgt_embed, positions)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers, strict=True):
        set_encoder_layer(layer_spec, layer)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers, strict=True):
        set_decoder_layer(layer_spec, layer)
    if cfg.norm == "pre":
        set_layer_norm(spec.encoder.layer_norm, model.encoder_norm)
        set_layer_norm(spec.decoder.layer_norm, model.decoder_norm)
    spec.decoder.projection.weight = array(model.output_weight)
    if model.output_bias is not None:
        spec.decoder.projection.bias = array(model.output_bias)

    spec.config.add_source_eos = True  # our sources end with EOS
    spec.config.bos_token = pieces[cfg.bos_id]
    spec.config.decoder_start_token = pieces[cfg.bos_id]  # and the decoder starts from BOS
    spec.config.eos_token = pieces[cfg.eos_id]
    spec.config.unk_token = pieces[tokenizer.unk_id]
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    return spec


def array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy().copy()


def set_stack_inputs(stack_spec, embedding: nn.Embedding, positions: np.ndarray) -> None:
    """Embedding, its sqrt(d_model) scale and the position table of an encoder or decoder."""
    embeddings = stack_spec.embeddings
    (embeddings[0] if isinstance(embeddings, list) else embeddings).weight = array(embedding.weight)
    stack_spec.scale_embeddings = True
    stack_spec.position_encodings.encodings = positions


def set_encoder_layer(spec, layer: EncoderLayer) -> None:
    set_self_attention(spec.self_attention, layer.self_attn, layer.self_attn_res)
    set_ffn(spec.ffn, layer)


def set_decoder_layer(spec, layer: DecoderLayer) -> None:
    set_self_attention(spec.self_attention, layer.self_attn, layer.self_attn_res)
    attention = layer.cross_attn
    set_linear(spec.attention.linear[0], attention.q_proj)
    set_linear(spec.attention.linear[1], attention.kv_proj)  # K then V, fused as CT2 expects
    set_linear(spec.attention.linear[2], attention.out_proj)
    set_layer_norm(spec.attention.layer_norm, layer.cross_attn_res.norm)
    set_ffn(spec.ffn, layer)


def set_self_attention(spec, attention, residual: Residual) -> None:
    set_linear(spec.linear[0], attention.qkv_proj)  # Q, K, V fused in this order, as in CT2
    set_linear(spec.linear[1], attention.out_proj)
    set_layer_norm(spec.layer_norm, residual.norm)


def set_ffn(spec, layer: EncoderLayer | DecoderLayer) -> None:
    set_linear(spec.linear_0, layer.ffn.fc1)
    set_linear(spec.linear_1, layer.ffn.fc2)
    set_layer_norm(spec.layer_norm, layer.ffn_res.norm)


def set_linear(spec, linear: nn.Linear) -> None:
    spec.weight = array(linear.weight)
    if linear.bias is not None:
        spec.bias = array(linear.bias)


def set_layer_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma = array(norm.weight)
    spec.beta = array(norm.bias)
