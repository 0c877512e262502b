"""Lines in, batches of ids out: the line handling both engines share.

Empty or whitespace-only lines are not decoded (their n-best list is empty). The others are
encoded with the model's sentencepiece model (EOS appended; a line longer than the model's
positions is cut, with a warning naming its line number), their prefixes too, and grouped
into length-sorted batches of at most `max_tokens` padded source tokens x search rows, and,
given `max_state_bytes`, of at most that much decoder state (`within_state`). A
line annotated with glossary terms is sized as the sentence it annotates (`sized_as`): its
marks and terms (a few pieces each) add nothing more to translate, yet would split its batch
and raise its output limit, which the beam runs near. It is sized at half its own pieces
at least, so a batch's padded tokens stay within twice the budget.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from nmt.decoding.penalties import output_length
from nmt.decoding.settings import DecodeConfig
from nmt.tokenizer import Tokenizer

log = logging.getLogger(__name__)


@dataclass
class LineBatch:
    """Sentences decoded together. lines: their indices in the input; sources: their ids, EOS
    included; prefixes: the forced start of each output (ids, [] = none), or None when no line
    of the batch has one; max_lengths: per sentence, the most output tokens (EOS excluded);
    constraints: per sentence, the id sequences its output must hold (glossary terms in their
    exact form), or None when no line of the batch has one; steer: the output need not hold
    them, the search is only steered to them (soft constraints: the search's term_bonus);
    word_ends: per sentence, whether its prefix ends a word (a prefix text ending in a space:
    the next token starts a word), or None when none does."""

    lines: list[int]
    sources: list[list[int]]
    prefixes: list[list[int]] | None
    max_lengths: list[int]
    constraints: list[list[list[int]]] | None = None
    steer: bool = False
    word_ends: list[bool] | None = None


def rows_per_sentence(search: DecodeConfig) -> int:
    """Rows a sentence takes in the search (beams or samples): batches are budgeted for all."""
    if search.strategy == "beam":
        return search.beam_size
    return search.nbest if search.strategy == "sample" else 1


def length_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped into batches sorted by length, each with at most `max_tokens` padded
    tokens (a longer single item gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and lengths[index] * (len(current) + 1) > max_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def within_state(
    group: list[int], limits: list[int], row_bytes: int, budget: int
) -> list[list[int]]:
    """A batch cut, in order, into parts whose decoder state stays within `budget` bytes:
    its sentences x `row_bytes` (the rows of one sentence, per output token) x the longest
    output its sentences allow (`limits`, plus EOS). A sentence over it alone gets a part of
    its own (the server's door refuses such a search: nmt.jobs.check)."""
    parts: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in group:
        widest = max(longest, limits[i] + 1)
        if current and (len(current) + 1) * row_bytes * widest > budget:
            parts.append(current)
            current, widest = [], limits[i] + 1
        current.append(i)
        longest = widest
    if current:
        parts.append(current)
    return parts


def encode_sources(
    tokenizer: Tokenizer, lines: list[str], max_positions: int, numbers: list[int]
) -> list[list[int]]:
    """Source ids with EOS appended. A line longer than the model's positions is cut to its
    first max_positions - 1 tokens (and translated as such), with a one-line warning naming
    its line number (`numbers`)."""
    encoded = []
    for ids, number in zip(tokenizer.encode(lines), numbers, strict=True):
        if len(ids) + 1 > max_positions:
            log.warning(
                "line %d: %d tokens, cut to the model's %d", number, len(ids), max_positions - 1
            )
            ids = ids[: max_positions - 1]
        encoded.append(ids + [tokenizer.eos_id])
    return encoded


def encode_prefixes(
    tokenizer: Tokenizer, prefixes: list[str], max_positions: int, numbers: list[int]
) -> list[list[int]]:
    """Target prefixes as ids, without BOS or EOS; "" (or only spaces) forces nothing, nor do
    the spaces a prefix ends in (a space the output starts its next word with, not a piece of
    its own: `Planner.plan`). A prefix that would fill the model's positions is cut to leave
    room for EOS, with a warning naming its line (`numbers`)."""
    encoded = []
    texts = [text.rstrip() for text in prefixes]
    for text, ids, number in zip(texts, tokenizer.target.encode(texts), numbers, strict=True):
        if len(ids) > max_positions - 2:
            log.warning(
                "line %d: prefix of %d tokens cut to %d", number, len(ids), max_positions - 2
            )
            ids = ids[: max_positions - 2]
        encoded.append(ids if text.strip() else [])
    return encoded


def max_output_length(search: DecodeConfig, size: int, prefix: list[int], limit: int):
    """Most output tokens (EOS excluded) for a source of `size` ids (EOS included): a * |x| +
    b, at most `limit`, and at least the prefix (nmt.decoding.penalties.max_output_lengths)."""
    most = output_length(search.max_len_a, size, search.max_len_b)
    return max(min(most, limit), len(prefix))


@dataclass
class Planner:
    """How an engine wants its lines: the model's positions, the batch budget, and whether
    each batch must hold one maximum output length (CTranslate2 takes one per call)."""

    tokenizer: Tokenizer
    max_positions: int
    max_tokens: int
    one_length_per_batch: bool = False
    # the decoder state a batch may hold (0: no bound), and one row's per output token
    max_state_bytes: int = 0
    state_bytes_per_token: int = 0

    def plan(
        self,
        lines: list[str],
        search: DecodeConfig,
        prefixes: list[str] | None = None,
        first_line_number: int | list[int] = 1,
        constraints: list[list[str]] | None = None,
        sized_as: list[str] | None = None,
        steer: bool = False,
    ) -> list[LineBatch]:
        """The batches that translate `lines` (none for empty ones); `first_line_number` is what
        warnings call lines[0] (translate streams a file in chunks), or each line's number
        (`line_number`); `constraints`: per line, target texts its output must hold (or, with
        `steer`, that the search is steered to);
        `sized_as`: per line, the text whose pieces size its batch and output limit (the
        sentence an annotated line annotates), its own by default."""
        todo = [i for i, line in enumerate(lines) if line.strip()]
        if not todo:
            return []
        numbers = [line_number(first_line_number, i) for i in todo]
        sources = encode_sources(
            self.tokenizer, [lines[i] for i in todo], self.max_positions, numbers
        )
        forced, word_ends = self.forced([prefixes[i] for i in todo] if prefixes else None, numbers)
        required = [[] for _ in todo]
        if constraints:
            encode = self.tokenizer.target.encode
            required = [encode(constraints[i]) if constraints[i] else [] for i in todo]
        sizes = self.sizes(sources, [sized_as[i] for i in todo] if sized_as else None)
        limits = [
            max_output_length(search, size, p, self.max_positions - 1)
            for size, p in zip(sizes, forced, strict=True)
        ]
        groups = self.groups(sizes, limits, required, search, steer)
        return [
            LineBatch(
                lines=[todo[i] for i in group],
                sources=[sources[i] for i in group],
                prefixes=[forced[i] for i in group] if any(forced[i] for i in group) else None,
                max_lengths=[limits[i] for i in group],
                constraints=[required[i] for i in group]
                if any(required[i] for i in group)
                else None,
                steer=steer,
                word_ends=[word_ends[i] for i in group]
                if any(word_ends[i] for i in group)
                else None,
            )
            for group in groups
        ]

    def groups(
        self,
        sizes: list[int],
        limits: list[int],
        required: list[list[list[int]]],
        search: DecodeConfig,
        steer: bool,
    ) -> list[list[int]]:
        """The lines' batches (as indices): length-sorted under max_tokens, then cut to one
        output limit each (an engine that takes one), to the decoder state budget, and by
        their terms where a steered search leaves the others to the plain search."""
        groups = length_batches(sizes, max(1, self.max_tokens // rows_per_sentence(search)))
        if self.one_length_per_batch:
            groups = [same for group in groups for same in same_limit(group, limits)]
        if self.max_state_bytes:
            row_bytes = rows_per_sentence(search) * self.state_bytes_per_token
            groups = [
                part
                for group in groups
                for part in within_state(group, limits, row_bytes, self.max_state_bytes)
            ]
        # a batch's sentences without terms stay in it: the constrained search, and a steered
        # one stopping by first_k, are the plain search for them, and a batch split in two
        # takes two runs of the decoder (docs/benchmarks.md, stop 73); but a search steered
        # under the exact stop, which it ends by first_k, leaves them to the plain search
        if any(required) and steer and search.stop != "first_k":
            groups = [part for group in groups for part in by_constraints(group, required)]
        return groups

    def forced(
        self, prefixes: list[str] | None, numbers: list[int]
    ) -> tuple[list[list[int]], list[bool]]:
        """Each line's prefix as target ids ([] for none), and whether it ends its word (a
        prefix ending in a space)."""
        if not prefixes:
            return [[] for _ in numbers], [False for _ in numbers]
        forced = encode_prefixes(self.tokenizer, prefixes, self.max_positions, numbers)
        ends = [bool(ids) and t != t.rstrip() for t, ids in zip(prefixes, forced, strict=True)]
        return forced, ends

    def sizes(self, sources: list[list[int]], sized_as: list[str] | None) -> list[int]:
        """Each line's size in the batch budget: its source pieces, or those of the text it
        is sized as, but at least half its own (a batch holds at most twice its budget)."""
        sizes = [len(s) for s in sources]
        if not sized_as:
            return sizes
        given = self.tokenizer.encode(sized_as)
        return [
            min(max(len(ids) + 1, (size + 1) // 2), size)
            for ids, size in zip(given, sizes, strict=True)
        ]


def same_limit(group: list[int], limits: list[int]) -> list[list[int]]:
    """`group` split into groups of one maximum output length each. Batches are length-sorted,
    so the groups stay large."""
    by_limit: dict[int, list[int]] = {}
    for i in group:
        by_limit.setdefault(limits[i], []).append(i)
    return list(by_limit.values())


def by_constraints(group: list[int], required: list[list[list[int]]]) -> list[list[int]]:
    """`group` split into its sentences with constraints and those without (each non-empty),
    for a search steered to the terms that stops by first_k where the plain search would not."""
    parts = [[i for i in group if required[i]], [i for i in group if not required[i]]]
    return [part for part in parts if part]


def line_number(first: int | list[int], i: int) -> int:
    """What warnings call line i of a call: `first` + i, or `first[i]` where the caller
    numbers its lines itself (sentences cut from lines keep their line's number)."""
    return first[i] if isinstance(first, list) else first + i
