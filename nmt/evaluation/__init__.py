"""Evaluation: scores, reports and tables of runs.

scoring: sacreBLEU scores, and decoding then scoring (shared with validation BLEU).
evaluation_run, evaluation_folder: `nmt.evaluate`'s work, and the folder it writes for one
    checkpoint on some splits.
alignment_error: precision, recall and AER of word alignments against a gold standard.
sentence_scores: BLEU by source length, sentence BLEU, best and worst sentences.
runs_table: `nmt.report`'s table of many runs with paired-bootstrap significance.
plots, markdown: the figures and Markdown pieces both reports use.
"""
