"""`nmt.evaluate`'s work: load an engine, decode and score some splits of a dataset with
sacreBLEU, plot attention on request, write the evaluation folder (`evaluation_folder`), and
store the search with the model on request.

Decoding and scoring go through `nmt.evaluation.scoring.translate_and_score`: translate's own
path (the same `segment` cutting, capitals folding and output checks), which validation BLEU
during training takes too, so an evaluation scores what translate prints, and agrees with a
training log for the same search.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import datasets

from nmt.cli import progress_bar, show_progress
from nmt.config import DataConfig, EvaluateConfig
from nmt.data.sources import load_splits
from nmt.decoding.settings import DecodeConfig
from nmt.errors import UsageError
from nmt.evaluation import plots
from nmt.evaluation.evaluation_folder import SplitResult, evaluation_record, write_evaluation
from nmt.evaluation.scoring import translate_and_score
from nmt.evaluation.sentence_scores import bucket_labels, scores_by_length, sentence_bleu
from nmt.inference.engine import Engine
from nmt.inference.loading import check_model, engine_class, load, max_tokens
from nmt.inference.search_choice import choose_search
from nmt.terms.glossary import GlossaryError, read_glossary
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.settings import checked_rules

log = logging.getLogger(__name__)


def check_request(cfg: EvaluateConfig) -> None:
    """Fail before loading anything when the asked splits or settings cannot work."""
    if not cfg.splits:
        raise ValueError("splits is empty: name at least one role, e.g. splits=[test]")
    unknown = [role for role in cfg.splits if role not in cfg.data.splits]
    if unknown:
        raise ValueError(
            f"splits={unknown} not in data.splits (roles: {', '.join(cfg.data.splits)})"
        )
    if len(set(cfg.splits)) != len(cfg.splits):
        raise ValueError(f"splits={cfg.splits} names a role twice")
    bucket_labels(cfg.length_buckets)  # raises on edges that are not increasing
    checked_rules(cfg, cfg.backend)
    check_model(cfg)
    if cfg.attention and not engine_class(cfg.backend).attention_plots:
        raise UsageError(f"attention= plots need backend=torch: {cfg.backend} gives no weights")
    if cfg.save_search and cfg.ensemble:
        raise UsageError("save_search=true writes into one model: drop ensemble=")
    if cfg.glossary:
        try:
            read_glossary(cfg.glossary)
        except GlossaryError as error:
            raise UsageError(str(error)) from None


def check_direction(data: DataConfig, engine: Engine, ckpt: str) -> None:
    """The data config picks the direction; it must be the one the checkpoint was trained on."""
    if (data.src_lang, data.tgt_lang) != (engine.src_lang, engine.tgt_lang):
        raise ValueError(
            f"data is {data.src_lang}->{data.tgt_lang} but {ckpt} translates "
            f"{engine.src_lang}->{engine.tgt_lang}: set "
            f"data.src_lang={engine.src_lang} data.tgt_lang={engine.tgt_lang}"
        )


def load_roles(data: DataConfig, roles: list[str]) -> dict[str, datasets.Dataset]:
    """Only the asked roles: loading `train` of WMT14 to score its test set would take minutes."""
    return load_splits(replace(data, splits={role: data.splits[role] for role in roles}))


def evaluate_split(
    engine: Engine, role: str, name: str, dataset: datasets.Dataset, cfg: EvaluateConfig
) -> SplitResult:
    """Decode and score one split; log the scores with their sacreBLEU signatures."""
    sources, references = list(dataset["src"]), list(dataset["tgt"])
    show = show_progress(cfg.progress, default=sys.stderr.isatty())
    start = time.perf_counter()
    splitter = SentenceSplitter(max_words=cfg.segment_max_words)
    with progress_bar(show, desc=f"translating {role}", unit=" sentences") as bar:
        hypotheses, scores = translate_and_score(
            engine,
            sources,
            references,
            cfg.decode,
            cfg.segment,
            splitter,
            done=bar.update,
            protect=checked_rules(cfg, cfg.backend),
            glossary=read_glossary(cfg.glossary, cfg.glossary_exact) if cfg.glossary else None,
        )
    seconds = time.perf_counter() - start
    log.info("%s BLEU %.2f  %s", role, scores.bleu, scores.bleu_signature)
    log.info("%s chrF2 %.2f  %s", role, scores.chrf, scores.chrf_signature)
    log.info(
        "%s BLEU (lowercased) %.2f  %s",
        role,
        scores.bleu_lowercase,
        scores.bleu_lowercase_signature,
    )
    return SplitResult(
        role=role,
        name=name,
        sources=sources,
        references=references,
        hypotheses=hypotheses,
        scores=scores,
        seconds=seconds,
        target_tokens=sum(map(len, engine.tokenizer.target.encode(hypotheses))),
        sentence_bleu=sentence_bleu(hypotheses, references),
        by_length=scores_by_length(sources, hypotheses, references, cfg.length_buckets),
    )


def attention_source(shape: dict) -> str:
    """Which attention the heatmaps show (nmt.model records it): the alignment layer's, over
    its alignment heads, or over all heads without."""
    layers = shape["decoder_layers"]
    layer = shape["alignment_layer"] % layers
    heads = shape["alignment_heads"]
    over = "mean over heads"
    if heads:
        over = f"mean of its first {heads} heads" if heads > 1 else "its head 0"
    return f"decoder layer {layer + 1} of {layers}, {over}"


def plot_attention(
    engine: Engine, result: SplitResult, lines: list[int], cfg: DecodeConfig, run_dir: Path
) -> list[str]:
    """Cross-attention heatmaps of chosen lines; returns the file names written."""
    names = []
    for line in lines:
        found = engine.attention(result.sources[line], cfg)
        if found is None:
            log.warning("attention: line %d of %s is empty, nothing to plot", line, result.role)
            continue
        source, output, weights = found
        name = f"attention.{result.role}.{line}.png"
        title = f"{result.role} line {line}: {attention_source(engine.card.shape)}"
        plots.attention_heatmap(weights, source, output, title, run_dir / name)
        names.append(name)
    return names


def evaluate(
    cfg: EvaluateConfig, run_dir: Path, overrides: list[str], training: dict | None = None
) -> dict[str, Any]:
    """Evaluate `cfg.ckpt` on `cfg.splits`, write the evaluation folder `run_dir`, return its
    record (evaluation.json).

    overrides: the command-line overrides of this run, recorded so that `nmt.report` can tell
    the runs of a sweep apart. training: the metrics of the run that trained the model, if
    known (else read from its metrics.json, when there is one).
    """
    check_request(cfg)
    engine = load(cfg)
    check_direction(cfg.data, engine, cfg.ckpt)
    search, search_line = choose_search(engine.card, cfg.decode, overrides)
    engine.check(search)
    log.info(search_line)
    # the record shows the search and the batch budget that ran
    cfg = replace(cfg, decode=search, max_tokens=max_tokens(cfg))
    data = load_roles(cfg.data, cfg.splits)
    first = data[cfg.splits[0]]
    outside = [i for i in cfg.attention if not 0 <= i < len(first)]
    if outside:
        raise ValueError(f"attention={outside}: {cfg.splits[0]} has lines 0..{len(first) - 1}")
    results = [
        evaluate_split(engine, role, cfg.data.splits[role], data[role], cfg) for role in cfg.splits
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    attention_files = plot_attention(engine, results[0], cfg.attention, cfg.decode, run_dir)
    record = evaluation_record(cfg, engine, results, overrides, attention_files, training)
    write_evaluation(run_dir, record, results, cfg.examples)
    if cfg.save_search:
        engine.store_search(cfg.decode)
        log.info("Stored this search in %s: translate and evaluate use it from now on", cfg.ckpt)
    return record


def summary(record: dict[str, Any], run_dir: Path) -> str:
    """A few lines for stdout: the scores of each split and where the folder is."""
    lines = []
    for role, s in record["splits"].items():
        speed = s["decoding"]["sentences_per_second"]
        lines.append(
            f"{role}: BLEU {s['bleu']:.2f}  chrF2 {s['chrf']:.2f}"
            f"  BLEU(lc) {s['bleu_lowercase']:.2f}"
            f"  ({s['sentences']} sentences, {speed:.1f} sentences/s)"
        )
    lines.append(f"evaluation: {run_dir}")
    return "\n".join(lines)
