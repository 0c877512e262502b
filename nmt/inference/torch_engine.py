"""Our own engine: the PyTorch model of a checkpoint (or an ensemble of several), searched by
`nmt.decoding` on the CPU or a GPU in float32, bfloat16 or float16."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

import torch

from nmt import cpu
from nmt.checkpoint import (
    Checkpoint,
    check_combinable,
    load_checkpoint,
    store_info,
    store_search,
)
from nmt.decoding.beam import beam_search
from nmt.decoding.constrained import constrained_beam_search
from nmt.decoding.results import Hypothesis
from nmt.decoding.search import translate_batch
from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import SearchOptions
from nmt.decoding.steering import Steering
from nmt.inference.engine import Engine, ModelCard
from nmt.inference.planner import LineBatch, Planner
from nmt.model import Ensemble, Transformer, count_parameters

T, R = TypeVar("T"), TypeVar("R")
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(name: str) -> torch.device:
    """ "auto" is the GPU when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def pick_dtype(name: str, device: torch.device) -> str:
    """ "auto" is bfloat16 where the device multiplies bf16 in hardware (a CUDA GPU with bf16,
    a CPU with AVX-512 BF16 or AMX), float32 elsewhere, where bf16 would be emulated."""
    if name != "auto":
        if name not in TORCH_DTYPES:
            raise ValueError(f"dtype must be auto or one of {sorted(TORCH_DTYPES)}, not {name!r}")
        return name
    if device.type == "cuda":
        native = torch.cuda.is_bf16_supported()
    else:
        native = device.type == "cpu" and cpu.cpu_has_native_bf16()
    return "bfloat16" if native else "float32"


def checkpoint_card(checkpoint: Checkpoint, name: str) -> ModelCard:
    """The card of a loaded checkpoint."""
    cfg = checkpoint.model.cfg
    shape = asdict(cfg)
    return ModelCard(
        name=name,
        engine="torch",
        src_lang=checkpoint.src_lang,
        tgt_lang=checkpoint.tgt_lang,
        shape=shape,
        vocab_size=cfg.vocab_size,
        info=checkpoint.info,
        search=checkpoint.search,
    )


class TorchEngine(Engine):
    """A model (or an `Ensemble`) of checkpoints, on one device, in one dtype."""

    name = "torch"
    attention_plots = True
    constrains = True
    default_max_tokens = 4096  # our search gains from large batches (docs/benchmarks.md)

    @staticmethod
    def sees_gpu() -> bool:
        return torch.cuda.is_available()

    @staticmethod
    def cpu_threads() -> int:
        return torch.get_num_threads()  # threads=N sets it (loading.load)

    def __init__(
        self,
        checkpoint: Checkpoint,
        max_tokens: int,
        path: str = "",
        name: str = "",
        workers: int = 1,
    ):
        """`checkpoint`: its model already on its device and in its dtype; `workers`: batches
        searched at once on the CPU, each in a thread of its own on one CPU thread."""
        self.model: Transformer | Ensemble = checkpoint.model
        self.workers = workers if self.model_device.type == "cpu" else 1
        planner = Planner(checkpoint.tokenizer, self.model.cfg.max_positions, max_tokens)
        card = checkpoint_card(checkpoint, name or Path(path).stem)
        super().__init__(card, checkpoint.tokenizer, planner, path)

    @classmethod
    def load(
        cls,
        paths: list[str],
        device: str,
        dtype: str,
        max_tokens: int,
        name: str = "",
        workers: int = 1,
    ) -> TorchEngine:
        """One checkpoint, or several searched as one `Ensemble` (the mean of their next-token
        probabilities: members may differ in shape but must share the tokenizer and the
        direction; the first one's info is kept, with the members' paths under "ensemble")."""
        place = pick_device(device)
        dtype = pick_dtype(dtype, place)
        cpu.warn_if_emulated_bf16(place, dtype == "bfloat16", f"dtype={dtype}")
        members = [load_checkpoint(path) for path in paths]
        for member in members:
            member.model.to(device=place, dtype=TORCH_DTYPES[dtype]).eval()
        first = members[0]
        for path, member in zip(paths[1:], members[1:], strict=True):
            check_combinable(paths[0], first, path, member, "ensemble members")
        if len(members) > 1:
            first = Checkpoint(
                Ensemble([member.model for member in members]),
                first.tokenizer,
                first.src_lang,
                first.tgt_lang,
                {**first.info, "ensemble": [str(Path(path).resolve()) for path in paths]},
                first.search,
            )
        return cls(first, max_tokens, paths[0], name, workers)

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """The model in eval mode (no dropout), then back in the mode it was in (validation BLEU
        searches the model being trained). The searches run under inference_mode themselves."""
        was_training = self.model.training
        self.model.eval()
        try:
            yield
        finally:
            self.model.train(was_training)

    def search_batches(
        self,
        batches: list[LineBatch],
        search: DecodeConfig,
        attention: bool = False,
        log_probs: bool = False,  # our searches keep them always
        hypotheses: int = 0,
        stop=None,
    ) -> Iterator[list]:
        """Each batch's n-best lists, in order: on the CPU, `workers` batches at a time."""

        def run(batch: LineBatch) -> list:
            return self.search_batch(batch, search, attention, hypotheses, stop)

        with self.evaluating():
            if self.workers > 1 and len(batches) > 1:
                yield from in_threads(run, batches, self.workers)
            else:
                yield from map(run, batches)

    def search_batch(
        self, batch: LineBatch, search: DecodeConfig, attention: bool, hypotheses: int, stop
    ) -> list:
        src, options = self.tensors(batch)
        options.record_attention, options.hypotheses = attention, hypotheses
        options.stop = stop
        if batch.constraints is None:
            return translate_batch(self.model, src, search, options)
        ends_word = self.tokenizer.word_ends  # the ids that end a term's word
        if batch.steer:  # soft: the terms steer the beam
            device, bonus = self.model_device, search.term_bonus
            steering = Steering.of(batch.constraints, ends_word, bonus, device)
            return beam_search(self.model, src, search, options, steering)
        return constrained_beam_search(
            self.model, src, search, batch.constraints, ends_word, options
        )

    @torch.inference_mode()
    def score_batches(self, batches: list[LineBatch]) -> Iterator[list[list[float]]]:
        """One teacher-forced pass per batch; an ensemble's log-prob is that of the mean of its
        members' probabilities, as its search's is."""
        members = self.model.members if isinstance(self.model, Ensemble) else [self.model]
        bos, eos, pad = self.tokenizer.bos_id, self.tokenizer.eos_id, self.tokenizer.pad_id
        device = self.model_device
        with self.evaluating():
            for batch in batches:
                targets = batch.prefixes or [[] for _ in batch.lines]
                src = padded(batch.sources, pad).to(device)
                tgt_in = padded([[bos, *t] for t in targets], pad).to(device)
                tgt_out = padded([[*t, eos] for t in targets], pad).to(device)
                per_member = []
                for member in members:
                    states = member.teacher_forced_states(src, tgt_in)
                    logits = member.project_vocab(states).float()
                    per_member.append(logits.log_softmax(-1).gather(-1, tgt_out[..., None])[..., 0])
                log_probs = torch.stack(per_member).logsumexp(0) - math.log(len(members))
                yield [log_probs[i, : len(t) + 1].tolist() for i, t in enumerate(targets)]

    def tensors(self, batch: LineBatch) -> tuple[torch.Tensor, SearchOptions]:
        """The batch's sources (B, S) and options (its prefixes, (B, P), and which end a word)
        on the model's device."""
        pad, device = self.tokenizer.pad_id, self.model_device
        options = SearchOptions()
        if batch.prefixes is not None:
            options.target_prefix = padded(batch.prefixes, pad).to(device)
        if batch.word_ends is not None:
            options.prefix_ends_word = torch.tensor(batch.word_ends, device=device)
            options.ends_word = torch.tensor(self.tokenizer.word_ends, device=device)
        return padded(batch.sources, pad).to(device), options

    def attention(self, line: str, search: DecodeConfig):
        batches = self.planner.plan([line], search)
        if not batches:
            return None
        src, options = self.tensors(batches[0])
        options.record_attention = True
        with self.evaluating():
            best: Hypothesis = translate_batch(self.model, src, search, options)[0][0]
        pieces = self.tokenizer.pieces
        return (
            pieces(batches[0].sources[0]),
            pieces(best.tokens + [self.tokenizer.eos_id]),
            (best.attention),
        )

    @property
    def model_device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def device(self) -> str:
        return str(self.model_device)

    @property
    def precision(self) -> str:
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    @property
    def num_parameters(self) -> int:
        return count_parameters(self.model)

    def describe(self) -> str:
        return f"torch, weights in {self.precision}"

    def store_search(self, search: DecodeConfig) -> None:
        if "ensemble" in self.info:
            raise ValueError("an ensemble's search is not stored: store it in one model")
        store_search(self.path, search)

    def store_info(self, key: str, value) -> None:
        if "ensemble" in self.info:
            raise ValueError(f"an ensemble's {key} is not stored: store it in one model")
        store_info(self.path, key, value)
        self.info[key] = value


def in_threads(run: Callable[[T], R], items: list[T], workers: int) -> Iterator[R]:
    """run(item) for each item, in order, `workers` at a time in threads of one CPU thread
    each: torch's ops let go of the GIL, so one batch's kernels run while another's Python
    steps (docs/benchmarks.md). Left early (an error, a Stopped), the items not yet started
    are dropped and those running finish."""
    threads = torch.get_num_threads()
    pool = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))
    try:
        futures = [pool.submit(run, item) for item in items]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(threads)  # the count a thread started later takes


def padded(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Id lists -> (len(rows), longest) long tensor, right-padded with pad_id."""
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, ids in enumerate(rows):
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out
