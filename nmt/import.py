"""`python -m nmt.import source=DIR_OR_HUB_ID out=model.pt`: a Hugging Face MarianMTModel (an
OPUS-MT model, or our own format=hf export) as our model.pt (nmt.hf.marian_import)."""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from omegaconf import OmegaConf

from nmt.cli import before_hydra, one_line_errors, setup_logging
from nmt.config import ImportConfig, register_configs
from nmt.errors import UsageError

log = logging.getLogger("nmt.import")
EXAMPLE = "python -m nmt.import source=exports/hf out=imported/model.pt"


def run(cfg: ImportConfig) -> Path:
    from nmt.checkpoint import save_checkpoint
    from nmt.hf.marian_import import MarianImportError, import_marian

    out = Path(cfg.out)
    if out.exists() and not cfg.overwrite:
        raise UsageError(f"out={out} exists (overwrite=true replaces it)")
    try:
        checkpoint = import_marian(cfg.source, cfg.src_lang, cfg.tgt_lang)
    except MarianImportError as error:
        raise UsageError(f"cannot import {cfg.source}: {error}") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(out, checkpoint)
    model = checkpoint.model.cfg
    log.info(
        "Imported %s to %s: %d+%d layers, d_model %d, %s, %d pieces, %s->%s",
        cfg.source,
        out,
        model.encoder_layers,
        model.decoder_layers,
        model.d_model,
        model.activation,
        model.vocab_size,
        checkpoint.src_lang,
        checkpoint.tgt_lang,
    )
    return out


register_configs("import")


@hydra.main(version_base=None, config_path="conf", config_name="import")
def main(dict_cfg) -> None:
    setup_logging()
    with one_line_errors("nmt.import", EXAMPLE):
        run(OmegaConf.to_object(dict_cfg))


if __name__ == "__main__":
    before_hydra("import")
    main()
