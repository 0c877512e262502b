"""`python -m nmt.translate ckpt=PATH [input=FILE] [output=FILE] [decode=beam] [nbest=N]`.

Raw text in, raw text out, through the checkpoint's own sentencepiece model. Exactly one
output line per input line, in input order; an empty or whitespace-only line gives an empty
line. With nbest=N > 1 each line holds N tab-separated "hypothesis<TAB>score" pairs, best
first (scores: the search's length-normalised log-probabilities). Input is read, translated
and written `chunk_lines` lines at a time, so memory stays bounded for any input size.
stdout holds only translations; logs and the progress bar go to stderr.
"""

from __future__ import annotations

import logging
import sys
from contextlib import ExitStack
from typing import BinaryIO, TextIO

import hydra
from omegaconf import OmegaConf
from tqdm import tqdm

from nmt.checkpoint import load_ensemble, pick_device
from nmt.cli import one_line_errors, setup_logging
from nmt.config import TranslateConfig, register_configs
from nmt.decoding.text import output_lines, translate_lines
from nmt.files import read_chunks

log = logging.getLogger("nmt.translate")
EXAMPLE = "echo 'A man rides a bike.' | python -m nmt.translate ckpt=outputs/<run>/model.pt"


def check_request(cfg: TranslateConfig) -> None:
    """Refuse settings that cannot work before loading anything."""
    if cfg.nbest > 1 and cfg.decode.strategy != "beam":
        raise ValueError(f"nbest={cfg.nbest} needs beam search: add decode=beam")
    if cfg.decode.strategy == "beam" and cfg.nbest > cfg.decode.beam_size:
        raise ValueError(f"nbest={cfg.nbest} exceeds decode.beam_size={cfg.decode.beam_size}")


def translate_stream(
    cfg: TranslateConfig, source: BinaryIO, sink: TextIO, show_progress: bool
) -> int:
    """Translate every line of `source` into `sink`; returns the number of lines."""
    paths = [cfg.ckpt, *cfg.ensemble]
    translator = load_ensemble(paths, pick_device(cfg.device), cfg.dtype)
    log.info(
        "%s -> %s model from %s, weights in %s",
        translator.src_lang,
        translator.tgt_lang,
        " + ".join(paths),
        translator.dtype,
    )
    total = 0
    name = getattr(source, "name", "input")
    with tqdm(desc="translating", unit=" lines", file=sys.stderr, disable=not show_progress) as bar:
        for lines in read_chunks(source, cfg.chunk_lines, name):
            nbest = translate_lines(
                translator.model, translator.tokenizer, lines, cfg.decode, cfg.max_tokens, total + 1
            )
            for line in output_lines(translator.tokenizer, nbest, cfg.nbest):
                sink.write(line + "\n")
            sink.flush()
            total += len(lines)
            bar.update(len(lines))
    return total


def run(cfg: TranslateConfig) -> int:
    check_request(cfg)
    with ExitStack() as stack:
        source = stack.enter_context(open(cfg.input, "rb")) if cfg.input else sys.stdin.buffer
        if cfg.output:
            sink = stack.enter_context(open(cfg.output, "w", encoding="utf-8", newline="\n"))
        else:
            sys.stdout.reconfigure(encoding="utf-8", newline="\n")
            sink = sys.stdout
        show = cfg.progress == "true" or (cfg.progress == "auto" and cfg.input is not None)
        return translate_stream(cfg, source, sink, show)


register_configs()


@hydra.main(version_base=None, config_path="conf", config_name="translate")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.translate", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg))


if __name__ == "__main__":
    main()
