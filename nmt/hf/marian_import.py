"""A Hugging Face `MarianMTModel` directory (OPUS-MT's layout) as our model and tokenizer: the
inverse of nmt.hf.marian, which says how the two layouts map (the feature order of the
position table, fused Q/K/V, the tied embedding).

What Marian has beyond our own models is carried, not approximated: swish, the fixed
`final_logits_bias`, its special ids (EOS 0, UNK 1, PAD as the decoder's start, no BOS), untied
or shared embeddings, and MarianTokenizer's separate source and target sentencepiece models
(nmt.split_tokenizer) over one vocabulary or two. What our model cannot compute the same way
is refused in one line naming the field.

Two vocabularies (`target_vocab.json`, `decoder_vocab_size`) become one id space: the target
vocabulary's ids as they are, then the source pieces it lacks. The encoder's table has a row
for each source piece at its id here (zeros elsewhere, never read); the decoder's and the
output's keep the target rows, and the ids after them get a logits bias of -1e9, so the
decoder gives them no probability (exp(-1e9) is 0 in float32) and every target piece the
log-probability transformers computes.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from nmt.checkpoint import Checkpoint
from nmt.decoding.settings import DecodeConfig
from nmt.hf.marian import feature_order
from nmt.model import ModelConfig, Transformer, sinusoidal_positions
from nmt.split_tokenizer import SplitTokenizer
from nmt.vocabulary import SpecialIds

FROM_HF_ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")


class MarianImportError(ValueError):
    """A directory that cannot be imported; the message is one line naming the field."""


NEVER = -1e9  # the logits bias of ids the decoder must not give (two vocabularies' source ids)


def separate_vocabularies(config: dict) -> bool:
    """Whether the encoder and the decoder have vocabularies of their own."""
    return not config.get("share_encoder_decoder_embeddings", True)


# The largest shape imported: beyond any Marian model (OPUS-MT big: d_model 1024, FFN 4096,
# 6+6 layers, 60k pieces), and what a config.json must hold before anything is allocated.
SIZE_LIMITS = {
    "d_model": 8192,
    "encoder_ffn_dim": 65536,
    "decoder_ffn_dim": 65536,
    "encoder_layers": 64,
    "decoder_layers": 64,
    "encoder_attention_heads": 128,
    "decoder_attention_heads": 128,
    "vocab_size": 1_000_000,
    "max_position_embeddings": 65536,
}


def model_config(config: dict, vocab_size: int) -> ModelConfig:
    """Our ModelConfig of a MarianConfig (config.json as a dict) over `vocab_size` ids (the
    vocabulary's, or two vocabularies' id space); refuses what differs."""

    def need(ok: bool, field: str, why: str) -> None:
        if not ok:
            raise MarianImportError(f"config.json {field}={config.get(field)!r}: {why}")

    need(config.get("model_type") == "marian", "model_type", "only MarianMTModel is imported")
    for field, most in SIZE_LIMITS.items():  # before any table is allocated
        value = config.get(field, 512 if field == "max_position_embeddings" else None)
        need(isinstance(value, int) and 0 < value <= most, field, f"must be 1..{most:,}")
    need(vocab_size <= SIZE_LIMITS["vocab_size"], "vocab_size", "the vocabulary is too large")
    need(
        separate_vocabularies(config)
        or config.get("decoder_vocab_size") in (None, config["vocab_size"]),
        "decoder_vocab_size",
        "differs from vocab_size while share_encoder_decoder_embeddings is true",
    )
    for ours, theirs in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        need(config[ours] == config[theirs], theirs, f"our model has one, {ours}={config[ours]}")
    activation = config.get("activation_function", "gelu")
    need(
        activation in FROM_HF_ACTIVATIONS,
        "activation_function",
        f"we compute {list(FROM_HF_ACTIVATIONS)}",
    )
    need(config.get("scale_embedding", False), "scale_embedding", "ours scales by sqrt(d_model)")
    for field in ("encoder_layerdrop", "decoder_layerdrop"):
        need(not config.get(field), field, "LayerDrop is not in our model")
    shared = not separate_vocabularies(config)
    tied = config.get("tie_word_embeddings", True)
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=config["d_model"],
        n_heads=config["encoder_attention_heads"],
        d_ff=config["encoder_ffn_dim"],
        encoder_layers=config["encoder_layers"],
        decoder_layers=config["decoder_layers"],
        dropout=config.get("dropout", 0.1),
        attention_dropout=config.get("attention_dropout", 0.0),
        activation_dropout=config.get("activation_dropout", 0.0),
        activation=FROM_HF_ACTIVATIONS[activation],
        norm="post",
        tie_embeddings=bool(shared and tied),
        max_positions=config.get("max_position_embeddings", 512),
        output_bias=True,
        pad_id=config["pad_token_id"],
        bos_id=config.get("decoder_start_token_id", config["pad_token_id"]),
        eos_id=config["eos_token_id"],
        alignment_layer=-2,
        alignment_heads=0,
    )


def our_weights(
    theirs: dict[str, Tensor], cfg: ModelConfig, config: dict, source_ids: list[int] | None
) -> dict[str, Tensor]:
    """Marian's state dict (keys with or without the "model." prefix) as ours; source_ids: with
    two vocabularies, the id here of each source id (the target's ids are kept)."""
    theirs = {k.removeprefix("model."): v.float() for k, v in theirs.items()}
    inverse = torch.argsort(feature_order(cfg.d_model))  # Marian's features in our order

    def get(*names: str) -> Tensor:
        for name in names:
            if name in theirs:
                return theirs[name]
        raise MarianImportError(f"the weights hold none of {', '.join(names)}")

    check_positions(theirs, cfg)
    shared = ("shared.weight",)
    encoder_embed = get("encoder.embed_tokens.weight", *shared)[:, inverse]
    ours = {"src_embed.weight": encoder_embed, "tgt_embed.weight": encoder_embed}
    if not cfg.tie_embeddings:
        decoder_embed = get("decoder.embed_tokens.weight", *shared)
        ours["tgt_embed.weight"] = decoder_embed[:, inverse]
        tied = config.get("tie_word_embeddings", True)
        output = decoder_embed if tied else get("lm_head.weight")
        ours["output_proj.weight"] = output[:, inverse]
    ours["output_bias"] = get("final_logits_bias").reshape(-1)
    if source_ids is not None:
        ours = one_id_space(ours, cfg.vocab_size, source_ids)
    for i in range(cfg.encoder_layers):
        ours |= layer_weights(theirs, inverse, f"encoder.layers.{i}.", f"encoder_layers.{i}.")
    for i in range(cfg.decoder_layers):
        ours |= layer_weights(theirs, inverse, f"decoder.layers.{i}.", f"decoder_layers.{i}.")
    return ours


def one_id_space(ours: dict[str, Tensor], size: int, source_ids: list[int]) -> dict:
    """Two vocabularies' tables over one id space of `size` ids: the encoder's rows at their
    source pieces' ids, the target's rows first and NEVER as the bias of the ids after them."""
    source = ours["src_embed.weight"]
    ours["src_embed.weight"] = source.new_zeros(size, source.size(1))
    ours["src_embed.weight"][torch.tensor(source_ids)] = source
    for name in ("tgt_embed.weight", "output_proj.weight"):
        target = ours[name]
        ours[name] = torch.cat([target, target.new_zeros(size - len(target), target.size(1))])
    bias = ours["output_bias"]
    ours["output_bias"] = torch.cat([bias, bias.new_full((size - len(bias),), NEVER)])
    return ours


def check_positions(theirs: dict[str, Tensor], cfg: ModelConfig) -> None:
    """A position table that is stored must be the sinusoidal one we compute."""
    table = sinusoidal_positions(cfg.max_positions, cfg.d_model)[:, feature_order(cfg.d_model)]
    for side in ("encoder", "decoder"):
        stored = theirs.get(f"{side}.embed_positions.weight")
        if stored is None:
            continue
        rows = min(len(stored), len(table))
        if not torch.allclose(stored[:rows], table[:rows], atol=1e-4):
            raise MarianImportError(
                f"{side}.embed_positions.weight: not the sinusoidal table (learned positions "
                "are not in our model)"
            )


def layer_weights(theirs: dict[str, Tensor], inverse: Tensor, src: str, dst: str) -> dict:
    """One layer of Marian's as ours: Q, K and V fused, the residual stream's features in
    our order (the inverse of nmt.hf.marian.layer_weights)."""

    def reads(names: list[str], target: str) -> dict:
        """Linear maps from the residual stream, fused: their input columns reordered."""
        w = torch.cat([theirs[src + name + ".weight"] for name in names])[:, inverse]
        b = torch.cat([theirs[src + name + ".bias"] for name in names])
        return {dst + target + ".weight": w, dst + target + ".bias": b}

    def writes(name: str, target: str) -> dict:
        """A linear map into the residual stream, or a LayerNorm: its outputs reordered."""
        w, b = theirs[src + name + ".weight"], theirs[src + name + ".bias"]
        return {dst + target + ".weight": w[inverse], dst + target + ".bias": b[inverse]}

    out = reads(["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "self_attn.qkv_proj")
    out |= writes("self_attn.out_proj", "self_attn.out_proj")
    out |= writes("self_attn_layer_norm", "self_attn_res.norm")
    if src + "encoder_attn.q_proj.weight" in theirs:
        out |= reads(["encoder_attn.q_proj"], "cross_attn.q_proj")
        out |= reads(["encoder_attn.k_proj", "encoder_attn.v_proj"], "cross_attn.kv_proj")
        out |= writes("encoder_attn.out_proj", "cross_attn.out_proj")
        out |= writes("encoder_attn_layer_norm", "cross_attn_res.norm")
    out |= reads(["fc1"], "ffn.fc1")
    out |= writes("fc2", "ffn.fc2")
    out |= writes("final_layer_norm", "ffn_res.norm")
    return out


def read_state_dict(folder: Path) -> dict[str, Tensor]:
    """model.safetensors, or pytorch_model.bin read without running code."""
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(folder / "model.safetensors")
    if (folder / "pytorch_model.bin").is_file():
        try:
            return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        except Exception as error:  # noqa: BLE001 - a pickle of code, or no pickle at all
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise MarianImportError(
                f"{folder / 'pytorch_model.bin'}: not plain tensors, refused unread ({reason})"
            ) from None
    raise MarianImportError(f"{folder} holds neither model.safetensors nor pytorch_model.bin")


def read_index(path: Path, size: int | None = None) -> list[str]:
    """A vocab.json ({piece: id}) as the piece of each id, ids it leaves out as <unusedN> up to
    `size` (the model's table); its ids must be 0..n-1 within it."""
    index = json.loads(path.read_text(encoding="utf-8"))
    size = len(index) if size is None else size
    if sorted(index.values()) != list(range(len(index))) or len(index) > size:
        raise MarianImportError(
            f"{path.name}: its {len(index)} ids are not 0..{len(index) - 1} within the model's "
            f"{size}"
        )
    pieces = [f"<unused{i}>" for i in range(size)]
    for piece, i in index.items():
        pieces[i] = piece
    if "<unk>" not in index:
        raise MarianImportError(f"{path.name} has no <unk>")
    return pieces


def read_vocabularies(folder: Path, config: dict) -> tuple[list[str], list[int] | None, int | None]:
    """(the piece of each id, the source's ids, where the target's ids end): the last two
    None for one vocabulary, else the target's ids then the source pieces it lacks."""
    for name in TOKENIZER_FILES:
        if not (folder / name).is_file():
            raise MarianImportError(f"{folder} has no {name} (MarianTokenizer's files)")
    has_target = (folder / "target_vocab.json").is_file()
    if not separate_vocabularies(config):
        if has_target:
            raise MarianImportError(
                "target_vocab.json: a second vocabulary, but config.json "
                "share_encoder_decoder_embeddings is true"
            )
        return read_index(folder / "vocab.json", config["vocab_size"]), None, None
    if not has_target:
        raise MarianImportError(
            f"{folder} has no target_vocab.json: config.json "
            "share_encoder_decoder_embeddings=false wants the decoder's vocabulary"
        )
    source = read_index(folder / "vocab.json", config["vocab_size"])
    target = read_index(folder / "target_vocab.json", config["decoder_vocab_size"])
    pieces = target + [piece for piece in source if piece not in set(target)]
    index = {piece: i for i, piece in enumerate(pieces)}
    return pieces, [index[piece] for piece in source], len(target)


def read_tokenizer(
    folder: Path, cfg: ModelConfig, vocabularies: tuple[list[str], list[int] | None, int | None]
) -> SplitTokenizer:
    """MarianTokenizer's files as a SplitTokenizer over the model's ids."""
    pieces, source_ids, target_size = vocabularies
    return SplitTokenizer(
        (folder / "source.spm").read_bytes(),
        (folder / "target.spm").read_bytes(),
        pieces,
        SpecialIds(cfg.pad_id, cfg.bos_id, cfg.eos_id),
        pieces.index("<unk>"),
        source_ids,
        target_size,
    )


def generation_search(folder: Path, config: dict) -> DecodeConfig:
    """The model's own search (generation_config.json, else config.json): beam size and
    transformers' length penalty, a power of the length."""
    path = folder / "generation_config.json"
    settings = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else config
    beams = int(settings.get("num_beams") or 1)
    if beams == 1:
        return DecodeConfig(strategy="greedy")
    return DecodeConfig(
        strategy="beam",
        beam_size=beams,
        len_penalty=float(settings.get("length_penalty", 1.0)),
        length_norm="power",
        stop="first_k" if settings.get("early_stopping") is True else "exact",
    )


def local_folder(source: str) -> Path:
    """`source` itself if it is a directory, else a hub id fetched by huggingface_hub."""
    path = Path(source)
    if path.is_dir():
        return path
    if path.exists() or source.startswith((".", "/")):
        raise MarianImportError(f"{source} is not a directory")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, allow_patterns=["*.json", "*.spm", "*.safetensors"]))
    except Exception as error:  # noqa: BLE001 - the hub's errors are many; say the first line
        first = (str(error).strip() or type(error).__name__).splitlines()[0]
        raise MarianImportError(
            f"{source}: not a directory, and the hub gave no model: {first}"
        ) from None


def import_marian(source: str, src_lang: str | None = None, tgt_lang: str | None = None):
    """A MarianMTModel directory or hub id -> a Checkpoint of ours (model in eval mode)."""
    folder = local_folder(source)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise MarianImportError(f"{folder} has no config.json")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    vocabularies = read_vocabularies(folder, config)
    cfg = model_config(config, len(vocabularies[0]))
    model = Transformer(cfg)
    weights = our_weights(read_state_dict(folder), cfg, config, vocabularies[1])
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise MarianImportError(f"weights missing {missing[:3]} or left over {unexpected[:3]}")
    tokenizer = read_tokenizer(folder, cfg, vocabularies)
    langs = {}
    if (folder / "tokenizer_config.json").is_file():
        langs = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    src = src_lang or langs.get("source_lang") or "en"
    tgt = tgt_lang or langs.get("target_lang") or "de"
    info = {"imported_from": str(source), "format": "MarianMTModel"}
    info.update(config.get("nmt_reads") or {})  # what an export of ours learnt to read
    search = generation_search(folder, config)
    return Checkpoint(model.eval(), tokenizer, src, tgt, info, search)
