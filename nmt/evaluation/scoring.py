"""Decode raw source lines and score them with sacreBLEU: the one path that validation BLEU
during training, the choice of model.pt and `nmt.evaluate` share. It is `nmt.translate`'s own
(nmt.translation.texts), so a score is the score of what translate prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sacrebleu

from nmt.decoding.settings import DecodeConfig
from nmt.inference.engine import Engine
from nmt.inference.output_text import one_line
from nmt.terms.glossary import Glossary
from nmt.terms.spans import DEFAULT_RULES, Rules
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.texts import translate_texts


@dataclass
class CorpusScores:
    """Corpus scores and their sacreBLEU signatures."""

    bleu: float  # cased, 13a tokenization
    chrf: float  # chrF2
    bleu_lowercase: float
    brevity_penalty: float
    length_ratio: float
    bleu_signature: str
    chrf_signature: str
    bleu_lowercase_signature: str


def score(hypotheses: list[str], references: list[str]) -> CorpusScores:
    """BLEU (cased, 13a), chrF2 and lowercased BLEU of detokenized text against raw references."""
    bleu, chrf, bleu_lc = sacrebleu.BLEU(), sacrebleu.CHRF(), sacrebleu.BLEU(lowercase=True)
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    lc = bleu_lc.corpus_score(hypotheses, [references])
    return CorpusScores(
        bleu=b.score,
        chrf=c.score,
        bleu_lowercase=lc.score,
        brevity_penalty=b.bp,
        length_ratio=b.ratio,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_lowercase_signature=str(bleu_lc.get_signature()),
    )


def translate_best(
    engine: Engine,
    sources: list[str],
    search: DecodeConfig,
    segment: str = "sentences",
    splitter: SentenceSplitter | None = None,
    done: Callable[[int], object] | None = None,
    protect: Rules = DEFAULT_RULES,
    glossary: Glossary | None = None,
) -> list[str]:
    """The best translation of each raw source line as `nmt.translate` prints it: cut into
    sentences (or not) the same way, spans protected, terms used, capitals folded, checked
    and fixed (nmt.translation.texts). `done`: told of sentences as they end."""
    found = translate_texts(
        engine, sources, search, segment, splitter, done=done, protect=protect, glossary=glossary
    )
    return [one_line(translation.text) for translation in found]


def translate_and_score(
    engine: Engine,
    sources: list[str],
    references: list[str],
    search: DecodeConfig,
    segment: str = "sentences",
    splitter: SentenceSplitter | None = None,
    done: Callable[[int], object] | None = None,
    protect: Rules = DEFAULT_RULES,
    glossary: Glossary | None = None,
) -> tuple[list[str], CorpusScores]:
    """Translate raw source lines as `translate_best` does; return the translations and their
    scores against the raw references."""
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} source lines but {len(references)} references")
    text = translate_best(engine, sources, search, segment, splitter, done, protect, glossary)
    return text, score(text, references)


def translate_across_processes(
    engine: Engine, sources: list[str], search: DecodeConfig
) -> list[str]:
    """The best translation of every line as text (`translate_best`, translate's defaults), in
    order, on every process.

    Under torch.distributed (DDP) each process decodes every world_size-th line and the
    processes exchange their outputs, so validation BLEU on N devices costs 1/N of the
    decoding instead of N copies of it. Without a process group: all lines here.
    """
    import torch.distributed as dist  # here: only training decodes across processes

    distributed = dist.is_available() and dist.is_initialized()
    rank, world_size = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    mine = translate_best(engine, sources[rank::world_size], search)
    if world_size == 1:
        return mine
    shards: list[list[str] | None] = [None] * world_size
    dist.all_gather_object(shards, mine)
    return [shards[i % world_size][i // world_size] for i in range(len(sources))]
