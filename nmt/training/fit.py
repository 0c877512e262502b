"""One training run, start to finish: the Trainer and its callbacks, fit (or resume), then
model.pt, the final evaluation and metrics.json.

Each run writes to its own folder (Hydra's output dir): the composed config (.hydra/),
checkpoints/ (best-k by the monitored metric, last, optional periodic and last-epochs),
logs/ (CSV and TensorBoard), model.pt (an inference checkpoint of the best weights, or of
the average of the last N epochs, for the window N that scores highest on validation) and
metrics.json, and evaluation/ when the experiment names splits for the final evaluation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.plugins import TorchCheckpointIO

from nmt.checkpoint import (
    Checkpoint,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
    saved_step,
)
from nmt.config import EvaluateConfig, TrainConfig
from nmt.cpu import set_onednn_kernel_cache, warn_if_emulated_bf16
from nmt.data.datamodule import TranslationDataModule
from nmt.data.sources import provenance
from nmt.errors import UsageError
from nmt.evaluation.evaluation_run import evaluate, summary
from nmt.evaluation.runs_table import FINAL_EVALUATION
from nmt.files import atomic_path, write_text
from nmt.training.budget import ChooseBudgetBand, FitScheduleToBudget, less_time, time_budget
from nmt.training.budget_bands import check_bands, set_before_building
from nmt.training.init_from import starting_point
from nmt.training.lightning_module import TranslationModule
from nmt.training.run_logs import run_loggers
from nmt.training.selection import best_or_average

log = logging.getLogger(__name__)


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoints written atomically beside their target (a kill mid-write leaves
    the previous file, never a truncated one) and read with `weights_only=True` (a planted
    file cannot run code), with one-line errors. Remote (fsspec URL) paths use Lightning's own
    writer."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        with atomic_path(path) as tmp:
            torch.save(checkpoint, tmp)

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict:
        if "://" in str(path):
            return super().load_checkpoint(path, weights_only=True)
        return read_checkpoint(Path(path))


def build_callbacks(
    cfg: TrainConfig, checkpoint_dir: Path, band: tuple[int | None, float] = (None, 0.0)
) -> list[L.Callback]:
    """`band`: the budget band already chosen, if any, and the seconds spent choosing it
    (ChooseBudgetBand's `chosen` and `spent`)."""
    ckpt = cfg.checkpoint
    safe_metric = ckpt.monitor.replace("/", "_")
    callbacks: list[L.Callback] = [
        ModelCheckpoint(
            dirpath=checkpoint_dir,
            filename=f"step{{step:06d}}-{safe_metric}{{{ckpt.monitor}:.3f}}",
            auto_insert_metric_name=False,
            monitor=ckpt.monitor,
            mode=ckpt.mode,
            save_top_k=ckpt.save_top_k,
            save_last=ckpt.save_last,
        ),
        LearningRateMonitor(logging_interval="step"),
    ]
    if ckpt.every_n_train_steps:
        callbacks.append(
            ModelCheckpoint(
                dirpath=checkpoint_dir / "periodic",
                filename="step{step:06d}",
                auto_insert_metric_name=False,
                every_n_train_steps=ckpt.every_n_train_steps,
                save_top_k=-1,
            )
        )
    if ckpt.average_last_epochs:
        callbacks.append(
            ModelCheckpoint(  # monitoring the step keeps the latest N epoch ends
                dirpath=checkpoint_dir / "epochs",
                filename="epoch{epoch:03d}-step{step:06d}",
                auto_insert_metric_name=False,
                every_n_epochs=1,
                save_on_train_epoch_end=True,  # every epoch, not only those that validate
                monitor="step",
                mode="max",
                save_top_k=max(ckpt.average_last_epochs),
            )
        )
    if cfg.optim.follows_budget or cfg.budget_bands:
        # optim.total_steps fixes a cosine's end: the budget is then estimated for the bands alone
        callbacks.append(FitScheduleToBudget(fits_schedule=cfg.optim.total_steps is None))
    if cfg.budget_bands:
        # reads the estimate above
        callbacks.append(ChooseBudgetBand(cfg.budget_bands, cfg, *band))
    if ckpt.early_stopping_patience is not None:
        callbacks.append(
            EarlyStopping(
                monitor=ckpt.monitor, mode=ckpt.mode, patience=ckpt.early_stopping_patience
            )
        )
    return callbacks


def resolve_resume(ckpt_path: str | None, checkpoint_dir: Path) -> str | None:
    """`last` means the checkpoint of the latest step this run folder has written
    (checkpoints/**/*.ckpt, periodic and per-epoch ones included; the newest file of that
    step), whatever order a copy of the folder gave their times; anything else is a path."""
    if ckpt_path is None:
        return None
    if ckpt_path == "last":
        written = sorted(
            checkpoint_dir.rglob("*.ckpt"), key=lambda p: (saved_step(p), p.stat().st_mtime_ns)
        )
        if not written:
            raise FileNotFoundError(f"ckpt_path=last: no checkpoint under {checkpoint_dir}")
        return str(written[-1])
    if not Path(ckpt_path).is_file():
        raise FileNotFoundError(f"ckpt_path={ckpt_path}: no checkpoint there")
    return ckpt_path


def build_module(cfg: TrainConfig) -> tuple[TranslationDataModule, TranslationModule]:
    """The data module and the LightningModule of a run. Lightning runs the data module's
    prepare_data (tokenizer training, caches) once per node before setup on every rank; the
    module takes the tokenizer from it in its own setup. With `init_from`, both start from
    that checkpoint's model and tokenizer (nmt.training.init_from)."""
    start = starting_point(cfg) if cfg.init_from else None
    tokenizer = start.tokenizer if start else None
    datamodule = TranslationDataModule(cfg.data, cfg.tokenizer, seed=cfg.seed, tokenizer=tokenizer)
    module = TranslationModule(
        cfg.model,
        cfg.optim,
        cfg.decode,
        cfg.seed,
        src_lang=cfg.data.src_lang,
        tgt_lang=cfg.data.tgt_lang,
        val_bleu=cfg.val_bleu,
        compile_model=cfg.compile,
        on_nonfinite_loss=cfg.on_nonfinite_loss,
    )
    if start:
        module.model.load_state_dict(start.model.state_dict())
        log.info("Starting from %s (fresh optimizer and schedule)", cfg.init_from)
    log.info("Model: %s parameters", f"{module.num_parameters:,}")
    return datamodule, module


def check_alignment(cfg: TrainConfig) -> None:
    """Guided alignment needs the pairs' word alignment and a head to train."""
    if cfg.optim.alignment_weight <= 0:
        return
    if not cfg.data.word_alignments:
        raise UsageError("optim.alignment_weight needs data.word_alignments=true")
    if cfg.model.alignment_heads < 1:
        raise UsageError("optim.alignment_weight trains heads: set model.alignment_heads=1")
    if cfg.data.bpe_dropout > 0 or cfg.data.bidirectional_epochs:
        raise UsageError(
            "guided alignment reads the pairs as encoded: drop data.bpe_dropout and "
            "data.bidirectional_epochs"
        )


def check_precision(cfg: TrainConfig) -> bool:
    """Whether the run is on the CPU; refuse fp16 there: there is no fp16 autocast on the CPU,
    and Lightning would train in bf16 instead, emulated (many times slower) where the CPU
    lacks it, while the config says fp16."""
    on_cpu = cfg.trainer.accelerator == "cpu" or not torch.cuda.is_available()
    if on_cpu and cfg.trainer.precision.startswith("16"):
        raise UsageError(
            f"trainer.precision={cfg.trainer.precision} needs a GPU: the CPU has no fp16 "
            "autocast; use bf16-mixed (where the CPU has native bf16) or 32-true"
        )
    return on_cpu


def build_trainer(
    cfg: TrainConfig,
    run_dir: Path,
    band: tuple[int | None, float] = (None, 0.0),
    resumed_step: int | None = None,
) -> L.Trainer:
    """The Trainer of a run: cfg.trainer, our callbacks (`band`: as build_callbacks), CSV and
    TensorBoard logs under logs/ (continued from `resumed_step`, the global step of the
    checkpoint a resume starts from)."""
    check_alignment(cfg)
    on_cpu = check_precision(cfg)
    warn_if_emulated_bf16(
        torch.device("cpu" if on_cpu else "cuda"),
        cfg.trainer.precision.startswith("bf16"),
        f"trainer.precision={cfg.trainer.precision}",
    )
    trainer = L.Trainer(
        **asdict(cfg.trainer),
        default_root_dir=run_dir,
        callbacks=build_callbacks(cfg, run_dir / "checkpoints", band),
        logger=run_loggers(run_dir, resumed_step),
        use_distributed_sampler=False,  # our token-based batch sampler shards by rank itself
        # Bidirectional epochs read another loader than the ones after them, and augmented
        # epochs each their own views (the data module).
        reload_dataloaders_every_n_epochs=(
            1 if cfg.data.bidirectional_epochs or cfg.data.augment.active else 0
        ),
        plugins=[SafeCheckpointIO()],
    )
    if cfg.on_nonfinite_loss == "skip" and trainer.world_size > 1:
        raise ValueError(
            f"on_nonfinite_loss=skip is for one process: with {trainer.world_size} DDP "
            "processes the others would wait for the skipped batch's gradients; use stop"
        )
    return trainer


def fit(trainer: L.Trainer, module, datamodule, resume: str | None) -> float:
    """Train (or resume from the checkpoint `resume`); returns the seconds it took."""
    threads = torch.get_num_threads()  # CPU DDP lowers it to cores // processes for the fit
    start = time.perf_counter()
    with warnings.catch_warnings():
        # Lightning calls a mid-epoch resume unreliable unless the DataLoader is stateful; the
        # data module's state_dict restores the position in the epoch instead (tested).
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended")
        # Lightning's own use of a torch API that torch 2.13 deprecates; nothing for users to do.
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)`")
        trainer.fit(
            module,
            datamodule=datamodule,
            ckpt_path=resume,
            weights_only=True,
        )
    torch.set_num_threads(threads)  # what follows runs on rank 0 alone
    return time.perf_counter() - start


def final_weights(
    cfg: TrainConfig, trainer: L.Trainer, module, datamodule, run_dir: Path
) -> tuple[Checkpoint, dict | None]:
    """What model.pt holds: the best checkpoint (or the final weights without one), or an
    average of the last epochs' if that scores higher on validation; and how it was chosen."""
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if best:
        checkpoint = load_checkpoint(best)
    else:
        checkpoint = Checkpoint(
            module.model, datamodule.tokenizer, cfg.data.src_lang, cfg.data.tgt_lang, {}
        )
    checkpoint.info.update(
        {"experiment": cfg.experiment_name, "source_checkpoint": best or "final weights"}
    )
    epochs_dir = run_dir / "checkpoints" / "epochs"
    averaging = cfg.checkpoint.average_last_epochs and any(epochs_dir.glob("*.ckpt"))
    selection = None
    if trainer.is_global_zero and averaging:
        valid = datamodule.splits["valid"]
        checkpoint, selection = best_or_average(cfg, checkpoint, epochs_dir, valid, module.device)
    checkpoint.search = cfg.search  # the search chosen for the model travels with it
    # whether it learnt to carry protected spans' placeholders (nmt.terms.spans reads it)
    checkpoint.info["placeholders"] = cfg.data.augment.placeholders > 0
    # whether it learnt to read glossary terms annotated in the source, and in which form
    # (nmt.terms.annotation: translation annotates a glossary's terms for it)
    augment = cfg.data.augment
    checkpoint.info["terms"] = augment.term_form if augment.terms > 0 else None
    # and whether in place of their words (data.augment.term_mask): translation writes them so
    checkpoint.info["terms_in_place"] = augment.terms > 0 and augment.term_mask > 0
    if cfg.init_from:
        checkpoint.info["init_from"] = cfg.init_from
    if sources := provenance(cfg.data):  # a built corpus: its packages and their versions
        checkpoint.info["data_sources"] = sources
    return checkpoint, selection


def run_metrics(cfg: TrainConfig, trainer: L.Trainer, module, seconds: float, selection) -> dict:
    """What metrics.json says of the run."""
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    return {
        "experiment": cfg.experiment_name,
        "parameters": module.num_parameters,
        "global_step": trainer.global_step,
        "epoch": trainer.current_epoch,
        "train_seconds": seconds,
        "best_checkpoint": best,
        "best_score": _as_float(trainer.checkpoint_callback.best_model_score) if best else None,
        "monitor": cfg.checkpoint.monitor,
        "selection": selection,
        "final_metrics": {k: _as_float(v) for k, v in trainer.callback_metrics.items()},
    }


def train(cfg: TrainConfig, run_dir: Path) -> dict:
    """Train per `cfg`, writing everything under `run_dir`; returns the run's metrics. A
    budget band of another model shape, chosen while the first attempt trains, starts the run
    over once with that model (nmt.training.budget_bands); a resume builds the band's model."""
    check_bands(cfg.budget_bands, max(cfg.checkpoint.average_last_epochs, default=0))
    check_precision(cfg)
    set_onednn_kernel_cache(cfg.onednn_kernel_cache)
    resume = resolve_resume(cfg.ckpt_path, run_dir / "checkpoints")
    # the band's state only: mapped, the weights are not read (Lightning reads them)
    saved = read_checkpoint(Path(resume), mmap=True) if resume else {}
    band = ChooseBudgetBand.saved_in(saved)
    datamodule, module, trainer, seconds = attempt(
        cfg, run_dir, band, resume, saved.get("global_step")
    )
    chooser = next((c for c in trainer.callbacks if isinstance(c, ChooseBudgetBand)), None)
    if chooser is not None and chooser.start_over is not None:
        timer = time_budget(trainer)
        band = (cfg.budget_bands.index(chooser.start_over), timer.time_elapsed() if timer else 0.0)
        discard(trainer, run_dir)  # what it resumed from, if anything, was of the other model
        datamodule, module, trainer, more = attempt(cfg, run_dir, band, resume=None)
        seconds += more
    checkpoint, selection = final_weights(cfg, trainer, module, datamodule, run_dir)
    metrics = run_metrics(cfg, trainer, module, seconds, selection)
    write_rank_summary(run_dir / "ranks" / f"rank{trainer.global_rank}.json", trainer, module)
    if trainer.is_global_zero:
        save_checkpoint(run_dir / "model.pt", checkpoint)
        log.info("Inference checkpoint: %s", run_dir / "model.pt")
        if cfg.final_evaluation.splits:
            metrics["final_evaluation"] = final_evaluation(cfg, run_dir, metrics)
        write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2))
    return metrics


def attempt(
    cfg: TrainConfig,
    run_dir: Path,
    band: tuple[int | None, float],
    resume: str | None,
    resumed_step: int | None = None,
):
    """Build the run (with the settings of `band`'s chosen budget band, if any, and its
    max_time less the seconds spent choosing it) and fit it, from the checkpoint `resume` (of
    global step `resumed_step`) if given; returns the data module, the module, the trainer
    and the seconds the fit took."""
    chosen, spent = band
    if chosen is not None:  # the same model, whether started over or resumed after
        set_before_building(cfg.budget_bands[chosen], cfg)
        if spent and cfg.trainer.max_time:
            cfg.trainer.max_time = less_time(cfg.trainer.max_time, spent)
    L.seed_everything(cfg.seed, workers=True)
    datamodule, module = build_module(cfg)
    trainer = build_trainer(cfg, run_dir, band, resumed_step)
    return datamodule, module, trainer, fit(trainer, module, datamodule, resume)


def discard(trainer: L.Trainer, run_dir: Path) -> None:
    """Remove what a run that starts over wrote: its checkpoints (of another model) and logs."""
    if trainer.is_global_zero:
        for folder in ("checkpoints", "logs"):
            shutil.rmtree(run_dir / folder, ignore_errors=True)
    trainer.strategy.barrier("start over")


def final_evaluation(cfg: TrainConfig, run_dir: Path, metrics: dict) -> dict:
    """Score model.pt on `cfg.final_evaluation.splits` with its search, as `nmt.evaluate`
    would, into run_dir/evaluation/; returns each split's BLEU, lowercased BLEU and chrF2.
    `metrics`: the run's, shown in the evaluation as its training."""
    eval_cfg = EvaluateConfig(
        ckpt=str(run_dir / "model.pt"),
        data=cfg.data,
        decode=cfg.search,
        splits=cfg.final_evaluation.splits,
        max_tokens=cfg.final_evaluation.max_tokens,
    )
    folder = run_dir / FINAL_EVALUATION
    record = evaluate(eval_cfg, folder, overrides=[], training=metrics)
    log.info("Final evaluation:\n%s", summary(record, folder))
    keys = ("bleu", "bleu_lowercase", "chrf")
    return {role: {k: s[k] for k in keys} for role, s in record["splits"].items()}


def write_rank_summary(path: Path, trainer: L.Trainer, module: TranslationModule) -> None:
    """What this rank ended with: DDP ranks must agree on the step and the weights, and
    must have trained on different batches."""
    digest = hashlib.sha256()
    for tensor in module.model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    summary = {
        "global_step": trainer.global_step,
        "parameter_checksum": digest.hexdigest(),
        "first_batch": module.first_batch_indices,
        "world_size": trainer.world_size,
        "node_rank": trainer.node_rank,
    }
    write_text(path, json.dumps(summary))


def _as_float(value) -> float | None:
    return (
        None if value is None else float(value.item() if isinstance(value, torch.Tensor) else value)
    )
