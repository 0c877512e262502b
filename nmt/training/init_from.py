"""`init_from=model.pt`: a run that starts from a model's weights, tokenizer and shape (ours,
or one nmt.import made of an OPUS-MT model), with a fresh optimizer and schedule. That is
fine-tuning, not a resume: `ckpt_path` resumes a run, optimizer and step included, and a
fine-tuning run resumes that way too.

The checkpoint fixes everything the weights depend on: the shape, the vocabulary and special
ids, the tokenizer. A run may still set what only training reads (TRAINING_FIELDS); a
command line or budget band that sets anything else of the model or the tokenizer is refused.
"""

from __future__ import annotations

from dataclasses import replace

from nmt.checkpoint import Checkpoint, load_checkpoint
from nmt.cli import override_key
from nmt.config import TrainConfig
from nmt.errors import UsageError

# ModelConfig fields a run may change without touching the weights
TRAINING_FIELDS = (
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "token_dropout",
    "alignment_layer",
    "alignment_heads",
)

# TokenizerConfig fields that make other pieces (its folder or threads do not)
TOKENIZER_FIELDS = ("vocab_size", "model_type", "character_coverage", "normalization_rule_name")


def check_init_from(cfg: TrainConfig, overrides: list[str]) -> None:
    """Refuse, in one line, a command line (Hydra's `overrides`) or a budget band that would
    change what `cfg.init_from` fixes; nothing is loaded yet."""
    if cfg.init_from is None:
        if cfg.experiment_name == "finetune":
            raise UsageError("experiment=finetune needs init_from=model.pt, the model to tune")
        return
    given = [(override_key(o), "") for o in overrides]
    given += [
        (key, " (set by a budget band: budget_bands=[] drops them)")
        for band in cfg.budget_bands
        for key in band.settings
    ]
    for key, where in given:
        fixed = key in ("model", "tokenizer")
        fixed |= key.startswith("tokenizer.") and key.removeprefix("tokenizer.") in TOKENIZER_FIELDS
        fixed |= key.startswith("model.") and key.removeprefix("model.") not in TRAINING_FIELDS
        if fixed:
            raise UsageError(
                f"{key}{where}: init_from={cfg.init_from} fixes the model's shape and "
                f"tokenizer; a run from it may set only model.{{{','.join(TRAINING_FIELDS)}}}"
            )


def starting_point(cfg: TrainConfig) -> Checkpoint:
    """The checkpoint `cfg.init_from`, checked against the run's data; `cfg.model` becomes its
    ModelConfig with the run's TRAINING_FIELDS."""
    checkpoint = load_checkpoint(cfg.init_from)
    direction = (cfg.data.src_lang, cfg.data.tgt_lang)
    if direction != (checkpoint.src_lang, checkpoint.tgt_lang):
        raise UsageError(
            f"init_from={cfg.init_from} translates {checkpoint.src_lang}->{checkpoint.tgt_lang}, "
            f"the data {direction[0]}->{direction[1]}"
        )
    if cfg.data.bpe_dropout > 0 and not hasattr(checkpoint.tokenizer, "sp"):
        raise UsageError(
            f"data.bpe_dropout: init_from={cfg.init_from} has an imported model's tokenizer, "
            "which BPE-dropout cannot sample"
        )
    if getattr(checkpoint.tokenizer, "target_size", None) is not None:
        raise UsageError(
            f"init_from={cfg.init_from} was imported with separate source and target "
            "vocabularies, which training does not take yet (translate, evaluate, serve and "
            "export do)"
        )
    training = {name: getattr(cfg.model, name) for name in TRAINING_FIELDS}
    cfg.model = replace(checkpoint.model.cfg, **training)
    return checkpoint
