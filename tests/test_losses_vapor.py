"""VAPOR's loss: a naive-loop reference (values and gradients, fp64), a hand-worked case, and
properties (no span: ratio 1; margins of +-1000 stay finite; zero advantages: zero loss)."""

from __future__ import annotations

import math

import pytest
import torch

from sdpo_kit.losses import (
    group_advantages,
    grpo_loss,
    kl_k3,
    masked_mean,
    preference_dpo_loss,
    preference_log_term,
    vapor_kl,
    vapor_loss,
)
from sdpo_kit.rewards import exact_match_reward

F64 = {"rtol": 1e-10, "atol": 1e-12}


def naive_vapor(logp, old_logp, span_mask, advantages, log_preference, G, epsilon=0.2, epsilon_high=None):
    """Per sequence, per token, with scalar torch ops (so autograd gives the reference gradient)."""
    eps_high = epsilon if epsilon_high is None else epsilon_high
    B, T = logp.shape
    total = logp.new_zeros(())
    for i in range(B):
        n = sum(float(span_mask[i, t]) for t in range(T))
        log_v = sum((logp[i, t] - old_logp[i, t]) * span_mask[i, t] for t in range(T)) / n if n else logp.new_zeros(())
        log_h = log_v + log_preference[i // G]
        log_h = torch.clamp(log_h, -20.0, 20.0)
        h = torch.exp(log_h)
        a = advantages[i]
        clipped = torch.clamp(h, 1 - epsilon, 1 + eps_high)
        total = total + -torch.minimum(h * a, clipped * a)
    return total / B


def batch(seed=0, P=3, G=4, T=5, dtype=torch.float64, margin_scale=0.3):
    g = torch.Generator().manual_seed(seed)
    B = P * G
    logp = (-torch.rand(B, T, generator=g, dtype=dtype) * 2).requires_grad_(True)              # (B, T)
    old_logp = logp.detach() + (torch.rand(B, T, generator=g, dtype=dtype) - 0.5) * 0.6       # (B, T)
    span_mask = (torch.rand(B, T, generator=g) < 0.6).to(dtype)                                # (B, T)
    span_mask[0] = 0                                                                           # one completion with no span
    rewards = torch.randint(0, 2, (B,), generator=g).to(dtype)                                 # (B,)
    advantages = group_advantages(rewards, G, scale_rewards="none")                            # (B,)
    log_pref = ((torch.rand(P, generator=g, dtype=dtype) - 0.5) * margin_scale).requires_grad_(True)  # (P,)
    return logp, old_logp, span_mask, advantages, log_pref


@pytest.mark.parametrize("epsilon_high", [None, 0.28])
@pytest.mark.parametrize("margin_scale", [0.3, 3.0])
def test_vapor_loss_equals_the_naive_loop(epsilon_high, margin_scale):
    """Values and gradients (w.r.t. logp and log P) equal the per-token loop in fp64; margins of
    +-1.5 push h outside the clip range so the clipped branch is exercised too."""
    logp, old, span, adv, log_pref = batch(margin_scale=margin_scale)
    loss, stats = vapor_loss(logp, old, span, adv, log_pref, num_generations=4, epsilon=0.2, epsilon_high=epsilon_high)
    ref = naive_vapor(logp, old, span, adv, log_pref, 4, 0.2, epsilon_high)
    torch.testing.assert_close(loss, ref, **F64)
    g_lib = torch.autograd.grad(loss, (logp, log_pref))
    g_ref = torch.autograd.grad(ref, (logp, log_pref))
    for a, b in zip(g_lib, g_ref):
        torch.testing.assert_close(a, b, **F64)
    if margin_scale == 3.0:
        assert stats["clip_frac"] > 0
    assert stats["span_found_frac"] == (span.sum(1) > 0).double().mean()


def test_hand_worked_case():
    """P=1, G=2, T=3, epsilon=0.2.
    o_1: span tokens 0-1 with log-ratios 0.1, 0.3 -> log v_1 = 0.2;   r_1 = 1
    o_2: no span                                   -> log v_2 = 0;     r_2 = 0
    A = (0.5, -0.5) (group mean 0.5, no std scaling); log P = 0.1
    h_1 = exp(0.3) = 1.34986 > 1.2, A_1 > 0: min(1.34986*0.5, 1.2*0.5) = 0.6 -> loss term -0.6
    h_2 = exp(0.1) = 1.10517, A_2 < 0: min(-0.552585, -0.552585) -> loss term +0.552585
    loss = (-0.6 + 0.552585) / 2 = -0.0237041"""
    old = torch.zeros(2, 3, dtype=torch.float64)
    logp = torch.tensor([[0.1, 0.3, 5.0], [0.7, -0.2, 0.0]], dtype=torch.float64)
    span = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    adv = group_advantages(torch.tensor([1.0, 0.0], dtype=torch.float64), 2, scale_rewards="none")
    loss, stats = vapor_loss(logp, old, span, adv, torch.tensor([0.1], dtype=torch.float64), num_generations=2)
    assert adv.tolist() == [0.5, -0.5]
    torch.testing.assert_close(loss, torch.tensor((-0.6 + 0.5 * math.exp(0.1)) / 2, dtype=torch.float64))
    assert stats["clip_frac_high"] == 0.5 and stats["span_found_frac"] == 0.5
    torch.testing.assert_close(stats["verifiable_ratio_mean"], torch.tensor((math.exp(0.2) + 1) / 2, dtype=torch.float64))


def test_no_span_means_ratio_one_and_reward_zero():
    """A completion without the verifiable span: its v is 1 (log v = 0, whatever its log-probs),
    and the verifiable reward scores it 0."""
    logp = torch.randn(2, 4, dtype=torch.float64)
    old = logp + 1.0
    span = torch.zeros(2, 4, dtype=torch.float64)
    _, stats = vapor_loss(logp, old, span, torch.tensor([0.5, -0.5], dtype=torch.float64),
                          torch.zeros(1, dtype=torch.float64), num_generations=2)
    assert stats["verifiable_ratio_mean"] == 1.0 and stats["span_found_frac"] == 0.0
    reward = exact_match_reward(tagged=True)
    assert reward(prompts=[None] * 2, completions=["9", "<answer>9"], answer=["9", "9"]) == [0.0, 0.0]


@pytest.mark.parametrize("margin", [1000.0, -1000.0])
def test_log_space_never_overflows(margin):
    """Preference margins of +-1000 (exp would be inf / 0): loss and gradients stay finite."""
    logp, old, span, adv, _ = batch(dtype=torch.float32)
    log_pref = torch.full((3,), margin, requires_grad=True)
    loss, stats = vapor_loss(logp, old, span, adv, log_pref, num_generations=4)
    grads = torch.autograd.grad(loss, (logp, log_pref))
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)
    assert math.isfinite(stats["h_mean"].item())


def test_zero_advantages_give_zero_loss_and_gradient():
    logp, old, span, _, log_pref = batch()
    loss, _ = vapor_loss(logp, old, span, torch.zeros(12, dtype=torch.float64), log_pref, num_generations=4)
    assert loss.item() == 0.0
    assert all((g == 0).all() for g in torch.autograd.grad(loss, (logp, log_pref)))


def test_preference_terms():
    """log P is beta times the DPO margin; the DPO loss is -log sigmoid(log P) over found pairs."""
    pc, rc = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -2.0])
    pr, rr = torch.tensor([-3.0, -1.0]), torch.tensor([-2.0, -1.5])
    log_p = preference_log_term(pc, rc, pr, rr, beta=0.1)
    torch.testing.assert_close(log_p, torch.tensor([0.1 * (0.5 + 1.0), 0.1 * (0.0 - 0.5)]))
    loss, stats = preference_dpo_loss(log_p, found=torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(loss, -torch.nn.functional.logsigmoid(torch.tensor(0.15)))
    assert stats["accuracy"] == 1.0
    with pytest.raises(ValueError, match=r"\(P,\)"):
        preference_log_term(pc, rc[:1], pr, rr, beta=0.1)


def test_bad_shapes():
    logp, old, span, adv, log_pref = batch()
    with pytest.raises(ValueError, match="B = P \\* G"):
        vapor_loss(logp, old, span, adv, log_pref[:2], num_generations=4)
    with pytest.raises(ValueError):
        vapor_loss(logp, old[:, :3], span, adv, log_pref, num_generations=4)


def test_the_preference_term_gets_no_gradient_on_policy_inside_the_clip():
    """The analysis of docs/concepts/vapor.md: on-policy (v = 1) every completion of a prompt has
    h = P, so d loss / d log P = -(1/B) P sum_i A_i = 0 (the group's advantages sum to 0) while
    1 - epsilon < P < 1 + epsilon; outside the range only the clipped side's other half has a
    gradient, and it pushes log P back towards the range (a margin the data already favours is
    pulled down)."""
    G = 4
    logp = torch.randn(2 * G, 3, dtype=torch.float64)
    span = torch.ones(2 * G, 3, dtype=torch.float64)
    adv = group_advantages(torch.tensor([1.0, 0, 0, 1, 0, 1, 1, 1], dtype=torch.float64), G, scale_rewards="none")

    def grad_at(value):
        log_p = torch.full((2,), value, dtype=torch.float64, requires_grad=True)
        loss, _ = vapor_loss(logp, logp.clone(), span, adv, log_p, num_generations=G)
        return torch.autograd.grad(loss, log_p)[0]

    for inside in (0.0, 0.1, -0.1):  # |log P| < log(1.2) = 0.182
        assert grad_at(inside).abs().max() < 1e-15  # zero up to fp64 rounding of sum_i A_i
    assert (grad_at(0.5) > 0).all()   # descent lowers log P: back towards 1 + epsilon
    assert (grad_at(-0.5) < 0).all()  # descent raises log P: back towards 1 - epsilon


@pytest.mark.parametrize("on_policy", [True, False])
def test_vapor_kl_has_grpo_losss_kl_value_and_gradient(on_policy):
    """Both VAPOR backends add ``beta * vapor_kl``; on the same inputs its value and its gradient
    w.r.t. logp equal grpo_loss's KL term (grpo_loss with zero advantages and beta = 1, dapo's
    token mean: the surrogate is 0 with a zero gradient), fp64, on-policy (old_logp = logp
    detached, ratio 1) and off-policy. Its logged kl is grpo_loss's stats["kl"]. Control: the
    plain k3 VAPOR used before has the same value on-policy but another gradient, so the
    gradient comparison can fail."""
    logp, old_logp, span, _, _ = batch(seed=1)
    g = torch.Generator().manual_seed(2)
    if on_policy:
        old_logp = logp.detach()                                                       # (B, T)
    ref_logp = logp.detach() + (torch.rand(logp.shape, generator=g, dtype=logp.dtype) - 0.5)  # (B, T)
    mask = span.clone()
    mask[0, :2] = 1                                                                    # no empty row
    penalty, kl = vapor_kl(logp, ref_logp, mask, old_logp)
    grpo, stats = grpo_loss(logp, old_logp, torch.zeros(logp.size(0), dtype=logp.dtype), mask, ref_logp=ref_logp,
                            beta=1.0, loss_type="dapo")
    torch.testing.assert_close(penalty, grpo, **F64)
    torch.testing.assert_close(kl, stats["kl"], **F64)
    g_vapor, = torch.autograd.grad(penalty, logp)
    g_grpo, = torch.autograd.grad(grpo, logp)
    torch.testing.assert_close(g_vapor, g_grpo, **F64)
    plain = masked_mean(kl_k3(logp, ref_logp), mask)                                   # scalar
    g_plain, = torch.autograd.grad(plain, logp)
    assert (g_plain - g_vapor).abs().max() > 1e-3
    if on_policy:
        torch.testing.assert_close(plain, penalty, **F64)
