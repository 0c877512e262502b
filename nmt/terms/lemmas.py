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


@cache
def dictionaries():
    """The process's trie dictionaries (simplemma's TrieDictionaryFactory), each loaded at its
    first use; `loaded` names those loaded so far."""
    from simplemma.strategies.dictionaries.trie_dictionary_factory import TrieDictionaryFactory

    class WholeFileTries(TrieDictionaryFactory):
        """A trie cached under a temporary name, then renamed into place."""

        def __init__(self) -> None:
            super().__init__()
            self.loaded: set[str] = set()

        def _get_dictionary_uncached(self, lang: str):
            found = super()._get_dictionary_uncached(lang)
            self.loaded.add(lang)
            return found

        def _write_trie_to_disk(self, lang, trie) -> None:
            self._cache_dir.mkdir(parents=True, exist_ok=True)
            target = self._cache_dir / f"{lang}.dic"
            partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            try:
                trie.save(str(partial))
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)

    return WholeFileTries()


@cache
def lemmatizer():
    """The process's simplemma Lemmatizer over `dictionaries`."""
    from simplemma import Lemmatizer
    from simplemma.strategies import DefaultStrategy

    return Lemmatizer(lemmatization_strategy=DefaultStrategy(dictionary_factory=dictionaries()))


def lemmatize(word: str, lang: str) -> str:
    """The word's lemma as simplemma gives it (the word itself where it knows none)."""
    return lemmatizer().lemmatize(word, lang=lang)


def load(langs: tuple[str, ...]) -> None:
    """These languages' dictionaries loaded now: a server's worker loads them as it starts,
    so that no request with a glossary waits while a fresh machine builds them."""
    for lang in langs:
        dictionaries().get_dictionary(lang)
