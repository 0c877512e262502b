"""A bounded LRU cache of sentence translations, for engines that see the same sentences again
(a server's users, a document's repeated lines).

An entry is one sentence's n-best list, keyed by everything that decides it: the sentence,
its forced prefix, the whole search (every DecodeConfig field), and whether alignments and
scores were asked for. A hit returns a copy of what the engine found, so it is identical to a
fresh translation; sampling is never cached (its draws depend on the call). Thread-safe.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import astuple

from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import Hypothesis


class TranslationCache:
    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"a cache holds at least one sentence, not {size}")
        self.size = size
        self.entries: OrderedDict[tuple, list[Hypothesis]] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(line: str, prefix: str, search: DecodeConfig, alignments: bool, scores: bool):
        return (line, prefix, astuple(search), alignments, scores)

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
            return copy.deepcopy(found)

    def put(self, key: tuple, nbest: list[Hypothesis]) -> None:
        with self.lock:
            self.entries[key] = copy.deepcopy(nbest)
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
