"""Translate raw lines with an exported CTranslate2 directory, with the torch path's contract:
one n-best list per line in input order, [] for an empty line, the same encoding of sources
(EOS added by the model's config, long lines cut to the model's positions), the same
length-sorted batches under `max_tokens`, the same prefixes and the same `DecodeConfig`.

How a DecodeConfig maps onto `ctranslate2.Translator.translate_batch`:
- greedy: beam_size 1. beam: beam_size, num_hypotheses = nbest, length_penalty = alpha of
  the power law score / |Y| ** alpha, and patience PATIENCE (below). A GNMT alpha has no
  CTranslate2 equivalent: it runs as `gnmt_as_power(alpha)` (`with_power_penalty`; the
  commands say so); tune alpha on val with decode.length_norm=power.
- sample: beam_size 1, sampling_topk (0 = all), sampling_topp, sampling_temperature,
  num_hypotheses = nbest. CTranslate2 seeds a worker thread's generator when the thread
  starts, so each sampling call runs on a fresh `ctranslate2.Translator` created right after
  `set_random_seed(seed)`: the same seed and batches give the same samples.
- threads: on the CPU, `threads` workers of one thread each decode batches in parallel
  (every batch is queued at once): on 2 cores this decoded the base shape's beam 4 about
  1.9x faster than one worker of 2 threads (docs/benchmarks.md).
- max output length: ours is per sentence, a * |x| + b (or a longer prefix's length);
  CTranslate2 takes one per call, so each length batch is split by that limit (`same_limit`).
- scores: CTranslate2's score is log-prob / |Y| ** length_penalty with |Y| counting EOS, as
  our "power" norm; greedy and sampling run with length_penalty 0, so their score is the
  log-prob, as in the torch path.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from nmt.config import DecodeConfig
from nmt.ct2.model_dir import ModelDir, read_model_dir
from nmt.decoding.penalties import gnmt_as_power
from nmt.decoding.state import Hypothesis
from nmt.decoding.text import encode_prefixes, encode_sources, length_batches, rows_per_sentence

# Our beam ends a sentence once no live hypothesis can beat its k finished ones; CTranslate2's
# once beam_size * patience hypotheses have finished. With patience 1 it ended 4 of the test
# model's 64 val lines early, on outputs that score lower by the very score both maximise
# (-1.1 BLEU); 1.5 and 2 gave our 64 outputs exactly (tests/test_ctranslate2.py).
PATIENCE = 2.0


class CTranslate2Translator:
    """An exported model directory loaded for translation (see the module docstring)."""

    backend = "ctranslate2"

    def __init__(self, path: str | Path, device: str, compute_type: str, threads: int):
        import ctranslate2

        self.dir: ModelDir = read_model_dir(path)
        self.tokenizer = self.dir.tokenizer
        self.src_lang, self.tgt_lang = self.dir.src_lang, self.dir.tgt_lang
        self.search, self.info = self.dir.search, self.dir.info
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() else "cpu"
        self.device, self.compute_type, self.threads = device, compute_type, threads
        self.engine = self.new_engine(workers=threads if device == "cpu" else 1)

    def new_engine(self, workers: int):
        """A `ctranslate2.Translator` of the directory with `workers` batches decoded at once,
        the CPU threads shared among them; each worker's generator is seeded as it starts."""
        import ctranslate2
        import torch

        torch_threads = torch.get_num_threads()
        try:
            return ctranslate2.Translator(
                str(self.dir.path),
                device=self.device,
                compute_type=self.compute_type,
                inter_threads=workers,
                intra_threads=max(1, self.threads // workers),
            )
        except ValueError as error:  # an unknown or unsupported compute type
            raise ValueError(f"compute_type={self.compute_type}: {error}") from None
        finally:  # CTranslate2 sets the process's OpenMP threads to intra_threads: undo it
            torch.set_num_threads(torch_threads)

    @property
    def num_parameters(self) -> int:
        """The exported model's parameters (counted on a weightless copy of its shape)."""
        import torch

        from nmt.model import Transformer, count_parameters

        with torch.device("meta"):
            return count_parameters(Transformer(self.dir.model_config))

    def describe(self) -> str:
        weights = self.dir.quantization
        return f"ctranslate2 on {self.device}, weights {weights}, compute {self.compute_type}"

    def options(self, cfg: DecodeConfig) -> dict:
        """translate_batch keyword arguments for `cfg`, but the batch's maximum length."""
        options = dict(
            no_repeat_ngram_size=cfg.no_repeat_ngram_size,
            num_hypotheses=cfg.nbest,
            return_scores=True,
            max_input_length=0,  # sources are cut to the model's positions before
        )
        if cfg.strategy == "beam":
            cfg = with_power_penalty(cfg)
            options.update(
                beam_size=cfg.beam_size, length_penalty=cfg.len_penalty, patience=PATIENCE
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

    def translate(
        self,
        lines: list[str],
        cfg: DecodeConfig,
        max_tokens: int,
        first_line_number: int = 1,
        prefixes: list[str] | None = None,
    ) -> list[list[Hypothesis]]:
        import ctranslate2

        results: list[list[Hypothesis]] = [[] for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        if not todo:
            return results
        sp = self.tokenizer.sp
        numbers = [first_line_number + i for i in todo]
        max_positions = self.dir.model_config.max_positions
        sources = [  # the model's config adds EOS
            ids[:-1]
            for ids in encode_sources(
                self.tokenizer, [lines[i] for i in todo], max_positions, numbers
            )
        ]
        forced = None
        if prefixes:
            kept = [prefixes[i] for i in todo]
            forced = encode_prefixes(self.tokenizer, kept, max_positions, numbers)
        options = self.options(cfg)
        engine = self.engine
        if cfg.strategy == "sample":  # one worker, seeded now: the same draws in the same order
            ctranslate2.set_random_seed(cfg.seed)
            engine = self.new_engine(workers=1)
        limits = [  # as max_output_lengths: |x| counts EOS; a longer prefix raises it
            max(
                min(int(cfg.max_len_a * (len(s) + 1) + cfg.max_len_b), max_positions - 1),
                len(forced[i]) if forced else 0,
                1,
            )
            for i, s in enumerate(sources)
        ]
        batches = [
            group
            for batch in length_batches(
                [len(s) + 1 for s in sources], max(1, max_tokens // rows_per_sentence(cfg))
            )
            for group in same_limit(batch, limits)
        ]
        pending = []  # every batch is queued at once, so the workers decode them in parallel
        for batch in batches:
            target_prefix = None
            if forced:
                target_prefix = [[sp.id_to_piece(t) for t in forced[i]] or None for i in batch]
            pending.append(
                engine.translate_batch(
                    [[sp.id_to_piece(t) for t in sources[i]] for i in batch],
                    target_prefix,
                    asynchronous=True,
                    **options,
                    # min_len past the limit: the limit wins, as in the torch path
                    max_decoding_length=limits[batch[0]],
                    min_decoding_length=min(cfg.min_len, limits[batch[0]]),
                )
            )
        alpha = options.get("length_penalty", 0.0)
        for batch, outputs in zip(batches, pending, strict=True):
            for i, output in zip(batch, (o.result() for o in outputs), strict=True):
                results[todo[i]] = [
                    Hypothesis(
                        [sp.piece_to_id(p) for p in pieces],
                        score,
                        score * (len(pieces) + 1) ** alpha,
                    )
                    for pieces, score in zip(output.hypotheses, output.scores, strict=True)
                ]
        return results


def same_limit(batch: list[int], limits: list[int]) -> list[list[int]]:
    """`batch` split into groups of one maximum output length each: CTranslate2 takes one
    per call, and ours is per sentence. Batches are length-sorted, so groups stay large."""
    groups: dict[int, list[int]] = {}
    for i in batch:
        groups.setdefault(limits[i], []).append(i)
    return list(groups.values())


def with_power_penalty(cfg: DecodeConfig) -> DecodeConfig:
    """`cfg` as CTranslate2 runs it: a GNMT alpha replaced by its power-law counterpart."""
    if cfg.strategy == "beam" and cfg.length_norm == "gnmt":
        return replace(cfg, length_norm="power", len_penalty=gnmt_as_power(cfg.len_penalty))
    return cfg
