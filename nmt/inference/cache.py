"""A bounded LRU cache of sentence translations, for engines that see the same sentences again
(a server's users, a document's repeated lines).

An entry is one sentence's n-best list, keyed by everything that decides it: the sentence,
its forced prefix, the whole search (every DecodeConfig field), and whether alignments and
scores were asked for. A hit returns a copy of what the engine found, so it is identical to a
fresh translation; sampling is never cached (its draws depend on the call). The cache holds at
most `size` sentences and about `max_bytes` (`entry_bytes`: what an entry's text, tokens,
scores and alignment take in Python), evicting the least recently used. Thread-safe.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import astuple

from nmt.decoding.results import Hypothesis
from nmt.decoding.settings import DecodeConfig


def entry_bytes(key: tuple, nbest: list[Hypothesis]) -> int:
    """About what an entry takes: its strings' characters (up to 4 bytes each), 8 bytes and
    a list slot for each token id, log-prob and alignment link, and a fixed overhead."""
    size = 4 * (len(key[0]) + len(key[1])) + 512
    for hyp in nbest:
        links = len(hyp.alignment or [])
        size += 200 + 16 * (len(hyp.tokens) + len(hyp.token_log_probs or []) + 4 * links)
    return size


class TranslationCache:
    def __init__(self, size: int, max_bytes: int = 64 << 20):
        if size < 1:
            raise ValueError(f"a cache holds at least one sentence, not {size}")
        self.size, self.max_bytes, self.bytes = size, max_bytes, 0
        self.entries: OrderedDict[tuple, tuple[list[Hypothesis], int]] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(
        line: str,
        prefix: str,
        search: DecodeConfig,
        alignments: bool,
        scores: bool,
        sized_as: str = "",
    ):
        """The entry of a line; `sized_as`, the sentence an annotated line annotates, sets its
        output limit, so it is part of the entry."""
        return (line, prefix, astuple(search), alignments, scores, sized_as)

    @staticmethod
    def caches(search: DecodeConfig) -> bool:
        return search.strategy != "sample"

    def get(self, key: tuple) -> list[Hypothesis] | None:
        with self.lock:
            found = self.entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self.entries.move_to_end(key)
            self.hits += 1
            return copy.deepcopy(found[0])

    def put(self, key: tuple, nbest: list[Hypothesis]) -> None:
        size = entry_bytes(key, nbest)
        if size > self.max_bytes:
            return
        with self.lock:
            if key in self.entries:
                self.bytes -= self.entries.pop(key)[1]
            self.entries[key] = (copy.deepcopy(nbest), size)
            self.bytes += size
            while len(self.entries) > self.size or self.bytes > self.max_bytes:
                self.bytes -= self.entries.popitem(last=False)[1][1]
