"""`python -m nmt.translate ckpt=PATH [input=FILE] [output=FILE] [decode=beam] [nbest=N]`.

Raw text in, raw text out, through the model's own sentencepiece model. Exactly one output
line per input line, in input order; an empty or whitespace-only line gives an empty line.
segment=sentences (the default) cuts each line into its sentences and joins their
translations back with the line's own spacing and Markdown markers; segment=lines translates
each line as one segment (nmt.documents). format=html reads the whole input as one HTML
document and writes it translated, its tags kept (nmt.documents.markup); format=docx reads a
Word file and writes it translated, its runs' formatting kept (nmt.documents.docx_file);
format=auto (the default) takes html for an input= ending .html or .htm, docx for .docx,
text otherwise.
The search is the one stored with the model unless the command line names one
(`decode=beam`, `decode=sample`, or single fields such as `decode.beam_size=8`); the log says
which. With nbest=N > 1 each line holds N tab-separated "hypothesis<TAB>score" pairs, best
first (the n best of beam search, or N samples). prefix_file=FILE (aligned with the input)
forces the start of each translation. scores=true adds the best translation's scores
(output_text.score_columns) after a tab; alignments=true adds each translation's word
alignment in Pharaoh format (nmt.inference.alignment) after a tab, the scores' too.
backend=ctranslate2 translates with a directory written by `python -m nmt.export`, with the
same contract. Input is read, translated and
written `chunk_lines` lines at a time, so memory stays bounded for any input size; an output=
file appears whole once every line is translated, or not at all. stdout
holds only translations; logs and the progress bar go to stderr.
"""

from __future__ import annotations

import logging
import sys
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import BinaryIO, TextIO

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from nmt.cli import before_hydra, one_line_errors, progress_bar, setup_logging, show_progress
from nmt.config import ModelConfig, TranslateConfig, register_configs
from nmt.decoding.settings import DecodeConfig
from nmt.documents.formats import FORMATS, SUFFIXES
from nmt.errors import UsageError
from nmt.files import atomic_path, paired_chunks, read_chunks, write_bytes
from nmt.inference.loading import check_model, load
from nmt.inference.output_checks import tally
from nmt.inference.search_choice import choose_search
from nmt.jobs.check import check
from nmt.jobs.job import Job, JobError, Limits
from nmt.jobs.run import engine_translator
from nmt.jobs.run import run as run_job
from nmt.terms.glossary import GlossaryError, read_glossary
from nmt.terms.placing import term_tally
from nmt.translation.output_lines import output_lines
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.settings import checked_rules

log = logging.getLogger("nmt.translate")
EXAMPLE = "echo 'A man rides a bike.' | python -m nmt.translate ckpt=outputs/<run>/model.pt"


def check_request(cfg: TranslateConfig) -> None:
    """Refuse settings that cannot work before loading anything: the job's own rules
    (nmt.jobs), then the command's."""
    checked_rules(cfg, cfg.backend)
    check_model(cfg)
    try:
        command_job(cfg, DecodeConfig(nbest=cfg.nbest)).check_options()
    except (JobError, GlossaryError) as error:
        raise UsageError(str(error)) from None
    if cfg.scores and cfg.nbest > 1:
        raise UsageError("scores=true scores the best translation: drop nbest= (or set it to 1)")
    if document_format(cfg) == "docx" and not (cfg.input and cfg.output):
        raise UsageError("format=docx reads input=FILE and writes output=FILE")
    for name in ("input", "prefix_file"):
        path = getattr(cfg, name)
        if path is not None and not Path(path).exists():
            raise UsageError(f"{name}={path} not found")
    if cfg.input and document_format(cfg) == "text" and (what := binary(cfg.input)):
        raise UsageError(
            f"input={cfg.input} is {what}, not text: the files read as documents are "
            f"{', '.join(SUFFIXES)}"
        )


def binary(path: str) -> str:
    """What a file read as lines is instead of text ("" when its start looks like text): a
    presentation or a spreadsheet would otherwise be decoded as lines of bytes."""
    with open(path, "rb") as file:
        head = file.read(4096)
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    if head.startswith(b"%PDF"):
        return "a PDF file"
    return "a binary file" if b"\0" in head else ""


def command_job(
    cfg: TranslateConfig, search: DecodeConfig, texts=None, data=None, prefixes=None
) -> Job:
    """The job of this command's settings: `texts` (a chunk of lines) or `data` (a
    document)."""
    return Job(
        search=search,
        texts=texts,
        data=data,
        name=f"input={cfg.input}" if cfg.input else "stdin",
        format=document_format(cfg),
        segment=cfg.segment,
        prefixes=prefixes if prefixes is not None else ([""] if cfg.prefix_file else None),
        scores=cfg.scores,
        alignments=cfg.alignments,
        protect=checked_rules(cfg, cfg.backend),
        glossary=read_glossary(cfg.glossary, cfg.glossary_exact) if cfg.glossary else None,
        retranslate=cfg.retranslate,
    )


def limits(cfg: TranslateConfig) -> Limits:
    """A command takes any number of lines of any length; a document is bounded."""
    bounded = ("max_file_bytes", "max_inflated_bytes", "max_zip_ratio")
    return Limits.unbounded(**{name: getattr(cfg, name) for name in bounded})


def document_format(cfg: TranslateConfig) -> str:
    """A format of the table (nmt.documents.formats): format=, or with format=auto the input
    file's suffix (text for one the table does not name)."""
    if cfg.format != "auto":
        if cfg.format not in FORMATS:
            raise UsageError(
                f"format must be auto or one of {', '.join(FORMATS)}, not {cfg.format!r}"
            )
        return cfg.format
    suffix = Path(cfg.input).suffix.lower() if cfg.input else ""
    return SUFFIXES.get(suffix, "text")


def prepare(cfg: TranslateConfig, overrides: list[str]):
    """The engine and the search this command runs, both logged."""
    engine = load(cfg)
    # translate's own nbest= always counts
    search, search_line = choose_search(engine.card, cfg.decode, overrides, nbest=cfg.nbest)
    engine.check(search)
    log.info(
        "%s -> %s model from %s (%s)",
        engine.src_lang,
        engine.tgt_lang,
        " + ".join([cfg.ckpt, *cfg.ensemble]),
        engine.describe(),
    )
    log.info(search_line)
    if (cfg.alignments or document_format(cfg) != "text") and not engine.card.shape.get(
        "alignment_heads"
    ):
        log.warning(
            "alignments=true or a document format: this model was trained without guided "
            "alignment, so its alignments (which place tags and runs) come from the raw "
            "attention of decoder layer %d (averaged over heads), which aligns worse than a "
            "trained alignment head (docs/guide.md)",
            ModelConfig(**engine.card.shape).alignment_layer_index,
        )
    return engine, search


def translate_document(cfg: TranslateConfig, overrides: list[str], data: bytes) -> bytes:
    """One HTML or .docx document (all of `data`), translated."""
    engine, search = prepare(cfg, overrides)
    job = command_job(cfg, search, data=data)
    try:
        plan = check(job, limits(cfg))
    except JobError as error:
        raise UsageError(str(error)) from None
    splitter = SentenceSplitter(max_words=cfg.segment_max_words)
    return run_job(plan, engine_translator(engine, job, splitter)).data


def translate_stream(
    cfg: TranslateConfig,
    overrides: list[str],
    source: BinaryIO,
    sink: TextIO,
    show_progress: bool,
    prefixes: BinaryIO | None = None,
) -> int:
    """Translate every line of `source` into `sink`; returns the number of lines."""
    engine, search = prepare(cfg, overrides)
    total = 0
    splitter = SentenceSplitter(max_words=cfg.segment_max_words)
    name = getattr(source, "name", "input")
    source_chunks = read_chunks(source, cfg.chunk_lines, name)
    chunks = ((lines, None) for lines in source_chunks)
    if prefixes:
        chunks = paired_chunks(
            source_chunks,
            read_chunks(prefixes, cfg.chunk_lines, cfg.prefix_file),
            "the input",
            f"prefix_file={cfg.prefix_file}",
        )
    warnings: list[list[str]] = []
    terms: list[list[dict]] = []
    with progress_bar(show_progress, desc="translating", unit=" lines") as bar:
        for lines, forced in chunks:
            job = command_job(cfg, search, texts=lines, prefixes=forced)
            plan = check(job, limits(cfg))
            translate = engine_translator(engine, job, splitter)
            found = run_job(plan, translate, first_line_number=total + 1).translations
            warnings += [t.warnings for t in found]
            terms += [t.terms for t in found]
            out = output_lines(found, cfg.nbest, cfg.scores, cfg.alignments, bool(cfg.glossary))
            for line in out:
                sink.write(line + "\n")
            sink.flush()
            total += len(lines)
            bar.update(len(lines))
    log.info(tally(warnings))
    if cfg.glossary:
        log.info(term_tally(terms))
    return total


def run(cfg: TranslateConfig, overrides: list[str]) -> int:
    """`overrides`: the command line, which decides the search (`chosen_search`)."""
    check_request(cfg)
    kind = document_format(cfg)
    if kind != "text":  # one document: read whole, written whole (or not at all)
        with open(cfg.input, "rb") if cfg.input else nullcontext(sys.stdin.buffer) as source:
            data = source.read(cfg.max_file_bytes + 1)  # stdin is bounded as a file is
        if len(data) > cfg.max_file_bytes:
            where = f"input={cfg.input}" if cfg.input else "stdin"
            raise UsageError(
                f"{where} has more than {cfg.max_file_bytes} bytes: the limit is "
                f"max_file_bytes={cfg.max_file_bytes}"
            )
        translated = translate_document(cfg, overrides, data)
        if cfg.output:
            write_bytes(cfg.output, translated)
        else:
            sys.stdout.buffer.write(translated)
            sys.stdout.flush()
        return 1
    with ExitStack() as stack:
        source = stack.enter_context(open(cfg.input, "rb")) if cfg.input else sys.stdin.buffer
        prefixes = stack.enter_context(open(cfg.prefix_file, "rb")) if cfg.prefix_file else None
        if cfg.output:  # written beside it, renamed into place once whole (nmt.files)
            written = stack.enter_context(atomic_path(cfg.output))
            sink = stack.enter_context(open(written, "w", encoding="utf-8", newline="\n"))
        else:
            sys.stdout.reconfigure(encoding="utf-8", newline="\n")
            sink = sys.stdout
        show = show_progress(cfg.progress, default=cfg.input is not None)
        return translate_stream(cfg, overrides, source, sink, show, prefixes)


register_configs("translate")


@hydra.main(version_base=None, config_path="conf", config_name="translate")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.translate", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg), list(HydraConfig.get().overrides.task))


if __name__ == "__main__":
    before_hydra("translate")
    main()
