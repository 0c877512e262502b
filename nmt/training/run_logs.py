"""A run's logs (logs/metrics.csv and TensorBoard events), continued across a resume.

Lightning's CSV logger deletes metrics.csv when it opens a folder that has one, so a run
resumed in its own folder (`ckpt_path=last`) would lose every row logged before the
interruption. Here a resumed run keeps the rows logged before its checkpoint's step and
drops those at or after it (the resumed run logs those steps again); TensorBoard hides the
events at or after that step the same way (SummaryWriter's `purge_step`).
"""

from __future__ import annotations

import csv
from pathlib import Path

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from nmt.files import atomic_path


def keep_rows_before(path: Path, step: int) -> list[str]:
    """Cut metrics.csv down to its rows logged before `step`; returns its header (none if
    there is no file)."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        kept = [row for row in reader if row.get("step") and int(row["step"]) < step]
        header = list(reader.fieldnames or [])
    with atomic_path(path) as temporary, open(temporary, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(kept)
    return header


class ContinuedWriter(ExperimentWriter):
    """Lightning's metrics.csv writer, appending to the file as it is, under its `header`."""

    def __init__(self, log_dir: str, header: list[str]):
        super().__init__(log_dir)
        self.metrics_keys = list(header)

    def _check_log_dir_exists(self) -> None:
        """Lightning deletes metrics.csv here; it holds what the resumed run keeps."""


class ContinuedCSVLogger(CSVLogger):
    """A CSVLogger in `root/logs/` that, resuming at `resumed_step`, keeps the earlier rows."""

    def __init__(self, root: Path, resumed_step: int | None):
        super().__init__(root, name="logs", version="")
        self.resumed_step = resumed_step

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:  # rank 0 only: the other ranks get a dummy
            self._fs.makedirs(self.root_dir, exist_ok=True)
            if self.resumed_step is None:
                self._experiment = ExperimentWriter(self.log_dir)
            else:
                path = Path(self.log_dir) / ExperimentWriter.NAME_METRICS_FILE
                header = keep_rows_before(path, self.resumed_step)
                self._experiment = ContinuedWriter(self.log_dir, header)
        return self._experiment


def run_loggers(run_dir: Path, resumed_step: int | None) -> list:
    """The CSV and TensorBoard loggers of a run in `run_dir`, resumed at `resumed_step` (the
    checkpoint's global step) or new (None)."""
    purge = {} if resumed_step is None else {"purge_step": resumed_step}
    return [
        ContinuedCSVLogger(run_dir, resumed_step),
        TensorBoardLogger(run_dir, name="logs", version="", **purge),
    ]
