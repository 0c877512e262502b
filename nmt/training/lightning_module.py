"""The LightningModule: teacher-forced training of `Transformer`, validation loss and BLEU.

The model, the loss, the schedule and the decoder live elsewhere; this class only wires them
into Lightning's loop and logs what users watch.
"""

from __future__ import annotations

import logging
import math
import time

import lightning as L
import torch

from nmt.checkpoint import Checkpoint, inference_payload
from nmt.config import DecodeConfig, OptimConfig
from nmt.evaluation.scoring import score, translate_across_processes
from nmt.inference.torch_engine import TorchEngine
from nmt.model import ModelConfig, Transformer, count_parameters
from nmt.tokenizer import Tokenizer
from nmt.training.losses import (
    alignment_loss,
    projected_label_smoothed_loss,
    projected_rdrop_loss,
)
from nmt.training.schedules import LearningRateSchedule, build_optimizer

log = logging.getLogger(__name__)

# A micro-batch backpropagates its loss summed over target tokens / LOSS_UNIT: a constant,
# the same on every rank and micro-batch, that keeps the loss near a per-token size (fp16
# gradients stay in range); on_before_optimizer_step rescales by the update's true token count.
LOSS_UNIT = 1024


def nonfinite_loss(value: float, step: int) -> str:
    """What is wrong with a training loss of `value` at `step` ("" when it is finite)."""
    return "" if math.isfinite(value) else f"the training loss is {value} at step {step}"


class TranslationModule(L.LightningModule):
    def __init__(
        self,
        model_cfg: ModelConfig,
        optim_cfg: OptimConfig,
        decode_cfg: DecodeConfig,
        seed: int,
        *,
        src_lang: str,
        tgt_lang: str,
        val_bleu: bool,
        compile_model: bool,
        on_nonfinite_loss: str,
    ):
        super().__init__()
        self.model = Transformer(model_cfg)
        self.optim_cfg = optim_cfg
        # The learning rate per step; nmt.training.budget may fit its end and warmup while training.
        self.lr_schedule = LearningRateSchedule(optim_cfg, model_cfg.d_model)
        self.decode_cfg = decode_cfg
        self.seed = seed
        self.tokenizer: Tokenizer | None = None  # the datamodule's, set in setup()
        self.src_lang = src_lang
        self.tgt_lang = tgt_lang
        self.val_bleu = val_bleu
        self.compile_model = compile_model
        self.on_nonfinite_loss = on_nonfinite_loss
        self.num_parameters = count_parameters(self.model)
        self._step_start = time.perf_counter()
        self.first_batch_indices: list[int] | None = None  # what this rank trained on first
        # This rank's loss sum, NLL sum and target tokens since the last optimizer step.
        self._update_sums = torch.zeros(3)

    def setup(self, stage: str) -> None:
        self.tokenizer = self.trainer.datamodule.tokenizer
        if self.tokenizer.vocab_size != self.model.cfg.vocab_size:
            raise ValueError(
                f"model.vocab_size={self.model.cfg.vocab_size} but the tokenizer has "
                f"{self.tokenizer.vocab_size} pieces"
            )

    def configure_model(self) -> None:
        if self.compile_model:
            # Each layer, in place: training and decoding call the model's methods (encode,
            # decode_states), never the model itself, so compiling the model would change
            # nothing; layers are called. Parameter names (and checkpoints) stay the same.
            for layer in [*self.model.encoder_layers, *self.model.decoder_layers]:
                layer.compile()

    def shared_step(self, batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Teacher forcing: logits for `tgt_in`, loss against `tgt_out`.

        Returns (label-smoothed loss summed over target tokens, NLL sum, target tokens).
        """
        guided = self.training and self.optim_cfg.alignment_weight > 0
        states, attention = self.model.teacher_forced_states_and_alignment(
            batch.src, batch.tgt_in, guided
        )  # (B, T, D), (B, T, S) or None
        loss_sum, nll_sum = projected_label_smoothed_loss(
            states,
            self.model.output_weight,
            batch.tgt_out,
            self.optim_cfg.label_smoothing,
            self.model.cfg.pad_id,
            bias=self.model.output_bias,
        )
        if guided:
            aligned = alignment_loss(attention, batch.links)
            self.log("train/alignment_loss", aligned.detach() / batch.num_tgt_tokens)
            loss_sum = loss_sum + self.optim_cfg.alignment_weight * aligned
        return loss_sum, nll_sum, batch.num_tgt_tokens

    def rdrop_step(self, batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """`shared_step` with R-Drop: the batch runs twice in one call (stacked, so each copy
        draws its own dropout), and the loss adds the two passes' symmetric KL divergence.
        Training only; logs the divergence per token as train/rdrop_kl."""
        states = self.model.teacher_forced_states(
            torch.cat([batch.src, batch.src]), torch.cat([batch.tgt_in, batch.tgt_in])
        )  # (2B, T, D)
        # The paper's NLL(a) + NLL(b) + alpha / 2 * (KL(a||b) + KL(b||a)), halved below: per
        # token, the passes' mean loss plus alpha / 2 times their mean divergence.
        objective, _, nll_sum, kl_sum = projected_rdrop_loss(
            states,
            self.model.output_weight,
            batch.tgt_out,
            self.optim_cfg.label_smoothing,
            self.optim_cfg.rdrop_alpha / 2,
            self.model.cfg.pad_id,
            bias=self.model.output_bias,
        )
        ntokens = batch.num_tgt_tokens
        kl = kl_sum / (2 * ntokens)  # (KL(a||b) + KL(b||a)) / 2 per token
        self.log("train/rdrop_kl", kl, batch_size=batch.src.size(0))
        return objective / 2, nll_sum / 2, ntokens

    def training_step(self, batch, batch_idx: int) -> torch.Tensor | None:
        """The micro-batch's loss sum / LOSS_UNIT; `on_before_optimizer_step` turns the
        update's gradient into the gradient of its per-token loss (see there)."""
        if self.first_batch_indices is None:
            self.first_batch_indices = batch.indices.tolist()
        if self.optim_cfg.rdrop_alpha > 0:
            loss_sum, nll_sum, ntokens = self.rdrop_step(batch)
        else:
            loss_sum, nll_sum, ntokens = self.shared_step(batch)
        problem = nonfinite_loss(loss_sum.item(), self.global_step)
        if self.on_nonfinite_loss == "stop" and self.trainer.world_size > 1:
            # every rank stops at this batch, or the others would wait in the gradient all-reduce
            flags = self.trainer.strategy.reduce(
                loss_sum.new_tensor([float(bool(problem))]), reduce_op="sum"
            )
            if flags.item() and not problem:
                problem = (
                    f"the training loss is not finite on another rank at step {self.global_step}"
                )
        if problem:
            if self.on_nonfinite_loss == "skip":
                log.warning("%s: batch skipped, weights unchanged", problem)
                return None  # Lightning then skips backward and the optimizer step
            raise FloatingPointError(
                f"{problem}: training stopped before the weights were touched (lower the "
                "learning rate, clip gradients, or set on_nonfinite_loss=skip)"
            )
        sums = torch.stack([loss_sum.detach().float(), nll_sum.detach().float()])
        sums = torch.cat([sums, sums.new_tensor([ntokens])])
        # Out of place: a tensor attribute may sit in memory that processes share (ddp_spawn).
        self._update_sums = self._update_sums.to(sums.device) + sums
        return loss_sum / LOSS_UNIT

    def on_before_optimizer_step(self, optimizer) -> None:
        """Normalise the update by all its target tokens, as fairseq, Marian and the paper do.

        Lightning divided each of the k accumulated micro-batch losses by k, and DDP averaged
        the gradients of the W ranks: the gradient now is sum_i grad(loss_sum_i) / (k W
        LOSS_UNIT). With N the update's target tokens over all micro-batches and ranks, scaling
        by k W LOSS_UNIT / N gives sum_i grad(loss_sum_i) / N, the gradient of the per-token
        loss of the whole update: a batch of short sentences weighs by its tokens, not as much
        as a batch of long ones. Runs after any fp16 unscaling and before clipping.
        """
        totals = self.trainer.strategy.reduce(self._update_sums.clone(), reduce_op="sum")
        self._update_sums = torch.zeros_like(self._update_sums)
        loss_sum, nll_sum, tokens = totals.tolist()
        if tokens == 0:
            return
        factor = self.trainer.accumulate_grad_batches * self.trainer.world_size * LOSS_UNIT
        for parameter in self.parameters():
            if parameter.grad is not None:
                parameter.grad.mul_(factor / tokens)
        now = time.perf_counter()
        tokens_per_second = tokens / max(now - self._step_start, 1e-9)
        self._step_start = now
        self.log("train/loss", loss_sum / tokens, prog_bar=True)
        self.log("train/ppl", math.exp(min(nll_sum / tokens, 50.0)))
        self.log("train/tok_per_s", tokens_per_second, prog_bar=True)

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        # Dropout draws from a generator seeded by (seed, batch, rank), the batch counted across
        # epochs (not the optimizer step, which accumulated or skipped batches share): new on
        # every batch and rank, and a resumed run (Lightning restores the count) draws exactly
        # what the uninterrupted run would have.
        batch_count = self.trainer.fit_loop.total_batch_idx
        torch.manual_seed(hash((self.seed, batch_count, self.global_rank)) % 2**63)
        if batch_idx == 0:
            self._step_start = time.perf_counter()

    def validation_step(self, batch, batch_idx: int) -> None:
        loss_sum, nll_sum, ntokens = self.shared_step(batch)
        loss, nll = loss_sum / ntokens, nll_sum / ntokens
        # Weighting by tokens makes the epoch mean a per-token mean.
        self.log("val/loss", loss, batch_size=ntokens, sync_dist=True)
        self.log("val/nll", nll, batch_size=ntokens, sync_dist=True)

    def on_validation_epoch_end(self) -> None:
        nll = self.trainer.callback_metrics.get("val/nll")
        if nll is not None:
            self.log("val/ppl", math.exp(min(float(nll), 50.0)), sync_dist=True)
        if not self.val_bleu or self.trainer.sanity_checking:
            return
        valid = self.trainer.datamodule.splits["valid"]
        # Each rank decodes its share of the lines and gets all of them back: all ranks log
        # the same BLEU. sync_dist averages those equal values (one scalar each), as Lightning
        # wants of epoch-level metrics under DDP, and silences its warning.
        engine = TorchEngine(
            Checkpoint(self.model, self.tokenizer, self.src_lang, self.tgt_lang, {}),
            self.trainer.datamodule.data_cfg.eval_max_tokens,
        )
        hypotheses = translate_across_processes(engine, list(valid["src"]), self.decode_cfg)
        scores = score(hypotheses, list(valid["tgt"]))
        self.log("val/bleu", scores.bleu, prog_bar=True, sync_dist=True)
        self.log("val/chrf", scores.chrf, sync_dist=True)

    def configure_optimizers(self):
        optimizer, scheduler = build_optimizer(
            self.model.parameters(), self.optim_cfg, self.lr_schedule
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Makes a Lightning checkpoint usable by `translate`/`evaluate` and `nmt.average`.
        info = {"global_step": int(self.global_step), "epoch": int(self.current_epoch)}
        checkpoint["nmt"] = inference_payload(
            self.model.cfg, self.tokenizer, self.src_lang, self.tgt_lang, info
        )
