"""Evaluate one checkpoint on some splits of a dataset and write a report folder.

Decoding and scoring go through `nmt.evaluation.scoring.translate_and_score`, the path
validation BLEU uses during training, so a report and a training log agree for the same
search. The folder
holds, per split role: hyp.<role>.txt (detokenized output), ref.<role>.txt (the raw
references, so `nmt.report` can test significance without the data), and for the run:
report.json, report.md, bleu_by_length.png and attention.<role>.<line>.png heatmaps on request.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import datasets

from nmt.backends import check_model, load_backend, search_for
from nmt.checkpoint import Translator, store_search
from nmt.cli import UsageError
from nmt.config import DataConfig, DecodeConfig, EvaluateConfig, batch_tokens
from nmt.data.sources import load_splits
from nmt.decoding.text import translate_with_attention
from nmt.evaluation import plots
from nmt.evaluation.markdown import fmt, table
from nmt.evaluation.scoring import Scores, translate_and_score
from nmt.evaluation.sentence_scores import (
    BucketScore,
    best_and_worst,
    bucket_labels,
    scores_by_length,
    sentence_bleu,
)
from nmt.files import write_lines, write_text

log = logging.getLogger(__name__)


@dataclass
class SplitResult:
    """One split role decoded and scored, with what the report shows about it."""

    role: str
    name: str  # the data source's own split name
    sources: list[str]
    references: list[str]
    hypotheses: list[str]
    scores: Scores
    seconds: float  # wall time of translate_and_score (decoding; scoring is a small part)
    target_tokens: int  # subwords of the best hypotheses, EOS excluded
    sentence_bleu: list[float]
    by_length: list[BucketScore]


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
    check_model(cfg)
    if cfg.attention and cfg.backend != "torch":
        raise UsageError("attention= plots need backend=torch: CTranslate2 gives no weights here")
    if cfg.save_search and cfg.ensemble:
        raise UsageError("save_search=true writes into one model: drop ensemble=")


def check_direction(data: DataConfig, translator: Translator, ckpt: str) -> None:
    """The data config picks the direction; it must be the one the checkpoint was trained on."""
    if (data.src_lang, data.tgt_lang) != (translator.src_lang, translator.tgt_lang):
        raise ValueError(
            f"data is {data.src_lang}->{data.tgt_lang} but {ckpt} translates "
            f"{translator.src_lang}->{translator.tgt_lang}: set "
            f"data.src_lang={translator.src_lang} data.tgt_lang={translator.tgt_lang}"
        )


def load_roles(data: DataConfig, roles: list[str]) -> dict[str, datasets.Dataset]:
    """Only the asked roles: loading `train` of WMT14 to score its test set would take minutes."""
    return load_splits(replace(data, splits={role: data.splits[role] for role in roles}))


def evaluate_split(
    translator: Translator, role: str, name: str, dataset: datasets.Dataset, cfg: EvaluateConfig
) -> SplitResult:
    """Decode and score one split; log the scores with their sacreBLEU signatures."""
    sources, references = list(dataset["src"]), list(dataset["tgt"])
    start = time.perf_counter()
    hypotheses, nbest, scores = translate_and_score(
        translator, sources, references, cfg.decode, cfg.max_tokens
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
        target_tokens=sum(len(hyps[0].tokens) for hyps in nbest if hyps),
        sentence_bleu=sentence_bleu(hypotheses, references),
        by_length=scores_by_length(sources, hypotheses, references, cfg.length_buckets),
    )


def plot_attention(
    translator: Translator, result: SplitResult, lines: list[int], cfg: DecodeConfig, run_dir: Path
) -> list[str]:
    """Cross-attention heatmaps of chosen lines; returns the file names written."""
    tokenizer, names = translator.tokenizer, []
    for line in lines:
        ids, best = translate_with_attention(translator.model, tokenizer, result.sources[line], cfg)
        if best is None:
            log.warning("attention: line %d of %s is empty, nothing to plot", line, result.role)
            continue
        name = f"attention.{result.role}.{line}.png"
        title = f"{result.role} line {line}: last decoder layer, mean over heads"
        plots.attention_heatmap(
            best.attention,
            tokenizer.pieces(ids),
            tokenizer.pieces(best.tokens + [tokenizer.eos_id]),
            title,
            run_dir / name,
        )
        names.append(name)
    return names


def training_metrics(ckpt: Path) -> dict[str, Any] | None:
    """metrics.json of the training run the checkpoint comes from (run/model.pt or
    run/checkpoints/*.ckpt), so reports of a checkpoint can show its training time."""
    run = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent
    path = run / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else None


def split_summary(result: SplitResult) -> dict[str, Any]:
    """The report.json entry of one split."""
    n = len(result.sources)
    return {
        "split": result.name,
        "sentences": n,
        **asdict(result.scores),
        "decoding": {
            "seconds": result.seconds,
            "sentences_per_second": n / result.seconds,
            "target_tokens": result.target_tokens,
            "tokens_per_second": result.target_tokens / result.seconds,
        },
        "by_length": [asdict(b) for b in result.by_length],
        "hyp_file": f"hyp.{result.role}.txt",
        "ref_file": f"ref.{result.role}.txt",
    }


def build_report(
    cfg: EvaluateConfig,
    translator,
    results: list[SplitResult],
    overrides: list[str],
    attention_files: list[str],
) -> dict[str, Any]:
    """Everything report.json holds: scores, signatures, settings, provenance, timings."""
    ckpt = Path(cfg.ckpt).resolve()
    on_torch = isinstance(translator, Translator)
    return {
        "checkpoint": {
            "path": str(ckpt),
            "src_lang": translator.src_lang,
            "tgt_lang": translator.tgt_lang,
            "parameters": translator.num_parameters,
            "info": translator.info,
        },
        "backend": translator.describe(),
        "training": training_metrics(ckpt),
        "data": {"name": cfg.data.name, "source": cfg.data.source},
        "decode": asdict(cfg.decode),
        "max_tokens": cfg.max_tokens,
        "device": str(translator.device),
        "dtype": str(translator.dtype).removeprefix("torch.")
        if on_torch
        else translator.compute_type,
        "overrides": overrides,
        "splits": {r.role: split_summary(r) for r in results},
        "attention_plots": attention_files,
    }


def sentences_markdown(result: SplitResult, indices: list[int]) -> list[str]:
    """A numbered list of sentences with their sentence BLEU, source, reference and output."""
    lines = []
    for rank, i in enumerate(indices, start=1):
        lines += [
            f"{rank}. line {i}, sentence BLEU {result.sentence_bleu[i]:.1f}",
            f"   - source: {result.sources[i]}",
            f"   - reference: {result.references[i]}",
            f"   - output: {result.hypotheses[i]}",
        ]
    return lines


def split_markdown(result: SplitResult, summary: dict[str, Any], examples: int) -> list[str]:
    """The report.md section of one split."""
    s, timing = result.scores, summary["decoding"]
    best, worst = best_and_worst(result.sentence_bleu, examples)
    row = [fmt(s.bleu), fmt(s.chrf), fmt(s.bleu_lowercase)]
    row += [fmt(s.brevity_penalty, 3), fmt(s.length_ratio, 3)]
    return [
        f"## {result.role} ({result.name}, {len(result.sources)} sentences)",
        "",
        table(
            ["BLEU", "chrF2", "BLEU (lowercased)", "brevity penalty", "length ratio"],
            [row],
        ),
        "",
        "sacreBLEU signatures:",
        "",
        f"- BLEU: `{s.bleu_signature}`",
        f"- chrF2: `{s.chrf_signature}`",
        f"- BLEU (lowercased): `{s.bleu_lowercase_signature}`",
        "",
        f"Decoding: {timing['seconds']:.1f} s, {timing['sentences_per_second']:.1f} sentences/s, "
        f"{timing['tokens_per_second']:.0f} tokens/s.",
        "",
        "### BLEU by source length",
        "",
        table(
            ["source words", "sentences", "BLEU", "chrF2"],
            [[b.label, b.sentences, fmt(b.bleu), fmt(b.chrf)] for b in result.by_length],
        ),
        "",
        f"### {examples} best sentences (sentence BLEU)",
        "",
        *sentences_markdown(result, best),
        "",
        f"### {examples} worst sentences (sentence BLEU)",
        "",
        *sentences_markdown(result, worst),
        "",
    ]


def report_markdown(report: dict[str, Any], results: list[SplitResult], examples: int) -> str:
    """report.md: settings, then per split its scores, length buckets and examples."""
    ckpt = report["checkpoint"]
    decode = ", ".join(f"{k}={v}" for k, v in report["decode"].items())
    lines = [
        f"# Evaluation of {ckpt['path']}",
        "",
        f"- direction: {ckpt['src_lang']} -> {ckpt['tgt_lang']}, data: {report['data']['name']}",
        f"- parameters: {ckpt['parameters']:,}",
        *[f"- ensembled with: {path}" for path in ckpt["info"].get("ensemble", [])[1:]],
        f"- decode: {decode}",
        f"- overrides: {' '.join(report['overrides']) or '(none)'}",
        "",
        "![BLEU by source length](bleu_by_length.png)",
        "",
    ]
    for result in results:
        lines += split_markdown(result, report["splits"][result.role], examples)
    lines += [f"![attention]({name})" for name in report["attention_plots"]]
    return "\n".join(lines).rstrip() + "\n"


def write_report(
    run_dir: Path, report: dict[str, Any], results: list[SplitResult], examples: int
) -> None:
    """Every file of the report folder but the attention heatmaps."""
    for result in results:
        write_lines(run_dir / f"hyp.{result.role}.txt", result.hypotheses)
        write_lines(run_dir / f"ref.{result.role}.txt", result.references)
    # info is free-form provenance from the checkpoint: anything not JSON is written as text.
    write_text(run_dir / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    write_text(run_dir / "report.md", report_markdown(report, results, examples))
    plots.bleu_by_length({r.role: r.by_length for r in results}, run_dir / "bleu_by_length.png")


def evaluate(cfg: EvaluateConfig, run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """Evaluate `cfg.ckpt` on `cfg.splits`, write the report folder `run_dir`, return the report.

    overrides: the command-line overrides of this run, recorded so that `nmt.report` can tell
    the runs of a sweep apart.
    """
    check_request(cfg)
    translator = load_backend(cfg)
    check_direction(cfg.data, translator, cfg.ckpt)
    search, search_line = search_for(translator, cfg.decode, overrides)
    log.info(search_line)
    # the report records the search and the batch budget that ran
    cfg = replace(cfg, decode=search, max_tokens=batch_tokens(cfg.backend, cfg.max_tokens))
    data = load_roles(cfg.data, cfg.splits)
    first = data[cfg.splits[0]]
    outside = [i for i in cfg.attention if not 0 <= i < len(first)]
    if outside:
        raise ValueError(f"attention={outside}: {cfg.splits[0]} has lines 0..{len(first) - 1}")
    results = [
        evaluate_split(translator, role, cfg.data.splits[role], data[role], cfg)
        for role in cfg.splits
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    attention_files = plot_attention(translator, results[0], cfg.attention, cfg.decode, run_dir)
    report = build_report(cfg, translator, results, overrides, attention_files)
    write_report(run_dir, report, results, cfg.examples)
    if cfg.save_search:
        save_search(translator, cfg.ckpt, cfg.decode)
    return report


def save_search(translator, ckpt: str, search: DecodeConfig) -> None:
    """Store the search a run used with its model: model.pt, or an exported dir's nmt.json."""
    if isinstance(translator, Translator):
        store_search(ckpt, search)
    else:
        from nmt.ct2.model_dir import store_dir_search

        store_dir_search(ckpt, search)
    log.info("Stored this search in %s: translate and evaluate use it from now on", ckpt)


def summary(report: dict[str, Any], run_dir: Path) -> str:
    """A few lines for stdout: the scores of each split and where the report is."""
    lines = []
    for role, s in report["splits"].items():
        speed = s["decoding"]["sentences_per_second"]
        lines.append(
            f"{role}: BLEU {s['bleu']:.2f}  chrF2 {s['chrf']:.2f}"
            f"  BLEU(lc) {s['bleu_lowercase']:.2f}"
            f"  ({s['sentences']} sentences, {speed:.1f} sentences/s)"
        )
    lines.append(f"report: {run_dir}")
    return "\n".join(lines)
