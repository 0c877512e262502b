"""PNG figures for reports, drawn on matplotlib's Agg canvas.

Figures are built with `matplotlib.figure.Figure` and an explicit `FigureCanvasAgg` rather than
pyplot: no global backend switch, no display needed, and nothing left open between runs of a
Hydra multirun in one process.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nmt.files import atomic_path

if TYPE_CHECKING:  # torch and sacrebleu only for annotations: nmt.report starts without them
    from torch import Tensor

    from nmt.evaluation.sentence_scores import BucketScore


def new_figure(width: float, height: float, ncols: int = 1) -> tuple[Figure, list]:
    """A figure on an Agg canvas with `ncols` axes side by side."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, ncols, squeeze=False)[0]
    return figure, list(axes)


def bleu_by_length(buckets: dict[str, list[BucketScore]], path: Path) -> None:
    """Grouped bars: BLEU per source-length bucket, one colour per split, n on each bar."""
    labels = [b.label for b in next(iter(buckets.values()))]
    figure, (ax,) = new_figure(1.2 + 1.1 * len(labels) * max(1, len(buckets) / 2), 3.5)
    width = 0.8 / len(buckets)
    for k, (role, scores) in enumerate(buckets.items()):
        x = [i + (k - (len(buckets) - 1) / 2) * width for i in range(len(labels))]
        heights = [math.nan if b.bleu is None else b.bleu for b in scores]
        bars = ax.bar(x, heights, width, label=role)
        ax.bar_label(bars, labels=[f"n={b.sentences}" for b in scores], fontsize=7)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)  # empty buckets keep their place
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("BLEU")
    ax.set_title("BLEU by source length")
    ax.legend()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, format="png")


def attention_heatmap(
    weights: Tensor, source: list[str], output: list[str], title: str, path: Path
) -> None:
    """weights (len(output), len(source)): one row per output subword, one column per source."""
    figure, (ax,) = new_figure(2 + 0.3 * len(source), 1.5 + 0.3 * len(output))
    image = ax.imshow(weights.numpy(), cmap="viridis", aspect="auto", vmin=0.0)
    ax.set_xticks(range(len(source)), source, rotation=90, fontsize=8)
    ax.set_yticks(range(len(output)), output, fontsize=8)
    ax.set_xlabel("source subwords")
    ax.set_ylabel("output subwords")
    ax.set_title(title, fontsize=9)
    figure.colorbar(image, ax=ax, shrink=0.8)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, format="png")


def as_number(value: str) -> float | None:
    """An override value as a float, or None when it is not a number (a category)."""
    try:
        return float(value)
    except ValueError:
        return None


def bleu_by_parameter(points: dict[str, list[tuple[str, float]]], ylabel: str, path: Path) -> None:
    """One subplot per swept parameter: BLEU of every run against the parameter's value.

    points: parameter -> (value as written in the override, BLEU). Numeric values get a numeric
    axis; anything else is drawn as sorted categories.
    """
    figure, axes = new_figure(3.2 * len(points), 3.0, ncols=len(points))
    for ax, (name, pairs) in zip(axes, points.items(), strict=True):
        numbers = [as_number(value) for value, _ in pairs]
        if all(n is not None for n in numbers):
            ax.scatter(numbers, [bleu for _, bleu in pairs])
        else:
            categories = sorted({value for value, _ in pairs})
            x = [categories.index(value) for value, _ in pairs]
            ax.scatter(x, [bleu for _, bleu in pairs])
            ax.set_xticks(range(len(categories)), categories, rotation=30, fontsize=8)
        ax.set_xlabel(name)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, format="png")
