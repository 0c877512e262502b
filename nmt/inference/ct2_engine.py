"""The CTranslate2 engine: an exported directory (`nmt.export`) translated by CTranslate2. The
lines are planned as for the torch engine (`nmt.inference.planner`); this supplies the search.

How a DecodeConfig maps onto `ctranslate2.Translator.translate_batch`:
- greedy: beam_size 1. beam: beam_size, num_hypotheses = nbest (or the `hypotheses` asked
  for, which CTranslate2 returns without searching longer), length_penalty = alpha of
  the power law score / |Y| ** alpha, and patience PATIENCE (below). A GNMT alpha has no
  CTranslate2 equivalent: it runs as `gnmt_as_power(alpha)` (`with_power_penalty`; the
  commands say so); tune alpha on val with decode.length_norm=power.
- sample: beam_size 1, sampling_topk (0 = all), sampling_topp, sampling_temperature,
  num_hypotheses = nbest. CTranslate2 seeds a worker thread's generator when the thread
  starts, so each sampling call runs on a fresh `ctranslate2.Translator` created right after
  `set_random_seed(seed)`: the same seed and batches give the same samples.
- threads: on the CPU, `threads` workers of one thread each decode batches in parallel
  (every batch is queued at once), faster than one worker of all threads
  (docs/benchmarks.md).
- max output length: ours is per sentence, a * |x| + b (or a longer prefix's length);
  CTranslate2 takes one per call, so each length batch is split by that limit (`same_limit`).
- scores: CTranslate2's score is log-prob / |Y| ** length_penalty with |Y| counting EOS, as
  our "power" norm; greedy and sampling run with length_penalty 0, so their score is the
  log-prob, as in the torch path.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from nmt.cpu import default_threads
from nmt.ct2.model_dir import ModelDir, read_model_dir, store_dir_info, store_dir_search
from nmt.decoding.penalties import gnmt_as_power
from nmt.decoding.results import STOP_EVERY, Hypothesis
from nmt.decoding.settings import DecodeConfig
from nmt.inference.alignment import word_alignment
from nmt.inference.engine import WHOLE_TARGET, Engine, ModelCard
from nmt.inference.planner import LineBatch, Planner
from nmt.vocabulary import OURS

# CTranslate2 ends a beam once beam_size * patience hypotheses have finished. first_k is
# patience 1; our exact rule (no live hypothesis can beat the finished ones) has no
# counterpart, and patience 2 gave its outputs on the test model (tests/test_ctranslate2.py).
PATIENCE = {"exact": 2.0, "first_k": 1.0}
QUEUED_BATCHES = 16  # batches queued per CTranslate2 worker at a time (search_batches)
# pairs per score_batch call on the CPU: CTranslate2 4.8 scores 373 val pairs in 0.14 s in
# calls of 4, 0.26 s in calls of 32, 0.35 s in calls of 64 (docs/benchmarks.md)
SCORED_PAIRS = 4


def model_dir_card(model: ModelDir, name: str) -> ModelCard:
    """The card of an exported directory (nmt.json): nothing of CTranslate2 is loaded."""
    cfg = model.model_config
    return ModelCard(
        name=name,
        engine="ctranslate2",
        src_lang=model.src_lang,
        tgt_lang=model.tgt_lang,
        shape=asdict(cfg),
        vocab_size=model.tokenizer.vocab_size,
        info=model.info,
        search=model.search,
    )


class CTranslate2Engine(Engine):
    """An exported model directory loaded for translation (see the module docstring)."""

    name = "ctranslate2"
    # each single-threaded worker takes a batch: smaller ones keep them all busy
    default_max_tokens = 1024
    releases_gil = True

    @staticmethod
    def sees_gpu() -> bool:
        import ctranslate2

        return ctranslate2.get_cuda_device_count() > 0

    @staticmethod
    def cpu_threads() -> int:
        return default_threads()  # torch's count, without importing torch

    def __init__(
        self, path: str | Path, device: str, compute_type: str, threads: int, max_tokens: int
    ):
        self.dir: ModelDir = read_model_dir(path)
        planner = Planner(
            self.dir.tokenizer,
            self.dir.model_config.max_positions,
            max_tokens,
            one_length_per_batch=True,
        )
        card = model_dir_card(self.dir, Path(path).name)
        super().__init__(card, self.dir.tokenizer, planner, str(path))
        if device == "auto":
            device = "cuda" if self.sees_gpu() else "cpu"
        self._device, self.compute_type, self.threads = device, compute_type, threads
        self.engine = self.new_engine(workers=threads if device == "cpu" else 1)

    def new_engine(self, workers: int):
        """A `ctranslate2.Translator` of the directory with `workers` batches decoded at once,
        the CPU threads shared among them; each worker's generator is seeded as it starts."""
        import ctranslate2

        # CTranslate2 sets the process's OpenMP threads to intra_threads: undo it for torch, if
        # this process has torch (a CTranslate2 command imports none)
        torch = sys.modules.get("torch")
        torch_threads = torch.get_num_threads() if torch else 0
        try:
            return ctranslate2.Translator(
                str(self.dir.path),
                device=self._device,
                compute_type=self.compute_type,
                inter_threads=workers,
                intra_threads=max(1, self.threads // workers),
            )
        except ValueError as error:  # an unknown or unsupported compute type
            raise ValueError(f"compute_type={self.compute_type}: {error}") from None
        finally:
            if torch:
                torch.set_num_threads(torch_threads)

    @property
    def num_parameters(self) -> int:
        """The exported model's parameters, as its export recorded them (an earlier export's
        counted on a weightless copy of its shape, which imports torch)."""
        if self.dir.parameters is not None:
            return self.dir.parameters
        from nmt.model import shape_parameters

        return shape_parameters(self.dir.model_config)

    @property
    def device(self) -> str:
        return self._device

    @property
    def precision(self) -> str:
        return self.dir.quantization if self.compute_type == "default" else self.compute_type

    def describe(self) -> str:
        weights = self.dir.quantization
        return f"ctranslate2 on {self.device}, weights {weights}, compute {self.compute_type}"

    def store_search(self, search: DecodeConfig) -> None:
        store_dir_search(self.path, search)

    def store_info(self, key: str, value) -> None:
        store_dir_info(self.path, key, value)
        self.info[key] = value

    @classmethod
    def runnable(cls, search: DecodeConfig) -> tuple[DecodeConfig, str]:
        """CTranslate2 has no GNMT length penalty: a GNMT alpha runs as the power law's
        counterpart (`gnmt_as_power`)."""
        if not (search.strategy == "beam" and search.length_norm == "gnmt"):
            return search, ""
        alpha = gnmt_as_power(search.len_penalty)
        return replace(search, length_norm="power", len_penalty=alpha), (
            f"; CTranslate2 has no GNMT penalty: alpha {search.len_penalty} runs as the "
            f"power law's {alpha} (tune it on val with decode.length_norm=power)"
        )

    def options(self, cfg: DecodeConfig) -> dict:
        """translate_batch keyword arguments for `cfg` (a runnable search), but the batch's
        maximum length."""
        options = dict(
            no_repeat_ngram_size=cfg.no_repeat_ngram_size,
            num_hypotheses=cfg.nbest,
            return_scores=True,
            max_input_length=0,  # sources are cut to the model's positions before
        )
        if self.tokenizer.special_ids != OURS:
            # The torch search forbids PAD and BOS after the softmax; CTranslate2 can only
            # suppress them before it, which renormalises the scores. Our models never choose
            # them (trained never to); an imported Marian model's PAD can win, as in
            # transformers without its bad_words_ids, so for it they are suppressed.
            never = sorted({self.tokenizer.pad_id, self.tokenizer.bos_id})
            options["suppress_sequences"] = [[piece] for piece in self.tokenizer.pieces(never)]
        if cfg.strategy == "beam":
            options.update(
                beam_size=cfg.beam_size,
                length_penalty=cfg.len_penalty,
                patience=PATIENCE[cfg.stop],
            )
        elif cfg.strategy == "sample":
            options.update(
                beam_size=1,
                length_penalty=0.0,
                sampling_topk=cfg.top_k if cfg.top_k < self.tokenizer.vocab_size else 0,
                sampling_topp=cfg.top_p,
                sampling_temperature=cfg.temperature,
            )
            if cfg.temperature == 0:  # greedy, as in the torch path
                options.update(sampling_topk=1, sampling_temperature=1.0)
        else:
            options.update(beam_size=1, length_penalty=0.0)
        return options

    def search_batches(
        self,
        batches: list[LineBatch],
        search: DecodeConfig,
        attention: bool = False,
        log_probs: bool = False,
        hypotheses: int = 0,
        stop=None,
    ) -> Iterator[list]:
        """`stop` is asked between batches, and within one every STOP_EVERY steps where
        CTranslate2 can stop it (its step callback, beam_size 1: greedy and sampling); a beam
        search's batch is decoded whole."""
        import ctranslate2

        options = self.options(search) | {"return_attention": attention}
        if stop is not None and options["beam_size"] == 1:
            options["callback"] = step_callback(stop)
        if search.strategy == "beam":  # more returned; the stopping rule is patience's
            options["num_hypotheses"] = max(search.nbest, hypotheses)
        engine = self.engine
        if search.strategy == "sample":  # one worker, seeded now: the same draws in order
            ctranslate2.set_random_seed(search.seed)
            engine = self.new_engine(workers=1)
        # the batches are queued QUEUED_BATCHES per worker at a time, so that a caller that
        # stops between batches (Engine.translate's stop) leaves little decoding behind
        window = QUEUED_BATCHES * engine.num_translators
        for start in range(0, len(batches), window):
            yield from self.search_window(
                engine, batches[start : start + window], search, options, attention, log_probs
            )

    def search_window(self, engine, batches, search, options, attention, log_probs):
        """search_batches for some batches, all queued at once."""
        pieces = self.tokenizer.pieces
        pending = []  # the window's batches queued at once: the workers decode them in parallel
        limits = [max(batch.max_lengths[0], 1) for batch in batches]
        # every step past a prefix that ends a word queued before the first is read
        steps = [self.next_steps(engine, b) if b.word_ends else None for b in batches]
        for batch, limit, step in zip(batches, limits, steps, strict=True):
            prefixes = None
            if batch.prefixes is not None:
                started = batch.prefixes if step is None else self.word_started(batch, step)
                prefixes = [pieces(p) or None for p in started]
            pending.append(
                engine.translate_batch(
                    self.source_pieces(batch),  # config adds EOS
                    prefixes,
                    asynchronous=True,
                    **options,
                    max_decoding_length=limit,
                    # min_len past the limit: the limit wins, as in the torch path
                    min_decoding_length=min(search.min_len, limit),
                )
            )
        first_rows = [None] * len(batches)
        if attention and options["beam_size"] > 1:
            first_rows = [self.first_step_attention(batch) for batch in batches]
        alpha = options.get("length_penalty", 0.0)
        found = []
        for batch, limit, outputs, firsts in zip(batches, limits, pending, first_rows, strict=True):
            nbests = [self.hypotheses(output.result(), alpha, limit) for output in outputs]
            for nbest, first in zip(nbests, firsts or [], strict=False):
                row = np.asarray(first.result().attention[0][0], dtype=np.float32)
                for hyp in nbest:  # every beam starts from BOS: the same first row
                    if len(hyp.attention):
                        hyp.attention[0] = row
            found.append((nbests, self.score_hypotheses(nbests, batch) if log_probs else None))
        for nbests, scored in found:  # every batch's scoring queued before the first is read
            for hyp, output in zip((h for n in nbests for h in n), scored or [], strict=False):
                hyp.token_log_probs = list(output.result().log_probs)
            yield nbests

    def align(
        self, lines: list[str], targets: list[str], first_line_number: int = 1
    ) -> list[list[tuple[int, int]] | None]:
        """Engine.align's links. On the CPU each target is read in one pass of the decoder,
        a sentence at a time (CTranslate2's return_alternatives reads its prefix so, and with
        the prefix's length as the limit writes nothing after it): the same links as the
        batched forced decode (tests/test_alignment.py) in about a third of the time here
        (docs/benchmarks.md); on a GPU, a batch decoded a step at a time."""
        if self.device != "cpu":
            return super().align(lines, targets, first_line_number)
        links: list[list[tuple[int, int]] | None] = [[] if line.strip() else None for line in lines]
        pieces, pending = self.tokenizer.pieces, []
        for batch in self.planner.plan(lines, WHOLE_TARGET, targets, first_line_number):
            by_length: dict[int, list[int]] = {}
            for row, prefix in enumerate(batch.prefixes or []):
                if prefix:
                    by_length.setdefault(len(prefix), []).append(row)
            sources = self.source_pieces(batch)
            for length, rows in by_length.items():
                outputs = self.engine.translate_batch(
                    [sources[row] for row in rows],
                    [pieces(batch.prefixes[row]) for row in rows],
                    asynchronous=True,
                    beam_size=1,
                    return_alternatives=True,
                    max_decoding_length=length,
                    return_attention=True,
                    max_input_length=0,
                )
                pending.append((batch, rows, outputs))
        for batch, rows, outputs in pending:
            for row, output in zip(rows, outputs, strict=True):
                attention = np.asarray(output.result().attention[0], dtype=np.float32)
                source, target = pieces(batch.sources[row][:-1]), pieces(batch.prefixes[row])
                links[batch.lines[row]] = word_alignment(source, target, attention)
        return links

    def next_steps(self, engine, batch: LineBatch) -> dict[int, object]:
        """One greedy step past each prefix of the batch that ends a word, with its
        distribution (logits; queued), by the line's place in the batch: `word_started`."""
        rows = [i for i, ends in enumerate(batch.word_ends) if ends]
        sources, pieces = self.source_pieces(batch), self.tokenizer.pieces
        steps = engine.translate_batch(
            [sources[i] for i in rows],
            [pieces(batch.prefixes[i]) for i in rows],
            asynchronous=True,
            beam_size=1,
            max_decoding_length=max(len(batch.prefixes[i]) for i in rows) + 1,
            return_logits_vocab=True,
            max_input_length=0,
        )
        return dict(zip(rows, steps, strict=True))

    def word_started(self, batch: LineBatch, steps: dict[int, object]) -> list[list[int]]:
        """The batch's prefixes, each that ends a word followed by the likeliest token that
        starts one (or punctuation alone), for the search to go on from: CTranslate2 cannot
        ban the pieces that would go on with the word ("Reh" + "a"), so one greedy step past
        each such prefix (`next_steps`) gives its distribution to choose from. The output
        does not end right after such a prefix (the torch search may)."""
        ends_word = np.array(self.tokenizer.word_ends)
        ends_word[self.tokenizer.eos_id] = False
        started = []
        for i, (prefix, limit) in enumerate(zip(batch.prefixes, batch.max_lengths, strict=True)):
            if i not in steps or len(prefix) >= limit:  # (at its limit the output ends there)
                started.append(prefix)
                continue
            logits = np.asarray(steps[i].result().logits[0][len(prefix)])
            started.append(prefix + [int(np.where(ends_word, logits, -np.inf).argmax())])
        return started

    def first_step_attention(self, batch: LineBatch) -> list:
        """CTranslate2 4.8's beam search returns a wrong first row of attention (not the
        sentence's own; later rows are right, tests/test_alignment.py): on the CPU its first
        step runs unexpanded and is gathered by the batch index, so sentence i of a call gets
        sentence i // beam's row. Each sentence's first step, decoded alone (one step of
        greedy search), gives the right one (queued)."""
        return self.engine.translate_batch(
            self.source_pieces(batch),
            asynchronous=True,
            beam_size=1,
            max_decoding_length=1,
            return_attention=True,
            max_input_length=0,
        )

    def score_hypotheses(self, nbests: list[list[Hypothesis]], batch: LineBatch) -> list:
        """Each hypothesis's token log-probs, EOS's last (queued): CTranslate2's search gives
        one score per hypothesis, so `score_batch` force-decodes it (one parallel pass of the
        decoder)."""
        pieces = self.tokenizer.pieces
        sources = self.source_pieces(batch)
        rows = [(i, hyp) for i, nbest in enumerate(nbests) for hyp in nbest]
        return self.queue_scores(
            [sources[i] for i, _ in rows], [pieces(hyp.tokens) for _, hyp in rows]
        )

    def queue_scores(self, sources: list[list[str]], targets: list[list[str]]) -> list:
        """CTranslate2's `score_batch` of each pair, queued, in order: on the CPU a few pairs
        a call (SCORED_PAIRS), which it scores faster than many; on a GPU, in one call."""
        size = SCORED_PAIRS if self.device == "cpu" else max(len(sources), 1)
        return [
            result
            for start in range(0, len(sources), size)
            for result in self.engine.score_batch(
                sources[start : start + size],
                targets[start : start + size],
                max_input_length=0,
                asynchronous=True,
            )
        ]

    def source_pieces(self, batch: LineBatch) -> list[list[str]]:
        """The batch's sources as CTranslate2 takes them: pieces, without the EOS its config
        adds."""
        pieces = self.tokenizer.pieces
        return [pieces(ids[:-1]) for ids in batch.sources]

    def score_batches(self, batches: list[LineBatch]) -> Iterator[list[list[float]]]:
        """CTranslate2's `score_batch`, every batch queued at once as in `search_batches`."""
        pieces = self.tokenizer.pieces
        pending = [
            self.queue_scores(
                self.source_pieces(batch),  # config adds EOS
                [pieces(target) for target in batch.prefixes],
            )
            for batch in batches
        ]
        for outputs in pending:
            yield [list(output.result().log_probs) for output in outputs]

    def hypotheses(self, output, alpha: float, limit: int) -> list[Hypothesis]:
        """A CTranslate2 result as our n-best list: its score is log-prob / |Y| ** alpha, with
        |Y| counting EOS, so the log-prob is score * |Y| ** alpha; a hypothesis cut at the
        length `limit` has no EOS in either (ours forces one and counts it: docs/guide.md).
        Its attention, when asked for: (output tokens, source tokens), neither EOS, an array
        (alignments are all it serves: CTranslate2 draws no plots)."""
        ids = self.tokenizer.piece_ids
        found = [
            Hypothesis([ids[p] for p in pieces], score, score * scored_length**alpha)
            for pieces, score in zip(output.hypotheses, output.scores, strict=True)
            for scored_length in [len(pieces) + (len(pieces) < limit)]
        ]
        for hyp, weights in zip(found, output.attention or [], strict=False):
            hyp.attention = np.asarray(weights, dtype=np.float32)
        return found


def step_callback(stop):
    """CTranslate2's step callback (called per generated token of each row) that ends the
    batch once `stop()` is True, asked at every STOP_EVERY-th step."""

    def callback(step) -> bool:
        return step.step % STOP_EVERY == 0 and stop()

    return callback
