"""Words' lemmas (simplemma), for glossary terms in any inflection.

simplemma's own dictionaries load as Python dicts: German's took 0.98 s and 140 MiB at each
process's first German word (docs/benchmarks.md, stop 78). Here they are MARISA tries
(simplemma's TrieDictionaryFactory), built once per machine and kept in the user's cache
directory (platformdirs: `$XDG_CACHE_HOME/simplemma`, else `~/.cache/simplemma`); later
processes load one in about 5 ms and 30 MiB, with the same lemmas. A cache written whole or
not at all: processes that start together (a server's workers, parallel tests) never read a
half-written trie.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path


@cache
def lemmatizer():
    """The process's simplemma Lemmatizer over trie dictionaries (their first use loads
    them)."""
    from simplemma import Lemmatizer
    from simplemma.strategies import DefaultStrategy
    from simplemma.strategies.dictionaries.trie_dictionary_factory import TrieDictionaryFactory

    class WholeFileTries(TrieDictionaryFactory):
        """A trie cached under a temporary name, then renamed into place."""

        def _write_trie_to_disk(self, lang, trie) -> None:
            self._cache_dir.mkdir(parents=True, exist_ok=True)
            target = Path(self._cache_dir) / f"{lang}.dic"
            partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            try:
                trie.save(str(partial))
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)

    strategy = DefaultStrategy(dictionary_factory=WholeFileTries())
    return Lemmatizer(lemmatization_strategy=strategy)


def lemmatize(word: str, lang: str) -> str:
    """The word's lemma as simplemma gives it (the word itself where it knows none)."""
    return lemmatizer().lemmatize(word, lang=lang)
