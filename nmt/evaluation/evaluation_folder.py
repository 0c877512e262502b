"""The folder `nmt.evaluate` writes for one checkpoint: per split role, hyp.<role>.txt
(detokenized output) and ref.<role>.txt (the raw references, so `nmt.report` can test
significance without the data); for the run, evaluation.json (scores with their sacreBLEU
signatures, settings, provenance, timings), evaluation.md and bleu_by_length.png.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nmt.config import EvaluateConfig
from nmt.evaluation import plots
from nmt.evaluation.markdown import fmt, table
from nmt.evaluation.scoring import CorpusScores
from nmt.evaluation.sentence_scores import BucketScore, best_and_worst
from nmt.files import write_lines, write_text
from nmt.inference.engine import Engine

RECORD = "evaluation.json"  # what nmt.report reads


@dataclass
class SplitResult:
    """One split role decoded and scored, with what the report shows about it."""

    role: str
    name: str  # the data source's own split name
    sources: list[str]
    references: list[str]
    hypotheses: list[str]
    scores: CorpusScores
    seconds: float  # wall time of translate_and_score (decoding; scoring is a small part)
    target_tokens: int  # the translations' pieces, as the tokenizer encodes them
    sentence_bleu: list[float]
    by_length: list[BucketScore]


def evaluation_record(
    cfg: EvaluateConfig,
    engine: Engine,
    results: list[SplitResult],
    overrides: list[str],
    attention_files: list[str],
    training: dict | None = None,
) -> dict[str, Any]:
    """Everything evaluation.json holds: scores, signatures, settings, provenance, timings."""
    ckpt = Path(cfg.ckpt).resolve()
    return {
        "checkpoint": {
            "path": str(ckpt),
            "src_lang": engine.src_lang,
            "tgt_lang": engine.tgt_lang,
            "parameters": engine.num_parameters,
            "info": engine.info,
        },
        "backend": engine.describe(),
        "training": training if training is not None else training_metrics(ckpt),
        "data": {"name": cfg.data.name, "source": cfg.data.source},
        "decode": asdict(cfg.decode),
        "segment": {"segment": cfg.segment, "segment_max_words": cfg.segment_max_words},
        "protect": {"kinds": cfg.protect, "patterns": cfg.protect_patterns},
        "numbers": cfg.numbers,
        "glossary": cfg.glossary,
        "glossary_exact": cfg.glossary_exact,
        "max_tokens": cfg.max_tokens,
        "device": engine.device,
        "dtype": engine.precision,
        "overrides": overrides,
        "splits": {r.role: split_summary(r) for r in results},
        "attention_plots": attention_files,
    }


def split_summary(result: SplitResult) -> dict[str, Any]:
    """The evaluation.json entry of one split."""
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


def training_metrics(ckpt: Path) -> dict[str, Any] | None:
    """metrics.json of the training run the checkpoint comes from (run/model.pt or
    run/checkpoints/*.ckpt), so reports of a checkpoint can show its training time."""
    run = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent
    path = run / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else None


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
    """The evaluation.md section of one split."""
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


def evaluation_markdown(record: dict[str, Any], results: list[SplitResult], examples: int) -> str:
    """evaluation.md: settings, then per split its scores, length buckets and examples."""
    ckpt = record["checkpoint"]
    decode = ", ".join(f"{k}={v}" for k, v in record["decode"].items())
    segment, protect = record["segment"], record["protect"]
    lines = [
        f"# Evaluation of {ckpt['path']}",
        "",
        f"- direction: {ckpt['src_lang']} -> {ckpt['tgt_lang']}, data: {record['data']['name']}",
        f"- parameters: {ckpt['parameters']:,}",
        *[f"- ensembled with: {path}" for path in ckpt["info"].get("ensemble", [])[1:]],
        f"- decode: {decode}",
        f"- segment: {segment['segment']} (segment_max_words={segment['segment_max_words']})",
        f"- protected spans: {', '.join(protect['kinds'] + protect['patterns']) or '(none)'}",
        f"- glossary: {record['glossary'] or '(none)'}"
        + (" (exact: hard constraints)" if record.get("glossary_exact") else ""),
        f"- overrides: {' '.join(record['overrides']) or '(none)'}",
        "",
        "![BLEU by source length](bleu_by_length.png)",
        "",
    ]
    for result in results:
        lines += split_markdown(result, record["splits"][result.role], examples)
    lines += [f"![attention]({name})" for name in record["attention_plots"]]
    return "\n".join(lines).rstrip() + "\n"


def write_evaluation(
    run_dir: Path, record: dict[str, Any], results: list[SplitResult], examples: int
) -> None:
    """Every file of the evaluation folder but the attention heatmaps."""
    for result in results:
        write_lines(run_dir / f"hyp.{result.role}.txt", result.hypotheses)
        write_lines(run_dir / f"ref.{result.role}.txt", result.references)
    # info is free-form provenance from the checkpoint: anything not JSON is written as text.
    write_text(run_dir / RECORD, json.dumps(record, indent=2, default=str) + "\n")
    write_text(run_dir / "evaluation.md", evaluation_markdown(record, results, examples))
    plots.bleu_by_length({r.role: r.by_length for r in results}, run_dir / "bleu_by_length.png")
