"""Evaluation: scores, reports and tables of runs.

scoring: sacreBLEU scores, and decoding then scoring (shared with validation BLEU).
split_report: `nmt.evaluate`'s report folder for one checkpoint on some splits.
sentence_scores: BLEU by source length, sentence BLEU, best and worst sentences.
runs_table: `nmt.report`'s table of many runs with paired-bootstrap significance.
plots, markdown: the figures and Markdown pieces both reports use.
"""
