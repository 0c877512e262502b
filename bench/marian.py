"""The peer model: Hugging Face's MarianMTModel in our shapes, and with our weights.

Marian is the transformers class closest to our model (post-norm, scaled embeddings, shared
embeddings, sinusoidal positions), so a model of ours maps onto it exactly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nmt.model import Transformer


def build_hf(shape: dict, vocab: int, activation: str = "relu", attention: str = "sdpa"):
    """A MarianMTModel of `shape`, its attention `attention` (eager or sdpa), and its loss."""
    from transformers import MarianConfig, MarianMTModel

    cfg = MarianConfig(
        vocab_size=vocab,
        decoder_vocab_size=vocab,
        d_model=shape["d_model"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
        encoder_attention_heads=shape["n_heads"],
        decoder_attention_heads=shape["n_heads"],
        encoder_ffn_dim=shape["d_ff"],
        decoder_ffn_dim=shape["d_ff"],
        activation_function=activation,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=1024,
        pad_token_id=0,
        forced_eos_token_id=3,  # generate ends a sentence held to its maximum length with EOS
        eos_token_id=3,
        decoder_start_token_id=2,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    model = MarianMTModel(cfg)
    model.set_attn_implementation(attention)

    def loss_sum(batch):  # the same label-smoothed loss, the way HF users compute it
        logits = model(
            input_ids=batch.src, attention_mask=batch.src.ne(0), decoder_input_ids=batch.tgt_in
        ).logits
        return F.cross_entropy(
            logits.flatten(0, 1),
            batch.tgt_out.flatten(),
            ignore_index=0,
            label_smoothing=0.1,
            reduction="sum",
        )

    return model, loss_sum


def marian_with_our_weights(model: Transformer):
    """A MarianMTModel computing what `model` computes (post-norm only)."""
    cfg = model.cfg
    if cfg.norm != "post" or not cfg.tie_embeddings or cfg.encoder_layers != cfg.decoder_layers:
        raise SystemExit("the HF comparison needs post-norm, tied embeddings, equal stacks")
    shape = dict(d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff, layers=cfg.encoder_layers)
    hf, _ = build_hf(shape, cfg.vocab_size, cfg.activation)
    ours = model.state_dict()
    with torch.no_grad():
        hf.model.shared.weight.copy_(ours["src_embed.weight"])
        for stack in (hf.model.encoder, hf.model.decoder):
            stack.embed_positions.weight.copy_(model.positions)
        for i, layer in enumerate(hf.model.encoder.layers):
            copy_layer(layer, ours, f"encoder_layers.{i}.", cross=False)
        for i, layer in enumerate(hf.model.decoder.layers):
            copy_layer(layer, ours, f"decoder_layers.{i}.", cross=True)
    return hf.eval()


def copy_layer(layer, ours: dict, prefix: str, cross: bool) -> None:
    def linear(target, weight, bias):
        target.weight.copy_(weight)
        target.bias.copy_(bias)

    w, b = ours[prefix + "self_attn.qkv_proj.weight"], ours[prefix + "self_attn.qkv_proj.bias"]
    for name, wi, bi in zip(("q_proj", "k_proj", "v_proj"), w.chunk(3), b.chunk(3), strict=True):
        linear(getattr(layer.self_attn, name), wi, bi)
    linear(layer.self_attn.out_proj, *pair(ours, prefix + "self_attn.out_proj"))
    linear(layer.self_attn_layer_norm, *pair(ours, prefix + "self_attn_res.norm"))
    if cross:
        attention = layer.encoder_attn
        linear(attention.q_proj, *pair(ours, prefix + "cross_attn.q_proj"))
        w, b = pair(ours, prefix + "cross_attn.kv_proj")
        for name, wi, bi in zip(("k_proj", "v_proj"), w.chunk(2), b.chunk(2), strict=True):
            linear(getattr(attention, name), wi, bi)
        linear(attention.out_proj, *pair(ours, prefix + "cross_attn.out_proj"))
        linear(layer.encoder_attn_layer_norm, *pair(ours, prefix + "cross_attn_res.norm"))
    linear(layer.fc1, *pair(ours, prefix + "ffn.fc1"))
    linear(layer.fc2, *pair(ours, prefix + "ffn.fc2"))
    linear(layer.final_layer_norm, *pair(ours, prefix + "ffn_res.norm"))


def pair(state: dict, name: str):
    return state[name + ".weight"], state[name + ".bias"]
