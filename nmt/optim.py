"""The loss and the learning-rate schedule of the paper, as small pure functions."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.config import OptimConfig


def label_smoothed_loss(
    logits: Tensor, target: Tensor, epsilon: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Label-smoothed cross-entropy summed over non-pad target tokens.

    logits (B, T, V), target (B, T). The smoothed target puts 1 - epsilon on the reference
    token and spreads epsilon uniformly over all V classes (PyTorch's convention), so per token
    loss = (1 - epsilon) * -log p(y) + epsilon * mean_v(-log p(v)). Computed in float32.
    Returns (smoothed loss sum, plain NLL sum): divide by the number of target tokens.
    """
    logits = logits.flatten(0, 1).float()
    target = target.flatten()
    loss = F.cross_entropy(
        logits, target, ignore_index=pad_id, label_smoothing=epsilon, reduction="sum"
    )
    with torch.no_grad():
        nll = F.cross_entropy(logits, target, ignore_index=pad_id, reduction="sum")
    return loss, nll


def inverse_sqrt_lr(step: int, d_model: int, warmup_steps: int, scale: float) -> float:
    """lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); step counts from 1."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def build_optimizer(
    params, cfg: OptimConfig, d_model: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """Adam with the inverse-square-root schedule, stepped once per optimizer step."""
    optimizer = torch.optim.Adam(
        params, lr=1.0, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay
    )
    # LambdaLR multiplies the base lr (1.0) by the factor; its step index starts at 0.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda index: inverse_sqrt_lr(index + 1, d_model, cfg.warmup_steps, cfg.lr_scale)
    )
    return optimizer, schedule
