"""`python -m nmt.translate ckpt=PATH [input=FILE] [output=FILE] [decode=beam] [nbest=N]`.

Raw text in, raw text out, through the checkpoint's own sentencepiece model. Exactly one
output line per input line, in input order; an empty or whitespace-only line gives an empty
line. With nbest=N > 1 each line holds N tab-separated "hypothesis<TAB>score" pairs, best
first (scores: the search's length-normalised log-probabilities). Input is read, translated
and written `chunk_lines` lines at a time, so memory stays bounded for any input size.
stdout holds only translations; logs and the progress bar go to stderr.
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TextIO

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf
from tqdm import tqdm

from nmt.checkpoint import load_ensemble, pick_device
from nmt.config import DecodeConfig, register_configs
from nmt.files import decode_lines
from nmt.inference import best_text, one_line, translate_lines

log = logging.getLogger("nmt.translate")


@dataclass
class TranslateConfig:
    ckpt: str = MISSING
    ensemble: list[str] = field(default_factory=list)  # more checkpoints searched with ckpt
    input: str | None = None
    output: str | None = None
    decode: DecodeConfig = MISSING
    nbest: int = 1
    max_tokens: int = 4096
    device: str = "auto"
    dtype: str = "float32"  # float32 | bfloat16 | float16 | auto (bf16 where native)
    chunk_lines: int = 10000
    progress: str = "auto"


def read_chunks(stream: io.BufferedReader, size: int) -> Iterator[list[str]]:
    """Lines of a binary stream as text (see `nmt.files.decode_lines`), `size` at a time."""
    chunk: list[str] = []
    for line in decode_lines(stream, getattr(stream, "name", "input")):
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def format_lines(tokenizer, nbest_lists, nbest: int) -> list[str]:
    if nbest == 1:
        return best_text(tokenizer, nbest_lists)
    lines = []
    for hyps in nbest_lists:
        texts = tokenizer.decode([h.tokens for h in hyps])
        lines.append(
            "\t".join(f"{one_line(t)}\t{h.score:.4f}" for t, h in zip(texts, hyps, strict=True))
        )
    return lines


def translate_stream(
    cfg: TranslateConfig, source: io.BufferedReader, sink: TextIO, show_progress: bool
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
    with tqdm(desc="translating", unit=" lines", file=sys.stderr, disable=not show_progress) as bar:
        for lines in read_chunks(source, cfg.chunk_lines):
            nbest = translate_lines(
                translator.model, translator.tokenizer, lines, cfg.decode, cfg.max_tokens, total + 1
            )
            for line in format_lines(translator.tokenizer, nbest, cfg.nbest):
                sink.write(line + "\n")
            sink.flush()
            total += len(lines)
            bar.update(len(lines))
    return total


def run(cfg: TranslateConfig) -> int:
    if cfg.nbest > 1 and cfg.decode.strategy != "beam":
        raise ValueError(f"nbest={cfg.nbest} needs beam search: add decode=beam")
    if cfg.decode.strategy == "beam" and cfg.nbest > cfg.decode.beam_size:
        raise ValueError(f"nbest={cfg.nbest} exceeds decode.beam_size={cfg.decode.beam_size}")
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
ConfigStore.instance().store(name="translate_schema", node=TranslateConfig)


@hydra.main(version_base=None, config_path="../conf", config_name="translate")
def main(dict_cfg) -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        run(OmegaConf.to_object(dict_cfg))
    except (FileNotFoundError, ValueError, OSError) as error:
        sys.exit(f"nmt.translate: error: {error}")


if __name__ == "__main__":
    main()
