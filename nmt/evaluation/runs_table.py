"""Gather the runs under a folder into one table: what differs between them and how they score.

A run is an evaluation folder of nmt.evaluate (evaluation.json, hyp.<role>.txt,
ref.<role>.txt) or a training run folder (metrics.json and .hydra/overrides.yaml). A training
run with a final evaluation (its evaluation/ folder: model.pt with its search) is one row, its
overrides beside that evaluation's scores; without one, its best validation BLEU of training.
Runs are ranked by BLEU on one split role; every run with that split's hypotheses is compared
with the best such run by sacreBLEU's paired bootstrap resampling, on the same references only.
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import PairedTest, Result

from nmt.cli import override_key
from nmt.evaluation import plots
from nmt.evaluation.markdown import fmt, table
from nmt.files import atomic_path, read_lines, write_text

log = logging.getLogger(__name__)

SIGNIFICANCE_LEVEL = 0.05
PLOT_NAME = "bleu_by_parameter.png"
FINAL_EVALUATION = "evaluation"  # a training run's final evaluation folder (fit writes it)


@dataclass
class Run:
    """What the table shows of one run; dicts are keyed by split role (valid, test, ...)."""

    folder: Path
    kind: str  # "evaluate" or "train"
    overrides: dict[str, str]  # Hydra command-line overrides: key -> value as written
    bleu: dict[str, float]
    chrf: dict[str, float]
    parameters: int | None
    train_seconds: float | None
    sentences_per_second: dict[str, float]
    tokens_per_second: dict[str, float]
    hyp_files: dict[str, Path]
    ref_files: dict[str, Path]
    scored_on: dict[str, str] = field(default_factory=dict)  # role -> "dataset/split", if known


def parse_overrides(items: list[str]) -> dict[str, str]:
    """Hydra overrides ("key=value", "+key=value", "++key=value") -> {key: value}."""
    return {override_key(item): item.partition("=")[2] for item in items}


def read_eval_run(folder: Path) -> Run:
    """An `nmt.evaluate` evaluation folder."""
    record = json.loads((folder / "evaluation.json").read_text())
    splits: dict[str, Any] = record["splits"]
    training = record["training"]
    return Run(
        folder=folder,
        kind="evaluate",
        overrides=parse_overrides(record["overrides"]),
        bleu={role: s["bleu"] for role, s in splits.items()},
        chrf={role: s["chrf"] for role, s in splits.items()},
        parameters=record["checkpoint"]["parameters"],
        train_seconds=training["train_seconds"] if training else None,
        sentences_per_second={r: s["decoding"]["sentences_per_second"] for r, s in splits.items()},
        tokens_per_second={r: s["decoding"]["tokens_per_second"] for r, s in splits.items()},
        hyp_files={role: folder / s["hyp_file"] for role, s in splits.items()},
        ref_files={role: folder / s["ref_file"] for role, s in splits.items()},
        scored_on=scored_on(record.get("data"), {r: s.get("split") for r, s in splits.items()}),
    )


def scored_on(data: dict | None, split_names: dict[str, str | None]) -> dict[str, str]:
    """role -> "dataset/split name" where the run's files say (older ones do not)."""
    if not data or not data.get("name"):
        return {}
    return {role: f"{data['name']}/{name}" for role, name in split_names.items() if name}


def read_train_run(folder: Path) -> Run:
    """An `nmt.train` run folder: its final evaluation's scores and hypotheses if it ran one,
    else the best val/bleu of training (the last validation's, if training monitored something
    else) and the last validation's chrF."""
    metrics = json.loads((folder / "metrics.json").read_text())
    overrides = OmegaConf.to_container(OmegaConf.load(folder / ".hydra" / "overrides.yaml"))
    if (folder / FINAL_EVALUATION / "evaluation.json").is_file():
        return replace(
            read_eval_run(folder / FINAL_EVALUATION),
            folder=folder,
            kind="train",
            overrides=parse_overrides(overrides),
            parameters=metrics["parameters"],
            train_seconds=metrics["train_seconds"],
        )
    final: dict[str, float] = metrics["final_metrics"]
    bleu = {}
    if metrics["monitor"] == "val/bleu" and metrics["best_score"] is not None:
        bleu["valid"] = metrics["best_score"]
    elif "val/bleu" in final:
        bleu["valid"] = final["val/bleu"]
    config = folder / ".hydra" / "config.yaml"
    data = OmegaConf.to_container(OmegaConf.load(config)).get("data") if config.is_file() else None
    return Run(
        folder=folder,
        kind="train",
        overrides=parse_overrides(overrides),
        bleu=bleu,
        chrf={"valid": final["val/chrf"]} if "val/chrf" in final else {},
        parameters=metrics["parameters"],
        train_seconds=metrics["train_seconds"],
        sentences_per_second={},
        tokens_per_second={},
        hyp_files={},
        ref_files={},
        scored_on=scored_on(data, {"valid": ((data or {}).get("splits") or {}).get("valid")}),
    )


def find_runs(root: Path) -> list[Run]:
    """Every evaluation folder and training run folder under `root`, recursively."""
    if not root.is_dir():
        raise FileNotFoundError(f"no such folder: {root}")
    if (root / "evaluation.json").is_file():
        raise ValueError(f"{root} is one evaluation folder: give the folder that holds the runs")
    trained = [
        path.parent
        for path in sorted(root.rglob("metrics.json"))
        if (path.parent / ".hydra" / "overrides.yaml").is_file()
    ]
    final_evaluations = {folder / FINAL_EVALUATION for folder in trained}
    runs = [
        read_eval_run(path.parent)
        for path in sorted(root.rglob("evaluation.json"))
        if path.parent not in final_evaluations
    ]
    runs += [read_train_run(folder) for folder in trained]
    if not runs:
        raise ValueError(
            f"no runs under {root}: neither evaluation.json nor metrics.json with .hydra/"
        )
    return runs


def ranking_split(runs: list[Run], asked: str | None) -> str:
    """The split role to rank by: the asked one, else valid (settings are chosen on it), else
    test, else any scored one."""
    if asked is not None:
        return asked
    roles = {role for run in runs for role in run.bleu}
    for role in ("valid", "test", *sorted(roles)):
        if role in roles:
            return role
    raise ValueError("no run has a BLEU score")


def rank(runs: list[Run], split: str) -> list[Run]:
    """Best BLEU on `split` first; runs without a score on it last, in folder order."""
    scored = sorted((r for r in runs if split in r.bleu), key=lambda r: -r.bleu[split])
    return scored + [r for r in runs if split not in r.bleu]


def differing_overrides(runs: list[Run]) -> list[str]:
    """Override keys whose value is not the same in every run of a kind (absent counts as a
    value), in the order they first appear. Per kind: training and evaluate runs have different
    overrides anyway, and a column for every training override of a mixed folder says nothing."""
    keys = list(dict.fromkeys(key for run in runs for key in run.overrides))
    kinds = [[r for r in runs if r.kind == kind] for kind in ("evaluate", "train")]
    return [k for k in keys if any(len({r.overrides.get(k) for r in group}) > 1 for group in kinds)]


def comparable_runs(ranked: list[Run], split: str) -> list[Run]:
    """Runs with hypotheses for `split` on the same references as the best such run, best
    first: the systems a paired test can compare."""
    candidates = [r for r in ranked if split in r.hyp_files]
    if not candidates:
        return []
    references = list(read_lines(candidates[0].ref_files[split]))
    systems = [candidates[0]]
    for run in candidates[1:]:
        if list(read_lines(run.ref_files[split])) == references:
            systems.append(run)
        else:
            log.warning("%s: other %s references than the best run, not tested", run.folder, split)
    return systems


def paired_bootstrap(
    ranked: list[Run], split: str, samples: int
) -> tuple[dict[Path, Result], str | None]:
    """sacreBLEU's paired bootstrap resampling of every comparable run against the best one.

    Returns {folder: Result} (p_value None for the best run) and the test's sacreBLEU
    signature (None when no test ran).
    """
    systems = comparable_runs(ranked, split)
    if len(systems) < 2:
        return {}, None
    references = list(read_lines(systems[0].ref_files[split]))
    best = systems[0].bleu[split]
    results = {systems[0].folder: Result(best)}
    # sacreBLEU counts resampled differences strictly above the observed one. With an observed
    # difference of 0 and every resampled one 0 too (identical outputs, or both at BLEU 0) the
    # count is 0 and p = 1/(n+1): "significant". A difference of 0 is no evidence of one, so
    # runs with the best's BLEU get p = 1 without resampling.
    tested = [0]
    for i, run in enumerate(systems[1:], start=1):
        if run.bleu[split] == best:
            results[run.folder] = Result(best, p_value=1.0)
        else:
            tested.append(i)
    if len(tested) < 2:
        return results, None
    named = [
        (str(systems[i].folder), list(read_lines(systems[i].hyp_files[split]))) for i in tested
    ]
    test = PairedTest(named, {"BLEU": BLEU()}, [references], test_type="bs", n_samples=samples)
    signatures, scores = test()
    (metric,) = signatures
    results.update(zip([systems[i].folder for i in tested], scores[metric], strict=True))
    return results, str(signatures[metric])


def significance_mark(result: Result | None) -> str:
    """The significance column: best (the run the others are tested against), yes or no
    (p < 0.05 or not), or empty (not tested)."""
    if result is None:
        return ""
    if result.p_value is None:
        return "best"
    return "yes" if result.p_value < SIGNIFICANCE_LEVEL else "no"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


@dataclass
class Column:
    """A table column: its raw value per run (for CSV) and its Markdown text."""

    name: str
    values: list[Any]
    texts: list[str]


def text_column(name: str, values: list[str]) -> Column:
    return Column(name, values, values)


def number_column(name: str, values: list[float | None], digits: int) -> Column:
    return Column(name, values, [fmt(v, digits) for v in values])


def score_columns(ranked: list[Run]) -> list[Column]:
    """BLEU then chrF of every split role any run has (valid, test, then the rest)."""
    roles = {role for r in ranked for role in r.bleu}
    ordered = [role for role in ("valid", "test") if role in roles] + sorted(
        roles - {"valid", "test"}
    )
    cols = []
    for metric, attr in (("BLEU", "bleu"), ("chrF", "chrf")):
        for role in ordered:
            cols.append(
                number_column(f"{role} {metric}", [getattr(r, attr).get(role) for r in ranked], 2)
            )
    return cols


def columns(
    ranked: list[Run], root: Path, split: str, keys: list[str], tests: dict[Path, Result]
) -> list[Column]:
    """The table, column by column, rows in ranked order."""
    results = [tests.get(r.folder) for r in ranked]
    parameters = [r.parameters for r in ranked]
    seconds = [r.train_seconds for r in ranked]
    return [
        text_column("run", [str(r.folder.relative_to(root)) for r in ranked]),
        *[text_column(key, [r.overrides.get(key, "") for r in ranked]) for key in keys],
        *score_columns(ranked),
        number_column(f"p ({split} vs best)", [res.p_value if res else None for res in results], 3),
        text_column("significant", [significance_mark(res) for res in results]),
        Column("parameters", parameters, ["" if p is None else f"{p:,}" for p in parameters]),
        Column("train seconds", seconds, [duration(s) for s in seconds]),
        number_column(
            f"{split} sentences/s", [r.sentences_per_second.get(split) for r in ranked], 1
        ),
        number_column(f"{split} tokens/s", [r.tokens_per_second.get(split) for r in ranked], 0),
    ]


def write_csv(path: Path, cols: list[Column]) -> None:
    """Raw values: full-precision scores, seconds, empty cells where a run has none."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([c.name for c in cols])
        writer.writerows(
            zip(*[["" if v is None else v for v in c.values] for c in cols], strict=True)
        )


def plot_parameters(ranked: list[Run], keys: list[str], split: str, path: Path) -> bool:
    """BLEU against each differing override, one subplot each; False if there is nothing to draw."""
    points = {
        key: [
            (r.overrides[key], r.bleu[split])
            for r in ranked
            if key in r.overrides and split in r.bleu
        ]
        for key in keys
    }
    points = {key: pairs for key, pairs in points.items() if pairs}
    if not points:
        return False
    plots.bleu_by_parameter(points, f"{split} BLEU", path)
    return True


def markdown(
    root: Path,
    runs: list[Run],
    split: str,
    cols: list[Column],
    tests: dict[Path, Result],
    *,
    signature: str | None,
    plotted: bool,
) -> str:
    """DIR/report.md: the table (without the columns no run fills; the CSV keeps them all),
    how to read its significance column, the plot."""
    kinds = {kind: sum(r.kind == kind for r in runs) for kind in ("evaluate", "train")}
    shown = [c for c in cols if any(c.texts)]
    lines = [
        f"# Runs under {root}",
        "",
        f"{len(runs)} runs ({kinds['evaluate']} evaluate, {kinds['train']} training), "
        f"ranked by {split} BLEU.",
        "",
        table(
            [c.name for c in shown],
            [list(row) for row in zip(*[c.texts for c in shown], strict=True)],
        ),
        "",
    ]
    if not tests:
        lines.append(
            f"No significance test: fewer than two runs with {split} hypotheses on the same "
            "references (a training run has them from its final evaluation only)."
        )
    else:
        lines.append(
            f"significant: paired bootstrap resampling of each run's {split} output "
            f"against the best run's; yes = p < {SIGNIFICANCE_LEVEL}. A run with the best run's "
            "BLEU has p = 1 (not resampled)." + (f" sacreBLEU: `{signature}`." if signature else "")
        )
    if plotted:
        lines += ["", f"![{split} BLEU by parameter]({PLOT_NAME})"]
    return "\n".join(lines) + "\n"


def report_runs(root: Path, split: str | None, samples: int) -> str:
    """Write root/report.md, root/report.csv and root/bleu_by_parameter.png; return report.md."""
    runs = find_runs(root)
    split = ranking_split(runs, split)
    sets = sorted({run.scored_on[split] for run in runs if split in run.scored_on})
    if len(sets) > 1:  # one column, one ranking: the same sentences for every run
        raise ValueError(
            f"the runs scored {split} on different sets ({', '.join(sets)}): report the "
            "folders of each set apart"
        )
    ranked = rank(runs, split)
    keys = differing_overrides(ranked)
    tests, signature = paired_bootstrap(ranked, split, samples)
    cols = columns(ranked, root, split, keys, tests)
    write_csv(root / "report.csv", cols)
    plotted = plot_parameters(ranked, keys, split, root / PLOT_NAME)
    text = markdown(root, runs, split, cols, tests, signature=signature, plotted=plotted)
    write_text(root / "report.md", text)
    return text
