"""The search settings (`DecodeConfig`) and every rule about them, in one place.

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
from dataclasses import dataclass, fields, replace

STRATEGIES = ("greedy", "beam", "sample")
LENGTH_NORMS = ("gnmt", "power")
STOP_RULES = ("exact", "first_k")
TERM_PLACING = ("decode", "edit", "off")
CHOICES = {
    "strategy": STRATEGIES,
    "length_norm": LENGTH_NORMS,
    "stop": STOP_RULES,
    "term_place": TERM_PLACING,
}


@dataclass
class DecodeConfig:
    """Search settings shared by validation BLEU, translate, evaluate, serve and an export.

    A checkpoint carries the search chosen for it; commands use it unless the command line
    names `decode=...` or `decode.FIELD=...` (`nmt.inference.search_choice.choose_search`).
    """

    strategy: str = "greedy"  # greedy | beam | sample
    beam_size: int = 1
    len_penalty: float | None = None  # alpha of the length penalty (beam only)
    # gnmt: score = log P / ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, ours);
    # power: log P / |Y| ** alpha (CTranslate2's); |Y| counts EOS. docs/guide.md maps one to
    # the other.
    length_norm: str = "gnmt"
    # When a sentence's beam search ends (nmt.decoding.beam): exact = once no live hypothesis
    # can still beat its nbest best finished ones (the n best a search to the maximum length
    # returns, whatever the penalty);
    # first_k = once beam_size hypotheses have finished (fairseq's, HF's and CTranslate2's
    # rule), which also ends a search whose length penalty rewards length.
    stop: str = "exact"
    max_len_a: float = 1.0  # maximum output length = a * source_length + b (paper: |x| + 50)
    max_len_b: int = 50
    min_len: int = 0  # EOS is forbidden before this many tokens
    no_repeat_ngram_size: int = 0  # 0 = off
    nbest: int = 1  # hypotheses (beam) or samples (sample) returned per sentence
    # Sampling: the next token is drawn from softmax(log-probs / temperature) restricted to the
    # top_k most probable tokens (0 = all) and to the smallest set whose probability reaches
    # top_p (1.0 = all); temperature 0 is greedy. The same seed and the same batches give the
    # same samples.
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    # An ALL CAPS or Title Case line is translated in sentence case, an ALL CAPS line's
    # translation given back in capitals (nmt.documents.casing): a model that learnt from
    # sentence-case text loops on capitals. Texts with a forced prefix are translated as given.
    fold_case: bool = True
    # With a glossary (but glossary_exact), the hypotheses a beam search finished for a
    # sentence holding terms (up to beam_size) are ranked by how many of them each uses (by
    # lemma), then by score: the best one using the most comes first, before any term is
    # placed (nmt.documents.translation). Off: the search's own order.
    term_choice: bool = True
    # With a glossary (but glossary_exact), on an engine with a constrained search (torch),
    # the beam keeps hypotheses by their log-prob plus term_bonus for each token they have
    # written of their sentence's terms, as given (a term left unfinished counts nothing):
    # soft constraints (nmt.decoding.steering), which steer the search to the terms without
    # requiring them. 0: off. Scores and the n-best order stay the model's own. 5: the least
    # that used 95% of val's glossary terms at val BLEU as without it (docs/benchmarks.md).
    term_bonus: float = 5.0
    # With a glossary (but glossary_exact), a term a sentence's best translation still lacks
    # is placed where the alignment puts its source words (nmt.terms.placing): a model that
    # reads no terms uses them no other way, and one that reads them annotated is held to
    # them where its search was not steered to them (CTranslate2, or term_bonus 0). "edit":
    # written into the translation, no second search; "decode": the search continued from
    # the term (on CTranslate2 a second decode of the line, for a few tenths of BLEU:
    # docs/benchmarks.md); "off": a term not written is reported, not placed. A model stored
    # before "edit" (true/false) reads as "decode"/"off".
    term_place: str = "edit"

    def __post_init__(self) -> None:
        if isinstance(self.term_place, bool):  # as models stored it before "edit" (true/false)
            self.term_place = "decode" if self.term_place else "off"
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"decode.{name} must be one of {', '.join(allowed)}, "
                    f"not {getattr(self, name)!r}"
                )
        for name in ("beam_size", "nbest"):
            if getattr(self, name) < 1:
                raise ValueError(f"decode.{name} must be at least 1, not {getattr(self, name)}")
        for name in ("max_len_a", "max_len_b", "min_len", "no_repeat_ngram_size", "top_k"):
            if getattr(self, name) < 0:
                raise ValueError(f"decode.{name} must not be negative, not {getattr(self, name)}")
        if self.len_penalty is not None and self.len_penalty < 0:
            # the beam's stopping rule assumes the penalty grows with length
            raise ValueError(f"decode.len_penalty must not be negative, not {self.len_penalty}")
        if self.term_bonus < 0:
            raise ValueError(f"decode.term_bonus must not be negative, not {self.term_bonus}")
        if self.temperature < 0:
            raise ValueError(f"decode.temperature must not be negative, not {self.temperature}")
        if not 0 <= self.seed < 2**32:  # CTranslate2's seeds are 32-bit
            raise ValueError(f"decode.seed must be in [0, 2**32), not {self.seed}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"decode.top_p must be in (0, 1], not {self.top_p}")


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


class SearchError(ValueError):
    """Settings that make no search as a whole; the message is one line."""


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
