"""`python -m nmt.aer gold=FILE hyp=FILE`: precision, recall and alignment error rate of word
alignments (Pharaoh lines, e.g. from `translate alignments=true`'s last column, or eflomal's
Pharaoh output) against a gold standard with sure "i-j" and possible "i?j" / "ipj" links
(nmt.evaluation.alignment_error). One line out: "precision P recall R AER E (N sentences)".
"""

from __future__ import annotations

import hydra
from omegaconf import OmegaConf

from nmt.cli import before_hydra, one_line_errors, setup_logging
from nmt.config import AerConfig, register_configs
from nmt.evaluation.alignment_error import alignment_error
from nmt.files import read_lines

EXAMPLE = "python -m nmt.aer gold=test.gold.align hyp=test.hyp.align"


def run(cfg: AerConfig) -> str:
    result = alignment_error(list(read_lines(cfg.gold)), list(read_lines(cfg.hyp)))
    return (
        f"precision {result.precision:.4f} recall {result.recall:.4f} "
        f"AER {result.aer:.4f} ({result.sentences} sentences)"
    )


register_configs("aer")


@hydra.main(version_base=None, config_path="conf", config_name="aer")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.aer", EXAMPLE):
        print(run(OmegaConf.to_object(dict_cfg)))


if __name__ == "__main__":
    before_hydra("aer")
    main()
