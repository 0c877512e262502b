"""`python -m nmt.report DIR [--split valid] [--bootstrap 1000]`: one table of the runs in DIR.

Finds every evaluate report folder and training run folder under DIR (e.g. a Hydra multirun
folder), and writes DIR/report.md, DIR/report.csv and DIR/bleu_by_parameter.png: the overrides
that differ between runs, BLEU and chrF per split, paired-bootstrap significance against the
best run, parameters, training time, decoding speed. The table is printed too. Logic:
`nmt.evaluation.runs_table`. Starts without torch.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from nmt.cli import one_line_errors, setup_logging
from nmt.evaluation.runs_table import report_runs

EXAMPLE = "python -m nmt.report multirun/evaluate/<date_time>"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m nmt.report",
        description="One table of the evaluate and training runs under DIR (a sweep's folder): "
        "the settings that differ, BLEU and chrF per split with paired-bootstrap significance "
        "against the best, parameters, training time, decoding speed; written to "
        "DIR/report.md, report.csv and bleu_by_parameter.png, and printed.",
        epilog=f"Example: {EXAMPLE}",
    )
    parser.add_argument("dir", type=Path, help="folder holding evaluate and/or training runs")
    parser.add_argument(
        "--split", default=None, help="split role to rank and test by (default: valid, else test)"
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="paired bootstrap resamples")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)  # argparse answers a missing DIR with usage and exit code 2
    setup_logging()
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)  # one line per system otherwise
    with one_line_errors("nmt.report", EXAMPLE):
        text = report_runs(args.dir, args.split, args.bootstrap)
    print(text, end="")


if __name__ == "__main__":
    main()
