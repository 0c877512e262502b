"""Every rule about the search settings (`nmt.config.DecodeConfig`), in one place.

A `DecodeConfig` checks each field on its own when it is made (a beam of 0 cannot exist).
Whether the fields make a search as a whole (`check_search`) is asked once, by the engine
that runs it (`nmt.inference`), so commands, the server and library callers get the same
one-line `SearchError`. `READ_BY` says which strategy reads which field: it drives the
"does nothing" warnings, the server's refusal of a request field its strategy ignores, and
`without_unread`. The server's request schema is derived from these fields
(`nmt.serving.schema`), not declared again.
"""

from __future__ import annotations

import warnings
from dataclasses import fields, replace

from nmt.config import STRATEGIES, DecodeConfig
from nmt.errors import SearchError

# Which strategies read a field; a field not listed is read by every strategy.
READ_BY = {
    "beam_size": ("beam",),
    "len_penalty": ("beam",),
    "length_norm": ("beam",),
    "stop": ("beam",),
    "term_choice": ("beam",),
    "term_bonus": ("beam",),
    "nbest": ("beam", "sample"),
    "temperature": ("sample",),
    "top_k": ("sample",),
    "top_p": ("sample",),
    "seed": ("sample",),
}


def unread(strategy: str, names) -> list[str]:
    """The fields among `names` that `strategy` does not read."""
    return [name for name in names if strategy not in READ_BY.get(name, STRATEGIES)]


def without_unread(search: DecodeConfig) -> DecodeConfig:
    """`search` with the fields its strategy does not read at their defaults: two searches
    that run alike are then equal."""
    default = DecodeConfig()
    names = unread(search.strategy, [f.name for f in fields(DecodeConfig)])
    return replace(search, **{name: getattr(default, name) for name in names})


def search_problem(search: DecodeConfig, vocab_size: int | None = None) -> str | None:
    """What makes `search` no search as a whole, in one line; None if nothing."""
    if search.nbest > 1 and search.strategy == "greedy":
        return f"nbest={search.nbest} needs strategy beam (n best) or sample (n samples)"
    if search.strategy == "beam":
        if search.nbest > search.beam_size:
            return f"nbest={search.nbest} exceeds beam_size={search.beam_size}"
        if search.len_penalty is None:
            return "strategy beam needs len_penalty (0.6 in decode=beam; 0 for none)"
        if vocab_size is not None and 2 * search.beam_size > vocab_size:
            return f"beam_size={search.beam_size} exceeds half the vocabulary ({vocab_size})"
    if search.strategy == "sample" and search.temperature == 0 and search.nbest > 1:
        return f"nbest={search.nbest} samples at temperature 0 are one greedy translation"
    if search.max_len_a == 0 and search.max_len_b == 0:
        return "max_len_a and max_len_b are both 0: no output could be longer than nothing"
    return None


def check_search(search: DecodeConfig, vocab_size: int | None = None) -> None:
    """Raise a SearchError if `search` is no search as a whole; warn, once per setting, of
    each setting its strategy ignores (one that differs from the default)."""
    problem = search_problem(search, vocab_size)
    if problem:
        raise SearchError(problem)
    default = DecodeConfig()
    for name in unread(search.strategy, READ_BY):
        if getattr(search, name) != getattr(default, name):
            warnings.warn(
                f"decode.{name}={getattr(search, name)} does nothing with strategy "
                f"{search.strategy}: it applies to {' or '.join(READ_BY[name])}",
                UserWarning,
                stacklevel=3,
            )


def describe_search(search: DecodeConfig) -> str:
    """The search in a few words, for logs and reports."""
    if search.strategy == "greedy":
        text = "greedy"
    elif search.strategy == "beam":
        norm = "GNMT" if search.length_norm == "gnmt" else "power"
        text = f"beam {search.beam_size}, {norm} length penalty {search.len_penalty}"
        if search.stop != "exact":
            text += f", stop {search.stop}"
    else:
        text = (
            f"sampling (temperature {search.temperature}, top-k {search.top_k or 'all'}, "
            f"top-p {search.top_p}, seed {search.seed})"
        )
    if search.nbest > 1:
        text += f", {search.nbest} {'samples' if search.strategy == 'sample' else 'best'}"
    return text
