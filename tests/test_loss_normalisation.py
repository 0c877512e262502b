"""The update's loss is normalised by all its target tokens: the gradient of k accumulated
micro-batches (and of W DDP ranks) equals the gradient of one batch of their union, and
train/loss logs the per-token loss of the update. Real Lightning training steps, fp32, no
dropout, micro-batches of real pairs with very different token counts."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from conftest import module_settings
from torch.utils.data import DataLoader

from nmt.config import DecodeConfig, OptimConfig
from nmt.data.batching import collate
from nmt.model import ModelConfig
from nmt.training.lightning_module import TranslationModule

# These runs have no validation loader, on purpose. Lightning's warning about it is of its own
# class: reported to pytest-xdist's controller, it made that process import Lightning and torch
# (~7 CPU-s) only to print it.
pytestmark = pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no")

SIZES = [1, 6, 2, 9, 3, 5]  # pairs per micro-batch: 6 micro-batches, tokens differ ~10x


class GradientProbe(TranslationModule):
    """The module as trained, keeping the gradients the optimizer is about to apply."""

    def __init__(self, model_cfg: ModelConfig, batches: list, out: Path | None = None):
        super().__init__(model_cfg, OptimConfig(), DecodeConfig(), 0, **module_settings())
        self.batches, self.out = batches, out

    def setup(self, stage: str) -> None:
        pass  # no datamodule: the batches are given

    def train_dataloader(self):
        rank, world = self.global_rank, self.trainer.world_size
        share = len(self.batches) // world
        mine = self.batches[rank * share : (rank + 1) * share]  # each rank its own batches
        return DataLoader(mine, batch_size=None, collate_fn=lambda batch: batch)

    def on_before_optimizer_step(self, optimizer) -> None:
        super().on_before_optimizer_step(optimizer)
        self.grads = {n: p.grad.detach().clone() for n, p in self.named_parameters()}
        if self.out is not None and self.global_rank == 0:
            torch.save(self.grads, self.out)


def micro_batches(tokenizer, pairs) -> list:
    sources, targets = pairs
    batches, start = [], 0
    for size in SIZES:
        rows = range(start, start + size)
        batches.append(
            collate(
                [
                    {
                        "index": i,
                        "src_ids": tokenizer.encode([sources[i]])[0],
                        "tgt_ids": tokenizer.encode([targets[i]])[0],
                    }
                    for i in rows
                ]
            )
        )
        start += size
    return batches


def union(batches: list, tokenizer, pairs) -> object:
    """One batch of every pair of `batches`."""
    rows = [int(i) for b in batches for i in b.indices]
    sources, targets = pairs
    return collate(
        [
            {
                "index": i,
                "src_ids": tokenizer.encode([sources[i]])[0],
                "tgt_ids": tokenizer.encode([targets[i]])[0],
            }
            for i in rows
        ]
    )


def tiny_cfg(tokenizer) -> ModelConfig:
    return ModelConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=32,
        n_heads=2,
        d_ff=64,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
    )


def trained_step(
    module: GradientProbe, accumulate: int, devices: int = 1, max_steps: int = 1, **kwargs
):
    trainer = L.Trainer(
        accelerator="cpu",
        devices=devices,
        max_steps=max_steps,
        accumulate_grad_batches=accumulate,
        precision="32-true",
        logger=False,
        enable_checkpointing=False,
        limit_val_batches=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        **kwargs,
    )
    trainer.fit(module)
    return trainer


def reference(model_cfg, tokenizer, pairs, batches) -> tuple[dict, float]:
    """The gradient and per-token loss of one batch holding every pair of `batches`."""
    torch.manual_seed(0)
    module = GradientProbe(model_cfg, [])
    whole = union(batches, tokenizer, pairs)
    loss_sum, _, tokens = module.shared_step(whole)
    (loss_sum / tokens).backward()
    return {n: p.grad for n, p in module.named_parameters()}, (loss_sum / tokens).item()


def assert_same_gradients(got: dict, want: dict) -> None:
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_accumulated_micro_batches_give_the_gradient_of_their_union(tiny_tokenizer, overfit_pairs):
    cfg = tiny_cfg(tiny_tokenizer)
    batches = micro_batches(tiny_tokenizer, overfit_pairs)
    tokens = [b.num_tgt_tokens for b in batches]
    assert max(tokens) > 5 * min(tokens)  # a mean of means would weigh these very wrongly
    want, want_loss = reference(cfg, tiny_tokenizer, overfit_pairs, batches)
    torch.manual_seed(0)
    module = GradientProbe(cfg, batches)
    trainer = trained_step(module, accumulate=len(batches))
    assert_same_gradients(module.grads, want)
    assert float(trainer.callback_metrics["train/loss"]) == pytest.approx(want_loss, rel=1e-5)
    # The mean of the micro-batches' per-token means is another number: the test can tell.
    torch.manual_seed(0)
    probe = GradientProbe(cfg, [])
    means = [(lambda s, _, n: (s / n).item())(*probe.shared_step(b)) for b in batches]
    assert abs(sum(means) / len(means) - want_loss) > 1e-3


def test_one_micro_batch_per_update_is_unchanged(tiny_tokenizer, overfit_pairs):
    cfg = tiny_cfg(tiny_tokenizer)
    batches = micro_batches(tiny_tokenizer, overfit_pairs)[3:4]
    want, _ = reference(cfg, tiny_tokenizer, overfit_pairs, batches)
    torch.manual_seed(0)
    module = GradientProbe(cfg, batches)
    trained_step(module, accumulate=1)
    assert_same_gradients(module.grads, want)


def test_two_ddp_ranks_accumulating_give_the_gradient_of_their_union(
    tiny_tokenizer, overfit_pairs, tmp_path
):
    """2 gloo ranks x 3 accumulated micro-batches each = one batch of all 6."""
    cfg = tiny_cfg(tiny_tokenizer)
    batches = micro_batches(tiny_tokenizer, overfit_pairs)
    want, _ = reference(cfg, tiny_tokenizer, overfit_pairs, batches)
    torch.manual_seed(0)
    module = GradientProbe(cfg, batches, out=tmp_path / "grads.pt")
    trained_step(module, accumulate=3, devices=2, strategy="ddp_fork")  # no second import
    assert_same_gradients(torch.load(tmp_path / "grads.pt"), want)
