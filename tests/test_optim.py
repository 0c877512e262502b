"""Label-smoothed loss and the inverse-square-root schedule against hand computations."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nmt.config import OptimConfig
from nmt.training.losses import label_smoothed_loss
from nmt.training.schedules import LearningRateSchedule, build_optimizer, inverse_sqrt_lr


def test_label_smoothed_loss_matches_a_hand_computation():
    # One sentence, vocab of 4, two real tokens and one pad (id 0).
    logits = torch.tensor([[[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 3.0, 1.0], [5.0, 1.0, 1.0, 1.0]]])
    target = torch.tensor([[1, 2, 0]])
    eps = 0.1
    expected, expected_nll = 0.0, 0.0
    for position, gold in [(0, 1), (1, 2)]:
        row = logits[0, position].tolist()
        log_z = math.log(sum(math.exp(x) for x in row))
        log_p = [x - log_z for x in row]
        expected += (1 - eps) * -log_p[gold] + eps * sum(-lp for lp in log_p) / 4
        expected_nll += -log_p[gold]
    loss, nll = label_smoothed_loss(logits, target, eps, pad_id=0)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(expected_nll, rel=1e-6)


def test_schedule_values_at_one_warmup_and_four_times_warmup():
    d, w, s = 512, 4000, 1.0
    assert inverse_sqrt_lr(1, d, w, s) == pytest.approx(d**-0.5 * w**-1.5)
    assert inverse_sqrt_lr(w, d, w, s) == pytest.approx(d**-0.5 * w**-0.5)  # the peak
    assert inverse_sqrt_lr(4 * w, d, w, s) == pytest.approx(d**-0.5 * (4 * w) ** -0.5)
    assert inverse_sqrt_lr(4 * w, d, w, s) == pytest.approx(inverse_sqrt_lr(w, d, w, s) / 2)
    assert inverse_sqrt_lr(10, d, w, 2.0) == pytest.approx(2 * inverse_sqrt_lr(10, d, w, 1.0))


def test_optimizer_follows_the_schedule_step_by_step():
    param = torch.nn.Parameter(torch.zeros(3))
    cfg = OptimConfig(warmup_steps=10)
    optimizer, schedule = build_optimizer([param], cfg, LearningRateSchedule(cfg, d_model=64))
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-9
    for step in range(1, 25):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(inverse_sqrt_lr(step, 64, 10, 1.0))
        optimizer.step()
        schedule.step()


@pytest.mark.parametrize("chunk_rows", [None, 8])  # one chunk; four full ones and a part
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_projection_loss_equals_the_plain_loss_and_its_gradients(dtype, chunk_rows):
    from nmt.training.losses import projected_label_smoothed_loss

    torch.manual_seed(0)
    states = torch.randn(5, 7, 16, dtype=dtype, requires_grad=True)
    weight = torch.randn(300, 16, dtype=dtype, requires_grad=True)
    target = torch.randint(1, 300, (5, 7))
    target[0, 4:] = 0
    expected, expected_nll = label_smoothed_loss(states @ weight.T, target, 0.1, pad_id=0)
    expected_grads = torch.autograd.grad(expected * 0.7, [states, weight])
    loss, nll = projected_label_smoothed_loss(states, weight, target, 0.1, 0, chunk_rows)
    grads = torch.autograd.grad(loss * 0.7, [states, weight])
    tolerance = 1e-10 if dtype == torch.float64 else 1e-4
    assert loss.item() == pytest.approx(expected.item(), rel=tolerance)
    assert nll.item() == pytest.approx(expected_nll.item(), rel=tolerance)
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)
    assert torch.all(grads[0][0, 4:] == 0)  # padding positions get no gradient


def test_fused_projection_loss_under_bf16_autocast_matches_bf16_logits():
    """Under autocast the products run in bf16 and the softmax in fp32: the same loss and
    gradients as plain fp32 cross-entropy over logits from the same bf16 product."""
    from nmt.training.losses import projected_label_smoothed_loss

    torch.manual_seed(0)
    states = torch.randn(5, 7, 16, requires_grad=True)
    weight = torch.randn(300, 16, requires_grad=True)
    target = torch.randint(1, 300, (5, 7))
    target[1, 3:] = 0
    logits = (states.bfloat16() @ weight.bfloat16().T).float()
    expected, expected_nll = label_smoothed_loss(logits, target, 0.1, pad_id=0)
    expected_grads = torch.autograd.grad(expected, [states, weight])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, nll = projected_label_smoothed_loss(states, weight, target, 0.1, 0, chunk_rows=8)
    grads = torch.autograd.grad(loss, [states, weight])
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert nll.item() == pytest.approx(expected_nll.item(), rel=1e-5)
    for got, want in zip(grads, expected_grads, strict=True):  # bf16 gradient products
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("chunk_rows", [None, 4])  # one chunk; several and a part
def test_fused_rdrop_loss_equals_cross_entropies_and_kl_divergences_with_gradients(chunk_rows):
    import torch.nn.functional as F

    from nmt.training.losses import projected_rdrop_loss

    torch.manual_seed(0)
    batch, length, dim, vocab = 3, 5, 8, 11
    states = torch.randn(2 * batch, length, dim, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(vocab, dim, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, vocab, (batch, length))
    target[0, 3:] = 0
    target[2, 4:] = 0
    real = target.ne(0)
    log_p = (states @ weight.T).log_softmax(dim=-1)
    first, second = log_p[:batch][real], log_p[batch:][real]
    expected_loss = sum(
        F.nll_loss(lp, target[real], reduction="sum") * 0.9 - lp.mean(dim=-1).sum() * 0.1
        for lp in (first, second)
    )
    expected_nll = sum(F.nll_loss(lp, target[real], reduction="sum") for lp in (first, second))
    expected_kl = F.kl_div(second, first, log_target=True, reduction="sum") + F.kl_div(
        first, second, log_target=True, reduction="sum"
    )
    expected_grads = torch.autograd.grad(expected_loss + 0.7 * expected_kl, [states, weight])
    objective, loss, nll, kl = projected_rdrop_loss(
        states, weight, target, 0.1, 0.7, 0, chunk_rows=chunk_rows
    )
    grads = torch.autograd.grad(objective, [states, weight])
    assert objective.item() == pytest.approx((expected_loss + 0.7 * expected_kl).item(), rel=1e-10)
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-10)
    assert nll.item() == pytest.approx(expected_nll.item(), rel=1e-10)
    assert kl.item() == pytest.approx(expected_kl.item(), rel=1e-10) and kl.item() > 0
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    assert torch.all(grads[0][0, 3:] == 0) and torch.all(grads[0][batch, 3:] == 0)  # padding


def test_rdrop_loss_of_two_identical_passes_is_twice_the_plain_loss_and_no_divergence():
    from nmt.training.losses import projected_label_smoothed_loss, projected_rdrop_loss

    torch.manual_seed(0)
    states = torch.randn(4, 6, 16, requires_grad=True)
    weight = torch.randn(300, 16)
    target = torch.randint(1, 300, (4, 6))
    target[1, 2:] = 0
    plain, plain_nll = projected_label_smoothed_loss(states, weight, target, 0.1, 0)
    _, loss, nll, kl = projected_rdrop_loss(torch.cat([states, states]), weight, target, 0.1, 5, 0)
    assert loss.item() == pytest.approx(2 * plain.item(), rel=1e-6)
    assert nll.item() == pytest.approx(2 * plain_nll.item(), rel=1e-6)
    assert kl.item() == pytest.approx(0.0, abs=1e-6)


def test_fused_rdrop_loss_under_bf16_autocast_matches_bf16_logits():
    import torch.nn.functional as F

    from nmt.training.losses import projected_rdrop_loss

    torch.manual_seed(0)
    states = torch.randn(6, 7, 16, requires_grad=True)
    weight = torch.randn(300, 16, requires_grad=True)
    target = torch.randint(1, 300, (3, 7))
    target[1, 3:] = 0
    real = target.ne(0)
    log_p = (states.bfloat16() @ weight.bfloat16().T).float().log_softmax(dim=-1)
    first, second = log_p[:3][real], log_p[3:][real]
    expected = sum(
        F.nll_loss(lp, target[real], reduction="sum") * 0.9 - lp.mean(dim=-1).sum() * 0.1
        for lp in (first, second)
    ) + 2.5 * (
        F.kl_div(second, first, log_target=True, reduction="sum")
        + F.kl_div(first, second, log_target=True, reduction="sum")
    )
    expected_grads = torch.autograd.grad(expected, [states, weight])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        objective, *_ = projected_rdrop_loss(states, weight, target, 0.1, 2.5, 0, chunk_rows=8)
    grads = torch.autograd.grad(objective, [states, weight])
    assert objective.dtype == torch.float32
    assert objective.item() == pytest.approx(expected.item(), rel=1e-5)
    for got, want in zip(grads, expected_grads, strict=True):  # bf16 gradient products
        scale = want.abs().max().item()
        torch.testing.assert_close(got, want, rtol=2e-2, atol=1e-2 * scale)


def test_cosine_schedule_warms_up_like_inverse_sqrt_then_falls_to_zero():
    from nmt.training.schedules import cosine_lr

    d, w, s, total = 128, 100, 2.0, 1100
    peak = inverse_sqrt_lr(w, d, w, s)
    for step in (1, 50, 100):
        assert cosine_lr(step, d, w, s, total) == pytest.approx(inverse_sqrt_lr(step, d, w, s))
    assert cosine_lr(600, d, w, s, total) == pytest.approx(peak / 2)  # halfway down
    assert cosine_lr(total, d, w, s, total) == pytest.approx(0.0, abs=1e-15)
    assert cosine_lr(total + 50, d, w, s, total) == pytest.approx(0.0, abs=1e-15)
    values = [cosine_lr(step, d, w, s, total) for step in range(w, total + 1)]
    assert all(
        a >= b for a, b in zip(values[:-1], values[1:], strict=True)
    )  # never rises after the peak


def test_the_cosine_config_ends_at_the_runs_budget_or_at_total_steps():
    from conftest import compose_train_config

    from nmt.training.budget import FitScheduleToBudget
    from nmt.training.fit import build_callbacks

    cfg = compose_train_config(["experiment=multi30k_cpu", "optim=cosine"])
    assert cfg.optim.schedule == "cosine" and cfg.optim.total_steps is None
    assert any(isinstance(c, FitScheduleToBudget) for c in build_callbacks(cfg, Path("x")))
    fixed = compose_train_config(
        ["experiment=multi30k_cpu", "optim=cosine", "optim.total_steps=5000"]
        + ["optim.warmup_fraction=null"]  # the recipe's warmup follows the budget too
        + ["budget_bands=[]"]  # and so do its budget bands
    )
    assert fixed.optim.total_steps == 5000
    assert not any(isinstance(c, FitScheduleToBudget) for c in build_callbacks(fixed, Path("x")))
    with pytest.raises(ValueError, match="set trainer.max_steps, max_epochs or max_time"):
        compose_train_config(["experiment=multi30k_cpu", "optim=cosine", "trainer.max_time=null"])
    with pytest.raises(ValueError, match="before any decay"):
        compose_train_config(["experiment=multi30k_cpu", "optim=cosine", "trainer.max_steps=2000"])
    with pytest.raises(ValueError, match="total_steps"):
        OptimConfig(schedule="cosine", warmup_steps=10, total_steps=10)


def test_a_fitted_warmup_keeps_the_peak_and_the_shape_of_the_schedule():
    """warmup_fraction: on a budget of 1,000 updates a warmup of 2,000 becomes 200 (20%), the
    peak stays 2,000's, and the decay after it is the same curve in proportion."""
    cfg = OptimConfig(lr_scale=2.0, warmup_steps=2000, warmup_fraction=0.2)
    schedule = LearningRateSchedule(cfg, d_model=128)
    peak = inverse_sqrt_lr(2000, 128, 2000, 2.0)
    unfitted = [schedule(step) for step in (1, 1000, 2000)]
    assert unfitted == [inverse_sqrt_lr(s, 128, 2000, 2.0) for s in (1, 1000, 2000)]
    schedule.total_steps = 1000
    assert schedule.warmup_steps == 200
    assert schedule(200) == pytest.approx(peak)  # the peak, reached after 20% of the run
    assert schedule(100) == pytest.approx(peak / 2)  # linear warmup
    assert schedule(1000) == pytest.approx(peak * (200 / 1000) ** 0.5)  # as 2,000 of 10,000
    schedule.total_steps = 50_000
    assert schedule.warmup_steps == 2000 and schedule(2000) == pytest.approx(peak)  # capped
    cosine = LearningRateSchedule(replace(cfg, schedule="cosine"), d_model=128)
    cosine.total_steps = 1000
    assert cosine(200) == pytest.approx(peak) and cosine(1000) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="warmup_fraction must be in"):
        OptimConfig(warmup_fraction=1.5)


def test_cosine_holds_the_peak_until_its_end_is_known():
    from nmt.training.schedules import cosine_lr

    peak = inverse_sqrt_lr(100, 128, 100, 2.0)
    assert cosine_lr(5000, 128, 100, 2.0, None) == pytest.approx(peak)


def test_steps_that_fit_extrapolates_the_pace():
    from nmt.training.budget import steps_that_fit

    assert steps_that_fit(100, steps_per_second=2.0, remaining=25.0) == 150
    assert steps_that_fit(100, steps_per_second=2.0, remaining=-3.0) == 100  # time is up


def test_the_fitted_end_is_kept_in_checkpoints_and_loads_weights_only(tmp_path):
    from nmt.training.budget import FitScheduleToBudget

    fitted = FitScheduleToBudget()
    fitted.total_steps = 250
    torch.save(fitted.state_dict(), tmp_path / "callback.pt")
    resumed = FitScheduleToBudget()
    resumed.load_state_dict(torch.load(tmp_path / "callback.pt", weights_only=True))
    assert resumed.total_steps == 250


def test_the_optimizer_saves_no_schedule_so_a_resume_follows_its_config():
    param = torch.nn.Parameter(torch.zeros(1))
    cfg = OptimConfig(schedule="cosine", lr_scale=1.0, warmup_steps=10, total_steps=None)
    schedule = LearningRateSchedule(cfg, d_model=64)
    _, scheduler = build_optimizer([param], cfg, schedule)
    schedule.total_steps = 250
    assert scheduler.lr_lambdas[0](249) == pytest.approx(0.0, abs=1e-15)  # step 250: the end
    assert scheduler.state_dict()["lr_lambdas"] == [None]  # a function: nothing saved


@pytest.mark.parametrize("schedule", ["inverse_sqrt", "cosine"])
@pytest.mark.parametrize("d_model", [128, 512])
def test_peak_lr_is_the_peak_whatever_the_width(schedule, d_model):
    """optim.peak_lr: the lr at the end of the warmup, fitted or not, for any d_model (a
    fine-tuning run's width comes from its init_from); lr_scale is ignored."""
    cfg = OptimConfig(
        schedule=schedule, lr_scale=9.0, peak_lr=1e-3, warmup_steps=400, warmup_fraction=0.05
    )
    lr = LearningRateSchedule(cfg, d_model=d_model)
    assert lr(400) == pytest.approx(1e-3) and lr(200) == pytest.approx(5e-4)
    assert max(lr(step) for step in range(1, 2000)) == pytest.approx(1e-3)
    lr.total_steps = 2000  # the budget's end: a warmup of 100 (5%), the same peak
    assert lr.warmup_steps == 100 and lr(100) == pytest.approx(1e-3)
