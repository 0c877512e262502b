"""Learning-rate schedules (the paper's inverse square root, and a cosine one for fixed
budgets) and the Adam optimizer that follows them."""

from __future__ import annotations

import math

import torch

from nmt.config import OptimConfig


def inverse_sqrt_lr(step: int, d_model: int, warmup_steps: int, scale: float) -> float:
    """lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); step counts from 1."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def cosine_lr(
    step: int, d_model: int, warmup_steps: int, scale: float, total_steps: int | None
) -> float:
    """The same linear warmup to the same peak as `inverse_sqrt_lr`, then a half cosine from
    the peak to zero at `total_steps` (zero after it; the peak while it is None, not yet fitted
    to the run's budget). Ending at zero settles the weights, as averaging checkpoints does in
    its way (on `multi30k_cpu` the inverse_sqrt run's averages scored higher:
    docs/experiments.md)."""
    step = max(step, 1)
    if step <= warmup_steps:
        return inverse_sqrt_lr(step, d_model, warmup_steps, scale)
    peak = inverse_sqrt_lr(warmup_steps, d_model, warmup_steps, scale)
    if total_steps is None:
        return peak
    progress = min((step - warmup_steps) / max(total_steps - warmup_steps, 1), 1.0)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


class LearningRateSchedule:
    """The learning rate of optimizer step `step` (counted from 1) under `cfg.schedule`.

    `total_steps`, the run's last update, may be set while training (nmt.training.budget
    fits it to the run's budget): a cosine ends there, and with `cfg.warmup_fraction` the
    warmup lasts that share of it (at most `cfg.warmup_steps`) and reaches the peak that
    `cfg.warmup_steps` would. The optimizer's LambdaLR calls it through a plain function,
    which LambdaLR does not save: a resumed run takes its schedule from its config, and the
    fitted end from the callback that fits it.
    """

    def __init__(self, cfg: OptimConfig, d_model: int):
        self.cfg = cfg
        self.d_model = d_model
        self.total_steps = cfg.total_steps
        # cfg.peak_lr, when set, is the peak of cfg.warmup_steps: the scale that reaches it
        self.scale = cfg.lr_scale
        if cfg.peak_lr is not None:
            self.scale = cfg.peak_lr * d_model**0.5 * cfg.warmup_steps**0.5

    @property
    def warmup_steps(self) -> int:
        """The warmup in force: `cfg.warmup_steps`, or its fitted share of the budget."""
        cfg = self.cfg
        if cfg.warmup_fraction is None or self.total_steps is None:
            return cfg.warmup_steps
        return max(1, min(cfg.warmup_steps, round(cfg.warmup_fraction * self.total_steps)))

    def __call__(self, step: int) -> float:
        cfg, warmup = self.cfg, self.warmup_steps
        # Both schedules peak at scale * d^-0.5 * warmup^-0.5: rescaled to cfg.warmup_steps'.
        keep_peak = (warmup / cfg.warmup_steps) ** 0.5
        if cfg.schedule == "cosine":
            lr = cosine_lr(step, self.d_model, warmup, self.scale, self.total_steps)
        else:
            lr = inverse_sqrt_lr(step, self.d_model, warmup, self.scale)
        return lr * keep_peak


def build_optimizer(
    params, cfg: OptimConfig, schedule: LearningRateSchedule
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """Adam following `schedule`, stepped once per optimizer step."""
    optimizer = torch.optim.Adam(
        params, lr=1.0, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay
    )
    # LambdaLR multiplies the base lr (1.0) by the factor; its step index starts at 0.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda index: schedule(index + 1))
    return optimizer, scheduler
