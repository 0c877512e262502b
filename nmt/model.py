"""The encoder-decoder Transformer of "Attention Is All You Need", in plain PyTorch.

Shapes: B batch, S source length, T target length, D d_model, H heads, Dh = D // H, V vocab.
Masks follow `scaled_dot_product_attention`: boolean, True where attention is allowed.

The model knows nothing of training, files or tokenizers. Everything else is built on three
methods: `encode`, `decode` (one or many steps, with an explicit `DecoderCache`) and `forward`
(teacher forcing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.config import ACTIVATION_NAMES, ModelConfig

# model.activation's functions (swish, SiLU: what Marian/OPUS-MT models use, nmt.hf.marian_import)
ACTIVATIONS = dict(zip(ACTIVATION_NAMES, (F.relu, F.gelu, F.silu), strict=True))


@dataclass
class DecoderCache:
    """What incremental decoding keeps between steps, per decoder layer.

    self_k/self_v: (B0, H, T_so_far, Dh), grown by one step per call.
    self_rows: (B,) the rows of self_k/self_v that the batch's rows continue, or None for row i
    continues row i. A reorder only records them; the next step's copy that grows the cache
    gathers them, so a beam step copies the cache once, not twice.
    cross_k/cross_v: (B, H, S, Dh), computed from the encoder output once.
    cross_attention: (B, T_new, S) the alignment layer's cross-attention averaged over its
    alignment heads (ModelConfig), filled by `decode` only when `record_attention` is set (for
    alignments and reports; it costs that layer a non-fused attention).
    """

    self_k: list[Tensor] = field(default_factory=list)
    self_v: list[Tensor] = field(default_factory=list)
    self_rows: Tensor | None = None
    cross_k: list[Tensor] = field(default_factory=list)
    cross_v: list[Tensor] = field(default_factory=list)
    record_attention: bool = False
    cross_attention: Tensor | None = None

    @property
    def length(self) -> int:
        return self.self_k[0].size(2) if self.self_k else 0


def sinusoidal_positions(max_positions: int, d_model: int) -> Tensor:
    """(max_positions, D) table: sin on even features, cos on odd, wavelengths 2pi..10000*2pi."""
    position = torch.arange(max_positions, dtype=torch.float32).unsqueeze(1)
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(max_positions, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class Dropout(nn.Dropout):
    """nn.Dropout with a cheaper mask on the CPU, where `bernoulli_` is slow. Each 32-bit draw
    of torch's generator gives two 15-bit integers, compared with round(p * 2^15) (p exact to
    2^-15); the mask is made once as a scaled float tensor, so backward is one multiply
    (measured in docs/benchmarks.md). Other devices use the fused kernel."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, True)
        n = x.numel()
        bits = torch.empty((n + 1) // 2, dtype=torch.int32).random_().view(torch.int16)[:n]
        keep = bits.bitwise_and_(2**15 - 1).view(x.shape) >= round(self.p * 2**15)
        return x * keep.to(x.dtype).mul_(1.0 / (1.0 - self.p))


class MultiHeadAttention(nn.Module):
    """Multi-head attention through `scaled_dot_product_attention`, or written out when the
    weights are wanted or when training in bf16 on the CPU (see `attend`).

    Self-attention projects Q, K and V with one fused matrix; cross-attention projects Q from
    the decoder and K, V (fused) from the encoder memory, which the cache keeps.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float, cross: bool):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.dropout = dropout
        self.cross = cross
        if cross:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, L, D) -> (B, H, L, Dh)."""
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)

    def project_self(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, L, D) -> q, k, v each (B, H, L, Dh)."""
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder memory (B, S, D) -> cross-attention k, v each (B, H, S, Dh)."""
        k, v = self.kv_proj(memory).chunk(2, dim=-1)
        return self.split_heads(k), self.split_heads(v)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        is_causal: bool = False,
        return_weights: bool = False,
        weight_heads: int = 0,
    ) -> tuple[Tensor, Tensor | None]:
        """q (B, H, Lq, Dh), k/v (B_kv, H, Lk, Dh) with B = B_kv * g, mask broadcastable to
        (B_kv, H, g * Lq, Lk).

        With g > 1, rows g*i .. g*i + g - 1 of q attend to row i of k/v (the beams of one
        sentence to its source): they go in as g * Lq queries of that row, so the keys and
        values are read once per source rather than once per beam.
        Returns the projected output (B, Lq, D) and, if asked, weights averaged over the first
        `weight_heads` heads (0: all) (B, Lq, Lk).
        """
        B, H, Lq, Dh = q.shape
        groups, rest = divmod(B, k.size(0))
        if rest:
            raise ValueError(f"{B} query rows cannot share {k.size(0)} key rows evenly")
        if groups > 1:
            q = q.view(k.size(0), groups, H, Lq, Dh).transpose(1, 2).flatten(2, 3)
        dropout = self.dropout if self.training else 0.0
        weights = None
        if return_weights or (
            q.device.type == "cpu" and q.dtype != torch.float32 and torch.is_grad_enabled()
        ):
            # Written out, for the weights; and for bf16 training on the CPU, where SDPA's
            # reduced-precision backward is far slower than float32's (torch 2.13) while the
            # products at our lengths are small, so the plain products win
            # (docs/benchmarks.md).
            scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(Dh))  # (B, H, Lq, Lk)
            if is_causal:
                mask = torch.ones(Lq, k.size(2), dtype=torch.bool, device=q.device).tril()
            if mask is not None:
                scores.masked_fill_(~mask, float("-inf"))
            probs = scores.softmax(dim=-1)
            if return_weights:
                weights = probs[:, : weight_heads or H].mean(dim=1).view(B, Lq, -1)
            out = F.dropout(probs, dropout, self.training) @ v
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal
            )
        out = out.transpose(1, 2).reshape(B, Lq, H * Dh)  # (B_kv, g * Lq, H, Dh) -> (B, Lq, D)
        return self.out_proj(out), weights


class FeedForward(nn.Module):
    """Position-wise FFN: Linear(D, d_ff) -> ReLU or GELU -> dropout -> Linear(d_ff, D)."""

    def __init__(self, d_model: int, d_ff: int, activation: str, activation_dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self.activation_dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.activation_dropout(self.activation(self.fc1(x))))


class Residual(nn.Module):
    """Residual connection with LayerNorm after (post-norm, the paper) or before (pre-norm)."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def before(self, x: Tensor) -> Tensor:
        """The input the sublayer sees."""
        return self.norm(x) if self.pre_norm else x

    def after(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """Add the sublayer output to the residual stream."""
        y = x + self.dropout(sublayer_out)
        return y if self.pre_norm else self.norm(y)


def attention_sublayer(cfg: ModelConfig, cross: bool) -> tuple[MultiHeadAttention, Residual]:
    """An attention block and the residual connection around it."""
    attention = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, cross=cross)
    return attention, Residual(cfg.d_model, cfg.dropout, pre_norm=cfg.norm == "pre")


def feed_forward_sublayer(cfg: ModelConfig) -> tuple[FeedForward, Residual]:
    """A position-wise FFN and the residual connection around it."""
    ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
    return ffn, Residual(cfg.d_model, cfg.dropout, pre_norm=cfg.norm == "pre")


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.self_attn_res = attention_sublayer(cfg, cross=False)
        self.ffn, self.ffn_res = feed_forward_sublayer(cfg)

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        """x (B, S, D), key_mask (B, 1, 1, S) -> (B, S, D)."""
        q, k, v = self.self_attn.project_self(self.self_attn_res.before(x))
        attn, _ = self.self_attn.attend(q, k, v, key_mask)
        x = self.self_attn_res.after(x, attn)
        return self.ffn_res.after(x, self.ffn(self.ffn_res.before(x)))


def extend_cache(past: Tensor, new: Tensor, rows: Tensor | None) -> Tensor:
    """past (B0, H, P, Dh), new (B, H, T, Dh) -> (B, H, P + T, Dh): row i is past row rows[i]
    (row i if rows is None) followed by new row i, gathered straight into place."""
    B, H, T, Dh = new.shape
    P = past.size(2)
    out = new.new_empty(B, H, P + T, Dh)
    if rows is None:
        out[:, :, :P] = past
    elif past.requires_grad:  # `out=` records no gradient: gather, then copy
        out[:, :, :P] = past.index_select(0, rows)
    else:
        torch.index_select(past, 0, rows, out=out[:, :, :P])
    out[:, :, P:] = new
    return out


@dataclass
class PastKeys:
    """What a decoder layer's self-attention has of earlier steps: k, v (B0, H, P, Dh), None at
    the first step; rows (B,) the rows of them this batch continues, None for row i; mask
    (T, P + T) over [past | new] keys, None for plain causal attention."""

    k: Tensor | None
    v: Tensor | None
    rows: Tensor | None
    mask: Tensor | None


@dataclass
class MemoryKeys:
    """The encoder's output as one decoder layer's cross-attention reads it: k, v
    (B_src, H, S, Dh); mask (B_src, 1, 1, S), True at real source tokens."""

    k: Tensor
    v: Tensor
    mask: Tensor


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.self_attn_res = attention_sublayer(cfg, cross=False)
        self.cross_attn, self.cross_attn_res = attention_sublayer(cfg, cross=True)
        self.ffn, self.ffn_res = feed_forward_sublayer(cfg)

    def forward(
        self, x: Tensor, past: PastKeys, memory: MemoryKeys, record_attention: bool, heads: int = 0
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """One decoder layer over T new positions: x (B, T, D), B = B_src * g with g consecutive
        rows per source (beams). Returns x (B, T, D), the grown self-attention keys and values
        (B, H, P + T, Dh) and cross-attention weights (B, T, S) averaged over the first `heads`
        heads (0: all) if `record_attention`.
        """
        q, k, v = self.self_attn.project_self(self.self_attn_res.before(x))
        if past.k is not None:
            k, v = extend_cache(past.k, k, past.rows), extend_cache(past.v, v, past.rows)
        attn, _ = self.self_attn.attend(
            q, k, v, past.mask, is_causal=past.mask is None and q.size(2) > 1
        )
        x = self.self_attn_res.after(x, attn)
        q = self.cross_attn.split_heads(self.cross_attn.q_proj(self.cross_attn_res.before(x)))
        attn, weights = self.cross_attn.attend(
            q, memory.k, memory.v, memory.mask, return_weights=record_attention, weight_heads=heads
        )
        x = self.cross_attn_res.after(x, attn)
        x = self.ffn_res.after(x, self.ffn(self.ffn_res.before(x)))
        return x, k, v, weights


class Transformer(nn.Module):
    """Encoder-decoder Transformer with shared (joint-vocabulary) embeddings."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_scale = math.sqrt(cfg.d_model)
        self.src_embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        if cfg.tie_embeddings:
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
            self.output_proj = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.register_buffer(
            "positions", sinusoidal_positions(cfg.max_positions, cfg.d_model), persistent=False
        )
        self.register_buffer(
            "output_bias", torch.zeros(cfg.vocab_size) if cfg.output_bias else None
        )
        self.embed_dropout = Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        pre = cfg.norm == "pre"
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.reset_parameters()

    def set_dropout(self, p: float) -> None:
        """Change `cfg.dropout` (residual and embedding dropout) in place, e.g. mid-training."""
        self.cfg = replace(self.cfg, dropout=p)
        self.embed_dropout.p = p
        for module in self.modules():
            if isinstance(module, Residual):
                module.dropout.p = p

    def reset_parameters(self) -> None:
        """Xavier-uniform for every weight matrix, zero biases; embeddings N(0, d_model^-0.5).

        Scaled by sqrt(d_model), the embeddings start with unit variance, on a par with the
        sinusoidal positions. Xavier on a (vocabulary x d_model) matrix would start them ~5x
        smaller, and a model whose input is mostly position learns to use its source late.
        """
        embeddings = (self.src_embed.weight, self.tgt_embed.weight)
        for name, param in self.named_parameters():
            if any(param is weight for weight in embeddings):
                nn.init.normal_(param, mean=0.0, std=self.cfg.d_model**-0.5)
            elif param.dim() > 1:
                nn.init.xavier_uniform_(param)
            elif name.endswith("bias"):
                nn.init.zeros_(param)
        with torch.no_grad():
            self.src_embed.weight[self.cfg.pad_id].zero_()
            self.tgt_embed.weight[self.cfg.pad_id].zero_()

    def embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        """tokens (B, L) -> (B, L, D): scaled embedding + sinusoidal position, then dropout.

        In training, `token_dropout` zeroes whole token embeddings first (the position stays),
        so the model must fill in words from their context, on both sides. Kept tokens are not
        rescaled: they look as they do at test time, and a dropped one looks like no word.
        """
        L = tokens.size(1)
        if offset + L > self.cfg.max_positions:
            raise ValueError(
                f"sequence of {offset + L} tokens exceeds "
                f"model.max_positions={self.cfg.max_positions}"
            )
        x = embedding(tokens) * self.embed_scale
        if self.training and self.cfg.token_dropout > 0.0:
            keep = torch.rand(tokens.shape, device=tokens.device) >= self.cfg.token_dropout
            x = x * keep.unsqueeze(-1).to(x.dtype)
        x = x + self.positions[offset : offset + L].to(embedding.weight.dtype)
        return self.embed_dropout(x)

    def source_padding_mask(self, src: Tensor) -> Tensor:
        """src (B, S) -> (B, S) bool, True at padding."""
        return src.eq(self.cfg.pad_id)

    def encode(self, src: Tensor, src_pad_mask: Tensor) -> Tensor:
        """src (B, S) token ids, src_pad_mask (B, S) True at padding -> memory (B, S, D)."""
        key_mask = ~src_pad_mask[:, None, None, :]  # (B, 1, 1, S)
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, key_mask)
        return self.encoder_norm(x)

    def start_cache(self, memory: Tensor, record_attention: bool = False) -> DecoderCache:
        """Cache for incremental decoding, with cross-attention K/V projected once."""
        cache = DecoderCache(record_attention=record_attention)
        for layer in self.decoder_layers:
            k, v = layer.cross_attn.project_memory(memory)
            cache.cross_k.append(k)
            cache.cross_v.append(v)
        return cache

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_pad_mask: Tensor,
        cache: DecoderCache | None = None,
    ) -> tuple[Tensor, DecoderCache]:
        """Run the decoder over new target positions.

        tgt_in (B, T): the next T decoder inputs. memory (B_src, S, D) and src_pad_mask
        (B_src, S) from `encode`, with B = B_src * g: rows g*i .. g*i + g - 1 continue on
        source i (g = 1 but for beam search, where they are the beams of sentence i).
        Without a cache the T positions are the whole prefix; with one they continue it (one
        step at a time during search, or several). Returns logits (B, T, V) and the cache,
        now holding the prefix plus these T positions.
        """
        states, cache = self.decode_states(tgt_in, memory, src_pad_mask, cache)
        return self.project_vocab(states), cache

    def decode_states(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_pad_mask: Tensor,
        cache: DecoderCache | None = None,
    ) -> tuple[Tensor, DecoderCache]:
        """`decode` up to the final decoder states (B, T, D), before the vocabulary projection."""
        if cache is None:
            cache = self.start_cache(memory)
        past = cache.length
        T = tgt_in.size(1)
        # Causal mask over [past | new] keys; None means SDPA's own causal mask (no past) or
        # no mask at all (a single new position may see every key).
        causal_mask = None
        if past and T > 1:
            causal_mask = torch.ones(T, past + T, dtype=torch.bool, device=tgt_in.device).tril(
                diagonal=past
            )
        memory_mask = ~src_pad_mask[:, None, None, :]  # (B, 1, 1, S)
        x = self.embed(self.tgt_embed, tgt_in, offset=past)
        for i, layer in enumerate(self.decoder_layers):
            record = cache.record_attention and i == self.cfg.alignment_layer_index
            earlier = PastKeys(
                cache.self_k[i] if past else None,
                cache.self_v[i] if past else None,
                cache.self_rows,
                causal_mask,
            )
            memory_keys = MemoryKeys(cache.cross_k[i], cache.cross_v[i], memory_mask)
            x, k, v, weights = layer(x, earlier, memory_keys, record, self.cfg.alignment_heads)
            if past:
                cache.self_k[i], cache.self_v[i] = k, v
            else:
                cache.self_k.append(k)
                cache.self_v.append(v)
            if record:
                cache.cross_attention = weights
        cache.self_rows = None  # applied by the copies above
        return self.decoder_norm(x), cache

    @property
    def output_weight(self) -> Tensor:
        """(V, D) matrix of the vocabulary projection (the tied embedding unless untied)."""
        return self.tgt_embed.weight if self.cfg.tie_embeddings else self.output_proj.weight

    def project_vocab(self, x: Tensor) -> Tensor:
        """(B, T, D) -> logits (B, T, V), through the tied embedding unless untied, plus the
        output bias if the model has one."""
        bias = None if self.output_bias is None else self.output_bias.to(x.dtype)
        return F.linear(x, self.output_weight, bias)

    @staticmethod
    def reorder_cache(
        cache: DecoderCache, index: Tensor, memory_index: Tensor | None
    ) -> DecoderCache:
        """Select (and repeat) batch rows of the cache: beam re-ranking or dropping finished rows.

        index (B',) long, rows of the current batch for the self-attention K/V (recorded in
        `self_rows`, gathered by the next step's copy); memory_index, the rows of the
        cross-attention K/V to keep (sources), or None to keep them all. Beam search keeps one
        source row per sentence for all its beams and selects sources only when sentences
        leave. Returns the cache with batch size B'.
        """
        rows = cache.self_rows
        cache.self_rows = index if rows is None else rows.index_select(0, index)
        if memory_index is not None:
            for tensors in (cache.cross_k, cache.cross_v):
                for i, t in enumerate(tensors):
                    tensors[i] = t.index_select(0, memory_index)
        if cache.cross_attention is not None:
            cache.cross_attention = cache.cross_attention.index_select(0, index)
        return cache

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) = <s> y1..y_{T-1} -> logits (B, T, V)."""
        return self.project_vocab(self.teacher_forced_states(src, tgt_in))

    def teacher_forced_states(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """`forward` before the vocabulary projection: final decoder states (B, T, D). Training
        projects only the non-pad positions, fused with the loss (nmt.training.losses)."""
        return self.teacher_forced_states_and_alignment(src, tgt_in, False)[0]

    def teacher_forced_states_and_alignment(
        self, src: Tensor, tgt_in: Tensor, alignment: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """`teacher_forced_states` and, with `alignment`, the alignment layer's cross-attention
        averaged over its alignment heads (B, T, S): what guided alignment trains."""
        src_pad_mask = self.source_padding_mask(src)
        memory = self.encode(src, src_pad_mask)
        cache = self.start_cache(memory, record_attention=alignment)
        states, cache = self.decode_states(tgt_in, memory, src_pad_mask, cache)
        return states, cache.cross_attention


class Ensemble(nn.Module):
    """Models that share a tokenizer, searched as one: the next-token distribution is the mean
    of theirs (`StepDecoder`). Members may differ in shape. `cfg` is the first member's with
    the shortest reach (max_positions), which is what line encoding and length limits read."""

    def __init__(self, members: Sequence[Transformer]):
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        first = members[0].cfg
        for member in members[1:]:
            mine, theirs = (
                (first.vocab_size, first.special_ids),
                (member.cfg.vocab_size, member.cfg.special_ids),
            )
            if mine != theirs:
                raise ValueError(
                    f"ensemble members must share a tokenizer: vocabulary size and special ids "
                    f"{theirs} against {mine}"
                )
        self.members = nn.ModuleList(members)
        self.cfg = replace(first, max_positions=min(member.cfg.max_positions for member in members))

    def source_padding_mask(self, src: Tensor) -> Tensor:
        """src (B, S) -> (B, S) bool, True at padding (the members share the pad id)."""
        return self.members[0].source_padding_mask(src)


def count_parameters(model: nn.Module) -> int:
    """Number of distinct trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def shape_parameters(cfg: ModelConfig) -> int:
    """count_parameters of a Transformer of shape `cfg`, built without weights (torch's meta
    device): what an export records, whatever its checkpoint's parameters require."""
    with torch.device("meta"):
        return count_parameters(Transformer(cfg))
