"""The training losses: label-smoothed cross-entropy, and the same fused with the vocabulary
projection (plain and R-Drop), so the full logits of a batch never exist at once."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_loss(
    logits: Tensor, target: Tensor, epsilon: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Label-smoothed cross-entropy summed over non-pad target tokens.

    logits (B, T, V), target (B, T). The smoothed target puts 1 - epsilon on the reference
    token and spreads epsilon uniformly over all V classes (PyTorch's convention), so per token
    loss = (1 - epsilon) * -log p(y) + epsilon * mean_v(-log p(v)). Computed in float32
    (float64 for float64 logits).
    Returns (smoothed loss sum, plain NLL sum): divide by the number of target tokens.
    """
    logits = logits.flatten(0, 1).to(torch.promote_types(logits.dtype, torch.float32))
    target = target.flatten()
    loss = F.cross_entropy(
        logits, target, ignore_index=pad_id, label_smoothing=epsilon, reduction="sum"
    )
    with torch.no_grad():
        nll = F.cross_entropy(logits, target, ignore_index=pad_id, reduction="sum")
    return loss, nll


@dataclass(frozen=True)
class FusedLossOptions:
    """The settings of a fused loss: label smoothing epsilon, target positions per chunk, the
    dtype of the matrix products, whether to form gradients, R-Drop's KL weight, and a fixed
    (V,) bias added to the logits (an imported model's; not trained), or None."""

    epsilon: float
    chunk_rows: int
    dtype: torch.dtype
    need_grad: bool = True
    kl_weight: float = 0.0
    bias: Tensor | None = None


class ProjectedLabelSmoothedLoss(torch.autograd.Function):
    """Vocabulary projection and label-smoothed cross-entropy in one pass, `chunk_rows` target
    positions at a time, so the (N, V) logits never exist whole.

    The logits, their softmax and its gradient are the largest tensors of a training step (for
    a small model with a big vocabulary, most of its time goes into writing and re-reading them).
    Chunk by chunk they stay in cache, and the forward pass computes the gradients too: d loss /
    d logits = softmax - (1 - eps) * onehot(y) - eps / V, then d hidden = g @ W and d W = g^T h.
    Matrix products run in `compute_dtype` (bf16/fp16 under mixed precision), softmax in fp32.
    The same smoothing convention as `label_smoothed_loss`, which it equals.
    """

    @staticmethod
    def forward(ctx, hidden, weight, target, options: FusedLossOptions):
        """hidden (N, D), weight (V, D), target (N,) -> (smoothed loss sum, NLL sum), fp32."""
        epsilon, chunk_rows, compute_dtype = options.epsilon, options.chunk_rows, options.dtype
        need_grad = options.need_grad
        V = weight.size(0)
        w = weight.to(compute_dtype)
        exact = torch.promote_types(compute_dtype, torch.float32)  # softmax and sums
        loss = hidden.new_zeros((), dtype=exact)
        nll = hidden.new_zeros((), dtype=exact)
        grad_hidden = torch.empty_like(hidden) if need_grad else None
        grad_weight = (
            torch.zeros(weight.shape, dtype=exact, device=weight.device) if need_grad else None
        )
        # One (chunk, V) buffer reused by every chunk, worked on in place: allocating a fresh
        # 8 MB result per operation costs several times the operation (docs/benchmarks.md).
        rows = min(chunk_rows, hidden.size(0))
        logits_buffer = hidden.new_empty((rows, V), dtype=exact)
        low_buffer = (
            hidden.new_empty((rows, V), dtype=compute_dtype) if compute_dtype != exact else None
        )
        for start in range(0, hidden.size(0), chunk_rows):
            h = hidden[start : start + chunk_rows].to(compute_dtype)  # (n, D)
            y = target[start : start + chunk_rows]  # (n,)
            n = len(y)
            logits = logits_buffer[:n]  # (n, V)
            if low_buffer is None:
                torch.mm(h, w.t(), out=logits)
            else:
                logits.copy_(torch.mm(h, w.t(), out=low_buffer[:n]))
            if options.bias is not None:
                logits.add_(options.bias)
            gold = logits.gather(1, y[:, None]).squeeze(1)
            mean = logits.mean(dim=-1)
            top = logits.amax(dim=-1)
            sum_exp = logits.sub_(top[:, None]).exp_().sum(dim=-1)  # logits now exp(l - top)
            log_z = sum_exp.log() + top
            token_nll = log_z - gold
            token_smooth = log_z - mean  # mean over v of -log p(v)
            loss += ((1 - epsilon) * token_nll + epsilon * token_smooth).sum()
            nll += token_nll.sum()
            if need_grad:
                grad = logits.div_(sum_exp[:, None]).sub_(epsilon / V)  # softmax - eps/V
                grad[torch.arange(n, device=y.device), y] -= 1 - epsilon
                if low_buffer is not None:
                    grad = low_buffer[:n].copy_(grad)
                grad_hidden[start : start + chunk_rows] = grad @ w
                grad_weight += grad.t() @ h
        if need_grad:
            ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype))
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_weight * grad_loss, None, None


def product_dtype(hidden: Tensor) -> torch.dtype:
    """The dtype autocast would run a product of `hidden` in (its own dtype without autocast):
    the fused losses switch autocast off and cast by hand."""
    device = hidden.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype


def exact_bias(bias: Tensor | None) -> Tensor | None:
    """A logits bias in float32, the precision the fused losses' softmax runs in."""
    return None if bias is None else bias.detach().float()


def real_positions(
    states: tuple[Tensor, ...], target: Tensor, pad_id: int
) -> tuple[tuple[Tensor, ...], Tensor]:
    """Each (B, T, D) states tensor and the (B, T) target at the non-pad target positions only:
    ((N, D), ...), (N,). The fused losses project nothing else."""
    keep = target.ne(pad_id).flatten()
    return tuple(s.flatten(0, 1)[keep] for s in states), target.flatten()[keep]


def default_chunk_rows(weight: Tensor, passes: int) -> int:
    """Target positions per chunk of a fused loss: ~8 MB of fp32 (rows, V) logits per pass
    held at once, so a chunk's logits stay in cache."""
    return max(64, 2**21 // (passes * weight.size(0)))


def projected_label_smoothed_loss(
    states: Tensor,
    weight: Tensor,
    target: Tensor,
    epsilon: float,
    pad_id: int,
    chunk_rows: int | None = None,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """`label_smoothed_loss(states @ weight.T + bias, target)` without the full logits.

    states (B, T, D) final decoder states, weight (V, D) the output projection, target (B, T),
    bias (V,) fixed or None.
    Only non-pad positions are projected, `chunk_rows` at a time (None: ~8 MB of fp32 logits
    per chunk). Returns (smoothed loss sum, NLL sum).
    """
    (hidden,), target = real_positions((states,), target, pad_id)
    compute_dtype = product_dtype(hidden)
    if chunk_rows is None:
        chunk_rows = default_chunk_rows(weight, passes=1)
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    with torch.autocast(hidden.device.type, enabled=False):
        options = FusedLossOptions(
            epsilon, chunk_rows, compute_dtype, need_grad, bias=exact_bias(bias)
        )
        return ProjectedLabelSmoothedLoss.apply(hidden, weight, target, options)


class ProjectedRDropLoss(torch.autograd.Function):
    """R-Drop (Liang et al. 2021) fused like `ProjectedLabelSmoothedLoss`: two passes of the
    same batch under different dropout, their label-smoothed cross-entropies and the symmetric
    KL divergence between their token distributions, `chunk_rows` positions at a time.

    Per position, with log-probabilities la, lb and probabilities pa, pb of the two passes,
    KL(a||b) + KL(b||a) = sum_v (pa - pb) * d with d = la - lb; its gradient with respect to
    a's logits is pa * (d - E_pa[d]) + pa - pb (b's likewise, a and b swapped). The objective
    is loss + kl_weight * kl, so one gradient per pass is formed and projected back.
    """

    @staticmethod
    def forward(ctx, hidden_a, hidden_b, weight, target, options: FusedLossOptions):
        """hidden_a, hidden_b (N, D) the two passes' states at the same positions, weight (V, D),
        target (N,) -> (objective, smoothed loss sum over both passes, NLL sum over both,
        symmetric KL sum), fp32; only the objective has a gradient."""
        epsilon, kl_weight, chunk_rows = options.epsilon, options.kl_weight, options.chunk_rows
        dtype = options.dtype
        V = weight.size(0)
        w = weight.to(dtype)
        exact = torch.promote_types(dtype, torch.float32)
        loss, nll, kl = (hidden_a.new_zeros((), dtype=exact) for _ in range(3))
        grad_a = torch.empty_like(hidden_a)
        grad_b = torch.empty_like(hidden_b)
        grad_weight = torch.zeros(weight.shape, dtype=exact, device=weight.device)
        k = kl_weight
        for start in range(0, hidden_a.size(0), chunk_rows):
            rows = slice(start, start + chunk_rows)
            y = target[rows]
            gold = torch.arange(len(y), device=y.device), y
            h_a, h_b = hidden_a[rows].to(dtype), hidden_b[rows].to(dtype)
            log_p = []
            for h in (h_a, h_b):
                logits = (h @ w.t()).to(exact)  # (n, V)
                if options.bias is not None:
                    logits.add_(options.bias)
                logits = logits.sub_(logits.logsumexp(dim=-1, keepdim=True))  # log-probs
                token_nll = -logits[gold]
                loss += ((1 - epsilon) * token_nll - epsilon * logits.mean(dim=-1)).sum()
                nll += token_nll.sum()
                log_p.append(logits)
            p_a, p_b = log_p[0].exp(), log_p[1].exp()
            d = log_p[0].sub_(log_p[1])  # la - lb, in la's buffer
            kl += (p_a - p_b).mul_(d).sum()
            # objective gradients: pa (1 + k + k (d - E_pa[d])) - k pb - eps/V - (1 - eps) at y,
            # and pb (1 + k - k (d - E_pb[d])) - k pa - eps/V - (1 - eps) at y
            for h, grad_h, p, q, signed_k in (
                (h_a, grad_a, p_a, p_b, k),
                (h_b, grad_b, p_b, p_a, -k),
            ):
                expected = (p * d).sum(dim=-1, keepdim=True)
                grad = (d - expected).mul_(signed_k).add_(1 + k).mul_(p).sub_(q, alpha=k)
                grad.sub_(epsilon / V)
                grad[gold] -= 1 - epsilon
                grad = grad.to(dtype)
                grad_h[rows] = grad @ w
                grad_weight += grad.t() @ h
        ctx.save_for_backward(grad_a, grad_b, grad_weight.to(weight.dtype))
        ctx.mark_non_differentiable(loss, nll, kl)
        return loss + k * kl, loss, nll, kl

    @staticmethod
    def backward(ctx, grad_objective, *unused):
        grad_a, grad_b, grad_weight = ctx.saved_tensors
        return (
            grad_a * grad_objective,
            grad_b * grad_objective,
            grad_weight * grad_objective,
            None,
            None,
        )


def projected_rdrop_loss(
    states: Tensor,
    weight: Tensor,
    target: Tensor,
    epsilon: float,
    kl_weight: float,
    pad_id: int,
    *,
    chunk_rows: int | None = None,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """R-Drop's terms for a batch that was run twice, stacked: states (2B, T, D) holds the
    first pass in rows :B and the second in B:, target (B, T) is the batch's own.

    Returns (objective = loss + kl_weight * kl, the only one with a gradient; smoothed loss sum
    over both passes; NLL sum over both passes; sum over non-pad positions of
    KL(a||b) + KL(b||a)).
    """
    (hidden_a, hidden_b), target = real_positions(states.chunk(2), target, pad_id)
    compute_dtype = product_dtype(hidden_a)
    if chunk_rows is None:
        chunk_rows = default_chunk_rows(weight, passes=2)
    with torch.autocast(hidden_a.device.type, enabled=False):
        options = FusedLossOptions(
            epsilon, chunk_rows, compute_dtype, kl_weight=kl_weight, bias=exact_bias(bias)
        )
        return ProjectedRDropLoss.apply(hidden_a, hidden_b, weight, target, options)


def alignment_loss(attention: Tensor, links: Tensor) -> Tensor:
    """Guided alignment (Garg et al. 2019): the cross-entropy of the alignment head's attention
    against the external word alignment, summed over the target positions that have links.

    attention (B, T, S): per target position, a distribution over source positions; links
    (N, 3) long: (batch row, target position, source position), each target position's links
    an equal share of its reference distribution.
    """
    if links.numel() == 0:
        return attention.sum() * 0.0
    row, tgt, src = links.unbind(1)
    key = row * attention.size(1) + tgt  # one id per (row, target position)
    _, position, counts = torch.unique(key, return_inverse=True, return_counts=True)
    probs = attention[row, tgt, src].float().clamp_min(1e-9)
    return -(probs.log() / counts[position]).sum()
