"""The LightningDataModule that ties loading, tokenizer, encoding, cleaning and batching:
the one module of `nmt.data` that imports Lightning."""

from __future__ import annotations

from functools import partial

import datasets
import lightning as L
from torch.utils.data import DataLoader

from nmt.config import DataConfig, TokenizerConfig
from nmt.data.augmentation import augment_epoch
from nmt.data.batching import (
    BothDirections,
    IndexedPairs,
    SampledPairs,
    TokenBatchSampler,
    collate,
    collate_with_links,
)
from nmt.data.encoding import (
    add_word_alignments,
    clean_train,
    encode_split,
    token_lengths,
    tokenizer_for,
)
from nmt.data.sources import load_splits
from nmt.split_tokenizer import SplitTokenizer
from nmt.tokenizer import Tokenizer


class TranslationDataModule(L.LightningDataModule):
    """Splits as raw text (`splits`, for references), a tokenizer, and token-batched loaders.

    prepare_data (which the Trainer runs in one process per node while the others wait)
    downloads, trains the tokenizer and fills the Arrow caches, and keeps them; setup (every
    other process) repeats the same calls, which then only read those caches and load the
    tokenizer: within a node no two processes train or write the same files, and no process
    builds (or logs) them twice.

    Training batches are shuffled and sharded across the trainer's ranks; the Trainer must run
    with use_distributed_sampler=False to keep this sampler. With data.bpe_dropout, training
    pairs are segmented anew each epoch (SampledPairs). With data.augment, some pairs are shown
    in other views, drawn anew each epoch (nmt.data.augmentation). With
    data.bidirectional_epochs, the loader of those first epochs reads every pair in both
    directions (BothDirections). With either of the last two, the Trainer must ask for a loader
    each epoch (reload_dataloaders_every_n_epochs=1).
    Validation and test batches are sorted by length and every rank sees every line (the loss
    is a cheap forward pass; validation decoding is split across ranks by the module);
    batch.indices give each output's line.
    """

    def __init__(
        self,
        data_cfg: DataConfig,
        tok_cfg: TokenizerConfig,
        seed: int,
        tokenizer: Tokenizer | SplitTokenizer | None = None,
    ):
        """`tokenizer`: a model's own (init_from), used as it is; None trains or loads one
        per `tok_cfg`."""
        super().__init__()
        if data_cfg.bpe_dropout > 0 and tok_cfg.model_type != "bpe":
            raise ValueError(
                f"data.bpe_dropout needs a BPE tokenizer, not tokenizer.model_type="
                f"{tok_cfg.model_type!r}"
            )
        self.data_cfg, self.tok_cfg, self.seed = data_cfg, tok_cfg, seed
        self.given_tokenizer = tokenizer
        self.tokenizer: Tokenizer | SplitTokenizer | None = None
        self.splits: dict[str, datasets.Dataset] = {}  # role -> raw src, tgt text
        self.encoded: dict[str, datasets.Dataset] = {}  # role -> + src_ids, tgt_ids; train cleaned
        self._resume: dict[str, int] = {}  # from a checkpoint: epoch and batches already trained

    def prepare_data(self) -> None:
        """Builds the caches once (local rank 0), and keeps what it built, so that this
        process's `setup` neither builds nor logs it again; the other ranks build in setup,
        from the caches."""
        self.splits, self.tokenizer, self.encoded = self._build()

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is None:
            self.splits, self.tokenizer, self.encoded = self._build()

    def _build(self) -> tuple[dict[str, datasets.Dataset], Tokenizer, dict[str, datasets.Dataset]]:
        cfg = self.data_cfg
        splits = load_splits(cfg)
        tokenizer = self.given_tokenizer or tokenizer_for(cfg, self.tok_cfg, splits["train"])
        encoded = {role: encode_split(ds, tokenizer, cfg.num_proc) for role, ds in splits.items()}
        if cfg.word_alignments:
            encoded["train"] = add_word_alignments(encoded["train"], tokenizer)
        encoded["train"] = clean_train(
            encoded["train"],
            cfg.max_len,
            cfg.max_len_ratio,
            cfg.drop_duplicates,
            cfg.drop_copies,
        )
        return splits, tokenizer, encoded

    def train_dataloader(self) -> DataLoader:
        trainer = self.trainer
        rank, world_size, epoch = (
            (0, 1, 0)
            if trainer is None
            else (trainer.global_rank, trainer.world_size, trainer.current_epoch)
        )
        both_directions = epoch < self.data_cfg.bidirectional_epochs
        train = self.encoded["train"]
        if self.data_cfg.augment.active:
            train = augment_epoch(
                train,
                self.tokenizer,
                self.data_cfg.augment,
                self.seed,
                epoch,
                self.data_cfg.max_len,
            )
        loader = self._loader(
            "train", train, self.data_cfg.max_tokens, True, world_size, rank, both_directions
        )
        if self._resume and 0 < self._resume["batches_done"] < len(loader.batch_sampler):
            # Resuming mid-epoch: Lightning goes on counting from batches_done, the sampler
            # yields the rest of that epoch's batches in the same order.
            loader.batch_sampler.set_epoch(self._resume["epoch"])
            loader.batch_sampler.skip(self._resume["batches_done"])
        self._resume = {}
        return loader

    def state_dict(self) -> dict[str, int]:
        """Saved in every checkpoint: the epoch and how many of its batches were trained on."""
        if self.trainer is None:
            return {}
        progress = self.trainer.fit_loop.epoch_loop.batch_progress.current
        return {"epoch": self.trainer.current_epoch, "batches_done": progress.processed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resume = dict(state)

    def val_dataloader(self) -> DataLoader:
        return self._loader(
            "valid", self.encoded["valid"], self.data_cfg.eval_max_tokens, False, 1, 0
        )

    def _loader(
        self,
        role: str,
        ds: datasets.Dataset,
        max_tokens: int,
        shuffle: bool,
        num_replicas: int,
        rank: int,
        both_directions: bool = False,
    ) -> DataLoader:
        src_lens, tgt_lens = token_lengths(ds)
        if both_directions:
            src_lens, tgt_lens = BothDirections.lengths(src_lens, tgt_lens)
        sampler = TokenBatchSampler(
            src_lens + 1,
            tgt_lens + 1,
            max_tokens,
            shuffle,
            seed=self.seed,
            num_replicas=num_replicas,
            rank=rank,
        )
        if role == "train" and self.data_cfg.bpe_dropout > 0:
            pairs = SampledPairs(ds, self.tokenizer, self.data_cfg.bpe_dropout, self.seed, sampler)
        else:
            pairs = IndexedPairs(ds)
        if both_directions:
            pairs = BothDirections(pairs)
        special = self.tokenizer.special_ids
        gather = partial(collate, special=special)
        if role == "train" and self.data_cfg.word_alignments:
            starts = self.tokenizer.word_starts()
            gather = partial(collate_with_links, word_starts=starts, special=special)
        return DataLoader(
            pairs,
            batch_sampler=sampler,
            collate_fn=gather,
            num_workers=self.data_cfg.num_workers,
        )
