"""`python -m nmt.calibrate ckpt=PATH src=val.en ref=val.de [backend=ctranslate2]`.

Translates src with the model's own search, force-decodes each translation for its log-prob
per token, and fits the map from that score to the sentence chrF its translation reached
against ref (isotonic regression: nmt.inference.calibration). The map is stored in the model
(model.pt, or an export's nmt.json), so `translate scores=true`, `nmt.score` and the server
give a calibrated `confidence` from then on. Fit it on held-out pairs (val), never on test;
run it again after changing the model's search.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import sacrebleu
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from nmt.cli import before_hydra, one_line_errors, setup_logging
from nmt.config import CalibrateConfig, register_configs
from nmt.decoding.settings import describe_search
from nmt.errors import UsageError
from nmt.files import read_lines
from nmt.inference.calibration import Calibration
from nmt.inference.loading import check_model, load
from nmt.inference.search_choice import choose_search

log = logging.getLogger("nmt.calibrate")
EXAMPLE = "python -m nmt.calibrate ckpt=outputs/<run>/model.pt src=val.en ref=val.de"


def fit(engine, search, lines: list[str], refs: list[str], source: str) -> Calibration:
    """The calibration of `engine` under `search` on these pairs (empty source lines left out)."""
    found = engine.translate(lines, search)
    best = [hyps[0].tokens if hyps else [] for hyps in found]
    texts = engine.tokenizer.decode(best)
    rated = engine.score(lines, best)
    raw, chrf = [], []
    for scores, text, ref in zip(rated, texts, refs, strict=True):
        if scores is not None:
            raw.append(scores.mean_log_prob)
            chrf.append(sacrebleu.sentence_chrf(text, [ref]).score / 100)
    fitted_on = {"src": source, "lines": len(raw), "search": describe_search(search)}
    return Calibration.fit(raw, chrf, fitted_on)


def run(cfg: CalibrateConfig, overrides: list[str]) -> Calibration:
    check_model(cfg)
    for name in ("src", "ref"):
        if not Path(getattr(cfg, name)).is_file():
            raise UsageError(f"{name}={getattr(cfg, name)} not found")
    lines, refs = list(read_lines(cfg.src)), list(read_lines(cfg.ref))
    if len(lines) != len(refs):
        raise UsageError(f"src={cfg.src} has {len(lines)} lines but ref={cfg.ref} {len(refs)}")
    engine = load(cfg)
    search, search_line = choose_search(engine.card, cfg.decode, overrides)
    engine.check(search)
    log.info(search_line)
    calibration = fit(engine, search, lines, refs, str(Path(cfg.src).resolve()))
    engine.calibrate(calibration)
    log.info(
        "confidence fitted on %d lines: %d steps from %.3f (log-prob per token %.2f) to %.3f "
        "(%.2f); stored in %s",
        calibration.fitted_on["lines"],
        len(calibration.raw),
        calibration.chrf[0],
        calibration.raw[0],
        calibration.chrf[-1],
        calibration.raw[-1],
        cfg.ckpt,
    )
    return calibration


register_configs("calibrate")


@hydra.main(version_base=None, config_path="conf", config_name="calibrate")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.calibrate", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg), list(HydraConfig.get().overrides.task))


if __name__ == "__main__":
    before_hydra("calibrate")
    main()
