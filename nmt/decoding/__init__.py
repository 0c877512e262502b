"""Decoding: raw text in, translations out, over `Transformer.encode` / `decode` /
`reorder_cache`. Plain PyTorch: nothing here imports Lightning or Hydra.

settings: DecodeConfig, the rules a search must keep, and its description in words.
search: `translate_batch`, the dispatcher that picks a search from a DecodeConfig.
greedy, beam: the two searches; sampling: the draw that turns greedy search into sampling.
state: `Hypothesis`, the step-by-step decoder, the finished-hypothesis list.
top: `row_top`, each row's n best entries of a step's log-probs (block maxima first).
penalties: length penalty, score, maximum length, early-stop rule (pure functions).
constraints: tokens forbidden at a step (PAD, BOS, early EOS, repeated n-grams, forced end)
    and forced (a target prefix).
constrained: beam search that must write given token sequences (exact glossary terms).
"""
