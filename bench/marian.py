"""The training peer: Hugging Face's MarianMTModel in our shapes, configured as the export
configures it (`nmt.hf.marian`). The inference peer is the export itself, our weights in
Marian (`nmt.hf.marian.marian_model`)."""

from __future__ import annotations

import torch.nn.functional as F

from nmt.hf.marian import marian_config
from nmt.model import ModelConfig


def shape_config(shape: dict, vocab: int, **settings) -> ModelConfig:
    """Our ModelConfig of a benchmark shape (d_model, n_heads, d_ff, layers each side)."""
    return ModelConfig(
        vocab_size=vocab,
        d_model=shape["d_model"],
        n_heads=shape["n_heads"],
        d_ff=shape["d_ff"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
        **settings,
    )


def build_hf(shape: dict, vocab: int, activation: str = "relu", attention: str = "sdpa"):
    """A MarianMTModel of `shape` (dropout 0.1, as ours), its attention `attention` (eager or
    sdpa), and its loss."""
    from transformers import MarianMTModel

    cfg = shape_config(shape, vocab, activation=activation)
    model = MarianMTModel(marian_config(cfg))
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
