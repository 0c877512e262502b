"""What an engine is: the interface both engines implement, and the path they share.

An engine holds a model with its tokenizer and direction, and translates raw lines into n-best
lists. `Engine.translate` checks the search (once, for every caller: commands, the server,
library code), plans the lines into batches (`planner`) and hands the batches to the one step
each engine supplies, `search_batches`. A new capability (per-token scores, alignments) is one
more such step per engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from nmt.decoding.penalties import normalized_score
from nmt.decoding.results import Hypothesis, Stopped
from nmt.decoding.settings import DecodeConfig, SearchError, check_search
from nmt.inference.alignment import word_alignment
from nmt.inference.cache import TranslationCache
from nmt.inference.calibration import INFO_KEY, Calibration
from nmt.inference.planner import LineBatch, Planner, encode_prefixes, line_number
from nmt.inference.scores import Scores, scores
from nmt.tokenizer import Tokenizer

# the search `align` forces a given target through: its output is the target (the prefix's
# length, at least 1)
WHOLE_TARGET = DecodeConfig(max_len_a=0.0, max_len_b=1)
NOT_RATED = float("nan")  # the score of a hypothesis no search or forced pass rated (`force`)


@dataclass
class ModelCard:
    """What is known of a model without loading its weights: for /info, the server's front door
    and the search a command starts from."""

    name: str  # e.g. "multi30k_cpu (model.pt, step 4588)"
    engine: str  # torch | ctranslate2
    src_lang: str
    tgt_lang: str
    shape: dict  # ModelConfig as a dict
    vocab_size: int
    info: dict  # provenance stored with the model
    search: DecodeConfig | None  # the search stored with the model; None: none stored


class Engine(ABC):
    """A loaded model that translates lines (see the module docstring)."""

    name: ClassVar[str]  # the backend= value that picks it
    attention_plots: ClassVar[bool] = False  # whether `attention` can give cross-attention
    default_max_tokens: ClassVar[int]  # the batch budget when a command names none
    # decodes with the GIL let go, in threads of its own: nmt.serve then serves it from one
    # process (nmt/serving/inprocess.py), not from worker processes
    releases_gil: ClassVar[bool] = False
    # holds hard constraints in its beam search (Engine.translate's constraints)
    constrains: ClassVar[bool] = False

    @staticmethod
    @abstractmethod
    def sees_gpu() -> bool:
        """Whether device=auto would run this engine on a GPU: asked before a model loads."""

    @staticmethod
    @abstractmethod
    def cpu_threads() -> int:
        """The CPU threads this engine runs on where a command leaves threads=0."""

    def __init__(self, card: ModelCard, tokenizer: Tokenizer, planner: Planner, path: str):
        self.card, self.tokenizer, self.planner, self.path = card, tokenizer, planner, path
        self.checked: DecodeConfig | None = None  # the last search `check` passed
        self.cache: TranslationCache | None = None  # sentence translations seen (a server's)

    def check(self, search: DecodeConfig) -> None:
        """Raise a one-line SearchError for a search that is no search on this model
        (settings.check_search). A command checks its search before it logs or writes
        anything; each chunk's `translate` then finds it checked, so the rules run once."""
        if search != self.checked:
            check_search(search, self.tokenizer.vocab_size)
            self.checked = replace(search)

    @property
    def src_lang(self) -> str:
        return self.card.src_lang

    @property
    def tgt_lang(self) -> str:
        return self.card.tgt_lang

    @property
    def info(self) -> dict[str, Any]:
        return self.card.info

    @property
    def search(self) -> DecodeConfig | None:
        """The search stored with the model, None if none is."""
        return self.card.search

    @property
    def max_tokens(self) -> int:
        """The batch budget: padded source tokens x search rows."""
        return self.planner.max_tokens

    def translate(
        self,
        lines: list[str],
        search: DecodeConfig,
        first_line_number: int | list[int] = 1,
        prefixes: list[str] | None = None,
        done: Callable[[int], object] | None = None,
        alignments: bool = False,
        scores: bool = False,
        stop: Callable[[], bool] | None = None,
        constraints: list[list[str]] | None = None,
        sized_as: list[str] | None = None,
        hypotheses: int = 0,
        steer: bool = False,
    ) -> list[list[Hypothesis]]:
        """One n-best list per line, in input order, best first ([] for a blank line); a
        SearchError (one line) for a search that is no search or cannot hold constraints.
        Per line: `prefixes`, text every translation starts with (ending in a space, it ends
        its word: docs/guide.md); `constraints`, target texts every translation must hold
        (with `steer`: is steered to); `sized_as`, the text that sizes its batch and output
        limit (the sentence an annotated line annotates); `first_line_number`: what warnings
        call lines[0], or each line's number. `done(n)`: told as each batch of n lines ends;
        `alignments`, `scores`: word alignments, token log-probs; `stop()`: asked before and
        after each batch (and within one, as the engine can), True raises Stopped;
        `hypotheses`: a beam gives up to this many it finished."""
        self.check(search)
        search = self.runnable(search)[0]
        constrained = bool(constraints and any(constraints))
        if constrained and not steer:
            self.check_constraints(search)
        results: list[list[Hypothesis]] = [[] for _ in lines]
        uncached = constrained or hypotheses > search.nbest  # the cache holds lists of nbest
        keys = (
            None
            if uncached
            else self.cache_keys(lines, search, prefixes, sized_as, alignments, scores)
        )
        todo = self.from_cache(lines, keys, results)
        if done is not None and len(todo) < len(lines):
            done(len(lines) - len(todo))
        batches = self.planner.plan(
            [lines[i] for i in todo],
            search,
            [prefixes[i] for i in todo] if prefixes else None,
            [line_number(first_line_number, i) for i in todo],
            [constraints[i] for i in todo] if constrained else None,
            [sized_as[i] for i in todo] if sized_as else None,
            steer,
        )
        found = self.search_batches(batches, search, alignments, scores, hypotheses, stop)
        for batch in batches:
            if stop is not None and stop():
                raise Stopped(f"stopped before {len(batch.lines)} of {len(lines)} lines")
            nbests = self.with_alignments(batch, next(found)) if alignments else next(found)
            if stop is not None and stop():  # it may have ended the batch early: not kept
                raise Stopped(f"stopped within a batch of {len(batch.lines)} lines")
            self.keep(batch.lines, nbests, todo, results, keys)
            if done is not None:
                done(len(batch.lines))
        return results

    def keep(self, batch_lines, nbests, todo, results, keys) -> None:
        """A batch's n-best lists into `results` at the lines `todo` names, and into the
        cache under their `keys` (None: no cache)."""
        for line, nbest in zip(batch_lines, nbests, strict=True):
            results[todo[line]] = nbest
            if keys is not None:
                self.cache.put(keys[todo[line]], nbest)

    def cache_keys(
        self,
        lines: list[str],
        search: DecodeConfig,
        prefixes: list[str] | None,
        sized_as: list[str] | None,
        alignments: bool,
        scores: bool,
    ) -> list | None:
        """Each line's key in the translation cache, or None where there is no cache or it
        does not keep this search's answers."""
        if self.cache is None or not self.cache.caches(search):
            return None
        return [
            self.cache.key(
                line,
                prefixes[i] if prefixes else "",
                search,
                alignments,
                scores,
                sized_as[i] if sized_as else "",
            )
            for i, line in enumerate(lines)
        ]

    def with_alignments(
        self, batch: LineBatch, nbests: list[list[Hypothesis]]
    ) -> list[list[Hypothesis]]:
        """Each hypothesis's word alignment from its attention, which it then drops."""
        pieces = self.tokenizer.pieces
        for source, nbest in zip(batch.sources, nbests, strict=True):
            for hyp in nbest:
                hyp.alignment = word_alignment(
                    pieces(source[:-1]), pieces(hyp.tokens), hyp.attention
                )
                hyp.attention = None
        return nbests

    def from_cache(
        self, lines: list[str], keys: list | None, results: list[list[Hypothesis]]
    ) -> list[int]:
        """The lines still to search: those the cache does not hold under `keys` (None:
        all); a held line's n-best list goes into `results`, an empty line's is []."""
        if keys is None:
            return list(range(len(lines)))
        todo = []
        for i, key in enumerate(keys):
            cached = self.cache.get(key) if lines[i].strip() else []
            if cached is None:
                todo.append(i)
            else:
                results[i] = cached
        return todo

    @classmethod
    def constraints_refusal(cls, search: DecodeConfig) -> str | None:
        """Why this engine cannot search with exact terms (glossary_exact), in one line, the
        search's rule first; None where it can. The engine raises it as a SearchError, a
        server as a 422 before any work."""
        if search.strategy != "beam" or search.beam_size < 2:
            return "exact glossary terms (glossary_exact) need a beam search of 2 beams or more"
        return cls.exact_terms_refusal()

    @classmethod
    def exact_terms_refusal(cls) -> str | None:
        """Why this engine cannot hold exact terms whatever the search (checked at start-up,
        nmt.translation.settings), None where it can."""
        if cls.constrains:
            return None
        return (
            f"exact glossary terms (glossary_exact) need the torch engine: the {cls.name} "
            "engine has no constrained search (without glossary_exact the terms are used "
            "another way)"
        )

    def check_constraints(self, search: DecodeConfig) -> None:
        """Raise a one-line SearchError where this engine or search cannot hold constraints."""
        refusal = self.constraints_refusal(search)
        if refusal:
            raise SearchError(refusal)

    @abstractmethod
    def search_batches(
        self,
        batches: list[LineBatch],
        search: DecodeConfig,
        attention: bool = False,
        log_probs: bool = False,
        hypotheses: int = 0,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[list]:
        """Per batch, in order, per sentence its n-best list: the one step an engine supplies.
        `stop`: asked within a batch where the engine can (ours, every few decoder steps:
        nmt.decoding.state.Stopped);
        `attention`: each hypothesis holds its alignment layer's cross-attention, at least
        (len(tokens), len(source) - 1) (a row per output token, a column per source token);
        `log_probs`: each holds its token_log_probs (an engine may keep them anyway);
        `hypotheses`: a beam search's list holds up to this many (`translate`)."""

    def score(
        self,
        lines: list[str],
        targets: list[str] | list[list[int]],
        first_line_number: int | list[int] = 1,
    ) -> list[Scores | None]:
        """Force-decode each target (text, or ids without BOS and EOS) given its source line:
        its scores (nmt.inference.scores), None for an empty or whitespace-only source line.
        Batched as `translate` batches, so a pair scores the same alone or with others."""
        if len(targets) != len(lines):
            raise ValueError(f"{len(lines)} source lines but {len(targets)} targets")
        numbers = [line_number(first_line_number, i) for i in range(len(lines))]
        texts = [i for i, t in enumerate(targets) if isinstance(t, str)]
        encoded = encode_prefixes(
            self.tokenizer,
            [targets[i] for i in texts],
            self.planner.max_positions,
            [numbers[i] for i in texts],
        )
        ids = [list(t) if not isinstance(t, str) else [] for t in targets]
        for i, target in zip(texts, encoded, strict=True):
            ids[i] = target
        results: list[Scores | None] = [None] * len(lines)
        calibration = self.calibration
        batches = self.planner.plan(lines, DecodeConfig(), None, first_line_number)
        for batch in batches:
            batch.prefixes = [ids[i] for i in batch.lines]
        for batch, per_sentence in zip(batches, self.score_batches(batches), strict=True):
            for line, target, log_probs in zip(
                batch.lines, batch.prefixes, per_sentence, strict=True
            ):
                results[line] = scores(self.tokenizer.pieces(target), log_probs, calibration)
        return results

    def rate(
        self,
        lines: list[str],
        nbests: list[list[Hypothesis]],
        first_line_number: int | list[int] = 1,
    ) -> list[Scores | None]:
        """The scores of each line's best translation (None for an empty line): from the
        search's own token log-probs where it kept them (ours), else by force-decoding it."""
        best = [nbest[0] if nbest else None for nbest in nbests]
        if any(hyp is not None and hyp.token_log_probs is None for hyp in best):
            ids = [hyp.tokens if hyp else [] for hyp in best]
            return self.score(lines, ids, first_line_number)
        calibration, pieces = self.calibration, self.tokenizer.pieces
        return [
            None if hyp is None else scores(pieces(hyp.tokens), hyp.token_log_probs, calibration)
            for hyp in best
        ]

    def align(
        self, lines: list[str], targets: list[str], first_line_number: int = 1
    ) -> list[list[tuple[int, int]] | None]:
        """The word alignment (nmt.inference.alignment) of each given translation, forced as
        the whole output; None for an empty source line, [] for an empty target."""
        found = self.translate(lines, WHOLE_TARGET, first_line_number, targets, alignments=True)
        return [
            (hyps[0].alignment if target.strip() else []) if hyps else None
            for hyps, target in zip(found, targets, strict=True)
        ]

    def force(
        self,
        lines: list[str],
        targets: list[str],
        search: DecodeConfig,
        first_line_number: int | list[int] = 1,
        alignments: bool = False,
        rate: bool = True,
    ) -> list[Hypothesis | None]:
        """Each given translation as a hypothesis of its line, as `search` would rate it had it
        found it: its tokens, their log-probs force-decoded (one pass of the decoder), its
        score under the search's length penalty, and its word alignment if asked for. None for
        an empty source line. `rate=False` (no output shows a score): the tokens without that
        pass, the score and log-prob NaN (not rated, never another text's) and no token
        log-probs, which `rate` force-decodes if they are asked for after all."""
        search = self.runnable(search)[0]
        links = self.align(lines, targets, first_line_number) if alignments else [None] * len(lines)
        if not rate:
            numbers = [line_number(first_line_number, i) for i in range(len(lines))]
            ids = encode_prefixes(self.tokenizer, targets, self.planner.max_positions, numbers)
            return [
                Hypothesis(tokens, NOT_RATED, NOT_RATED, None, pairs) if line.strip() else None
                for line, tokens, pairs in zip(lines, ids, links, strict=True)
            ]
        rated = self.score(lines, targets, first_line_number)
        ids = self.tokenizer.piece_ids
        found: list[Hypothesis | None] = []
        for scored, pairs in zip(rated, links, strict=True):
            if scored is None:
                found.append(None)
                continue
            log_prob, length = scored.log_prob, len(scored.pieces)  # EOS counted
            score = log_prob
            if search.strategy == "beam":
                score = normalized_score(log_prob, length, search.len_penalty, search.length_norm)
            tokens = [ids[p] for p in scored.pieces[:-1]]
            found.append(Hypothesis(tokens, score, log_prob, None, pairs, scored.token_log_probs))
        return found

    @abstractmethod
    def score_batches(self, batches: list[LineBatch]) -> Iterator[list[list[float]]]:
        """Per batch, per sentence: the log-prob of each token of its target (`prefixes`) and
        of EOS after them, the target force-decoded."""

    @classmethod
    def runnable(cls, search: DecodeConfig) -> tuple[DecodeConfig, str]:
        """`search` as this engine runs it, and a note saying what changed ("" if nothing)."""
        return search, ""

    @abstractmethod
    def describe(self) -> str:
        """The engine and its precision in a few words, for logs and reports."""

    @property
    @abstractmethod
    def num_parameters(self) -> int: ...

    @property
    @abstractmethod
    def device(self) -> str: ...

    @property
    @abstractmethod
    def precision(self) -> str:
        """The weights' type: float32, bfloat16, int8, ..."""

    @abstractmethod
    def store_search(self, search: DecodeConfig) -> None:
        """Store `search` with the model, as the one commands run from now on."""

    @abstractmethod
    def store_info(self, key: str, value: Any) -> None:
        """Store `value` under `key` of the model's info, on disk (and in `info` now)."""

    @property
    def calibration(self) -> Calibration | None:
        """The map from a sentence's log-prob per token to a confidence (nmt.calibrate)."""
        return Calibration.from_info(self.info)

    def calibrate(self, calibration: Calibration) -> None:
        """Store `calibration` with the model: its confidences from now on."""
        self.store_info(INFO_KEY, calibration.as_info())

    def attention(self, line: str, search: DecodeConfig):
        """(source pieces, output pieces, (len(output) + 1, len(source)) weights) of one line's
        best translation, or None for an empty line: for plots (`attention_plots`)."""
        raise NotImplementedError(f"the {self.name} engine gives no attention weights")
