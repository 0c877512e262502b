"""Raw text in, text out: the decoding path shared by translate, evaluate and validation BLEU.

Lines are encoded with the model's own sentencepiece model, sorted by length into batches of
at most `max_tokens` padded source tokens, searched (`nmt.decoding.search`), and returned in
the input order as n-best lists, then as output lines. Empty or whitespace-only lines are not
decoded: their n-best list is empty and their output line is empty.
"""

from __future__ import annotations

import logging

import torch

from nmt.config import DecodeConfig
from nmt.decoding.search import translate_batch
from nmt.decoding.state import Hypothesis
from nmt.model import Transformer
from nmt.tokenizer import Tokenizer

log = logging.getLogger(__name__)

# Characters that would split one output line into several.
LINE_BREAKS = str.maketrans({c: " " for c in "\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """Text safe to write as a single line of a line-aligned (or tab-separated) file."""
    return text.translate(LINE_BREAKS)


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


def encode_sources(
    tokenizer: Tokenizer, lines: list[str], max_positions: int, numbers: list[int] | None = None
) -> list[list[int]]:
    """Source ids with EOS appended. A line longer than the model's positions is cut to its
    first max_positions - 1 tokens (and translated as such), with a one-line warning naming
    the line (its number in `numbers`, else its position in `lines`)."""
    encoded = []
    for i, ids in enumerate(tokenizer.encode(lines)):
        if len(ids) + 1 > max_positions:
            number = numbers[i] if numbers else i + 1
            log.warning(
                "line %d: %d tokens, cut to the model's %d", number, len(ids), max_positions - 1
            )
            ids = ids[: max_positions - 1]
        encoded.append(ids + [tokenizer.eos_id])
    return encoded


def encode_prefixes(
    tokenizer: Tokenizer, prefixes: list[str], max_positions: int, numbers: list[int]
) -> list[list[int]]:
    """Target prefixes as ids, without BOS or EOS; "" (or only spaces) forces nothing. A prefix
    that would fill the model's positions is cut to leave room for EOS, with a warning naming
    its line (`numbers`)."""
    encoded = []
    for text, ids, number in zip(prefixes, tokenizer.encode(prefixes), numbers, strict=True):
        if len(ids) > max_positions - 2:
            log.warning(
                "line %d: prefix of %d tokens cut to %d", number, len(ids), max_positions - 2
            )
            ids = ids[: max_positions - 2]
        encoded.append(ids if text.strip() else [])
    return encoded


def rows_per_sentence(cfg: DecodeConfig) -> int:
    """Rows a sentence takes in the search (beams or samples): batches are budgeted for all."""
    if cfg.strategy == "beam":
        return cfg.beam_size
    return cfg.nbest if cfg.strategy == "sample" else 1


def padded(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Id lists -> (len(rows), longest) long tensor, right-padded with pad_id."""
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, ids in enumerate(rows):
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


@torch.inference_mode()
def translate_lines(
    model: Transformer,
    tokenizer: Tokenizer,
    lines: list[str],
    cfg: DecodeConfig,
    max_tokens: int,
    first_line_number: int = 1,
    prefixes: list[str] | None = None,
) -> list[list[Hypothesis]]:
    """One n-best list per line, in input order; [] for an empty or whitespace-only line.
    `first_line_number`: what warnings call lines[0] (translate streams a file in chunks).
    prefixes: per line, text every translation of it must start with ("" = none); the
    returned hypotheses include it."""
    results: list[list[Hypothesis]] = [[] for _ in lines]
    todo = [i for i, line in enumerate(lines) if line.strip()]
    if not todo:
        return results
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    numbers = [first_line_number + i for i in todo]
    sources = encode_sources(tokenizer, [lines[i] for i in todo], model.cfg.max_positions, numbers)
    forced = None
    if prefixes:
        kept = [prefixes[i] for i in todo]
        forced = encode_prefixes(tokenizer, kept, model.cfg.max_positions, numbers)
    try:
        for batch in length_batches(
            [len(s) for s in sources], max(1, max_tokens // rows_per_sentence(cfg))
        ):
            src = padded([sources[i] for i in batch], tokenizer.pad_id).to(device)
            target_prefix = None
            if forced and any(forced[i] for i in batch):
                target_prefix = padded([forced[i] for i in batch], tokenizer.pad_id).to(device)
            nbests = translate_batch(model, src, cfg, target_prefix=target_prefix)
            for i, nbest in zip(batch, nbests, strict=True):
                results[todo[i]] = nbest
    finally:
        model.train(was_training)
    return results


def best_text(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]) -> list[str]:
    """The best hypothesis of each sentence as one line of raw text ("" for none)."""
    texts = tokenizer.decode([nbest[0].tokens if nbest else [] for nbest in hypotheses])
    return [one_line(t) for t in texts]


def output_lines(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]], nbest: int) -> list[str]:
    """One output line per sentence: its best translation, or with nbest > 1 its n-best list
    as "hypothesis<TAB>score" pairs joined by tabs, best first ("" for an empty line)."""
    if nbest == 1:
        return best_text(tokenizer, hypotheses)
    return [
        "\t".join(f"{text}\t{score:.4f}" for text, score in scored)
        for scored in scored_texts(tokenizer, hypotheses)
    ]


def scored_texts(
    tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]
) -> list[list[tuple[str, float]]]:
    """Each sentence's n-best list as (one line of raw text, score) pairs, best first; one
    decode call for all of them."""
    texts = iter(tokenizer.decode([h.tokens for hyps in hypotheses for h in hyps]))
    return [[(one_line(next(texts)), h.score) for h in hyps] for hyps in hypotheses]


@torch.inference_mode()
def translate_with_attention(
    model: Transformer, tokenizer: Tokenizer, line: str, cfg: DecodeConfig
) -> tuple[list[int], Hypothesis | None]:
    """One line's source ids (EOS included) and best hypothesis with `attention` recorded:
    (len(tokens) + 1, len(ids)), the last decoder layer's cross-attention averaged over heads;
    ([], None) for an empty line. For attention plots: batched decoding does not record it."""
    if not line.strip():
        return [], None
    ids = encode_sources(tokenizer, [line], model.cfg.max_positions)[0]
    src = torch.tensor([ids], device=next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        nbest = translate_batch(model, src, cfg, record_attention=True)[0]
    finally:
        model.train(was_training)
    return ids, nbest[0] if nbest else None
