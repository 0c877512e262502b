"""From a raw sentence score to a confidence in [0, 1]: the sentence chrF the model's own
translations with that score reached on held-out data (val), by a monotone map.

The map is fitted once after training (`python -m nmt.calibrate`) with scikit-learn's
isotonic regression of sentence chrF / 100 on the log-prob per token, and kept as the
regression's breakpoints in the model's info ("confidence"), so model.pt and an export carry
it and applying it needs only `numpy.interp` (flat past either end). The raw score alone is
no such thing: its scale moves with the model, the data and the search.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

INFO_KEY = "confidence"


@dataclass
class Calibration:
    """raw: increasing log-probs per token; chrf: the expected sentence chrF / 100 at each;
    fitted_on: what it was fitted on, for the record (file, lines, search)."""

    raw: list[float]
    chrf: list[float]
    fitted_on: dict

    def confidence(self, mean_log_prob: float) -> float:
        return float(np.interp(mean_log_prob, self.raw, self.chrf))

    @classmethod
    def fit(cls, raw: list[float], chrf: list[float], fitted_on: dict) -> Calibration:
        """The isotonic (non-decreasing) least-squares fit of chrf on raw, clipped to [0, 1]."""
        from sklearn.isotonic import IsotonicRegression

        if len(raw) < 2:
            raise ValueError(f"calibration needs at least 2 translated lines, not {len(raw)}")
        fit = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, chrf)
        return cls(
            [float(x) for x in fit.X_thresholds_],
            [float(y) for y in fit.y_thresholds_],
            fitted_on,
        )

    def as_info(self) -> dict:
        return asdict(self)

    @classmethod
    def from_info(cls, info: dict) -> Calibration | None:
        """The calibration a model's info holds, None if it holds none."""
        stored = info.get(INFO_KEY)
        return cls(**stored) if stored else None
