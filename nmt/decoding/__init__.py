"""Greedy and beam search over `Transformer.encode` / `decode` / `reorder_cache`.

penalties: length penalty, score, maximum length, early-stop rule (pure functions).
constraints: tokens forbidden at a step (PAD, BOS, early EOS, repeated n-grams, forced end).
common: `Hypothesis`, the step-by-step decoder, the finished-hypothesis list.
greedy, beam: the two searches. `nmt.decode.translate_batch` picks one from a DecodeConfig.
"""
