"""The PPO pieces (sdpo_kit/ppo/loss.py) against classic trl 0.11.4, transcribed in
tests/ppo_reference_trl0114.py (trl 0.11.4 cannot share an environment with trl 1.16), and the
distillation loss against TRL's GKD generalized JSD at the matching setting."""

from __future__ import annotations

import math

import ppo_reference_trl0114 as ref
import pytest
import torch

from sdpo_kit.ppo import loss as ppo

B, T, V = 3, 5, 7


def batch(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], dtype=dtype)   # right-padded
    return dict(scores=r(B), logp=-r(B, T).abs(), ref_logp=-r(B, T).abs(), values=r(B, T), mask=mask,
                logits=r(B, T, V), old_logp=-r(B, T).abs(), old_values=r(B, T))


@pytest.mark.parametrize("kl_penalty", ["kl", "abs", "mse"])
@pytest.mark.parametrize("kl_coef", [0.0, 0.2])
def test_per_token_rewards_equal_trl_0114(kl_penalty, kl_coef):
    b = batch()
    mine = ppo.per_token_rewards(b["scores"], b["logp"], b["ref_logp"], b["mask"], kl_coef, kl_penalty)
    theirs = ref.compute_rewards(b["scores"], b["logp"], b["ref_logp"], b["mask"], kl_coef, kl_penalty)
    for a, t in zip(mine, theirs):
        torch.testing.assert_close(a, t, rtol=0, atol=0)
    # the score sits at the last unmasked token: row 1 has 3 tokens
    torch.testing.assert_close(mine[0][1, 2], mine[1][1, 2] + b["scores"][1], rtol=1e-5, atol=1e-6)  # fp32 sum
    assert torch.equal(mine[0][1, 3:], mine[1][1, 3:])


def test_an_empty_response_gets_no_score_where_trl_0114_raises():
    b = batch()
    mask = b["mask"].clone()
    mask[2] = 0
    rewards, non_score, _ = ppo.per_token_rewards(b["scores"], b["logp"], b["ref_logp"], mask, 0.1)
    torch.testing.assert_close(rewards[2], non_score[2])
    with pytest.raises(IndexError):
        ref.compute_rewards(b["scores"], b["logp"], b["ref_logp"], mask, 0.1, "kl")
    with pytest.raises(ValueError, match="kl_penalty"):
        ppo.per_token_rewards(b["scores"], b["logp"], b["ref_logp"], mask, 0.1, "k3")


@pytest.mark.parametrize("whiten_rewards", [False, True])
@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.5)])
def test_gae_equals_trl_0114(whiten_rewards, gamma, lam):
    b = batch(1)
    rewards, _, _ = ppo.per_token_rewards(b["scores"], b["logp"], b["ref_logp"], b["mask"], 0.2)
    adv, ret = ppo.gae(rewards, b["values"], b["mask"], gamma=gamma, lam=lam, whiten_rewards=whiten_rewards)
    _, adv_ref, ret_ref = ref.compute_advantages(b["values"], rewards, b["mask"], gamma, lam, whiten_rewards)
    torch.testing.assert_close(adv, adv_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, ret_ref, rtol=0, atol=1e-12)


def test_gae_by_hand_on_four_tokens():
    """One response, 4 tokens, gamma = lam = 1: A_t = sum of rewards from t on minus V_t, so
    returns R_t = A_t + V_t are the rewards-to-go."""
    r = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[0.5, 0.4, 0.7, 0.9]], dtype=torch.float64)
    m = torch.ones(1, 4, dtype=torch.float64)
    adv, ret = ppo.gae(r, v, m, gamma=1.0, lam=1.0)
    torch.testing.assert_close(ret, torch.ones(1, 4, dtype=torch.float64))   # reward-to-go is 1 everywhere
    raw = ret - v                                                             # (0.5, 0.6, 0.3, 0.1)
    torch.testing.assert_close(adv, (raw - raw.mean()) / raw.std(), atol=1e-6, rtol=0)   # whitened
    assert adv.requires_grad is False


@pytest.mark.parametrize("cliprange,cliprange_value,vf_coef", [(0.2, 0.2, 0.1), (0.05, 0.5, 1.0)])
def test_ppo_loss_equals_trl_0114(cliprange, cliprange_value, vf_coef):
    b = batch(2)
    rewards, _, _ = ppo.per_token_rewards(b["scores"], b["ref_logp"], b["old_logp"], b["mask"], 0.2)
    adv, ret = ppo.gae(rewards, b["old_values"], b["mask"], gamma=1.0, lam=0.95)
    logp = b["logp"].clone().requires_grad_(True)
    values = b["values"].clone().requires_grad_(True)
    loss, stats = ppo.ppo_loss(logp, b["old_logp"], values, b["old_values"] * b["mask"], adv, ret, b["mask"],
                               cliprange=cliprange, cliprange_value=cliprange_value, vf_coef=vf_coef, logits=b["logits"])
    logp_r = b["logp"].clone().requires_grad_(True)
    values_r = b["values"].clone().requires_grad_(True)
    pg, vf, st = ref.loss(b["old_logp"], b["old_values"] * b["mask"], b["logits"], values_r, logp_r, b["mask"], adv, ret,
                          cliprange, cliprange_value, vf_coef)
    torch.testing.assert_close(loss, pg + vf, rtol=0, atol=1e-12)
    grads = torch.autograd.grad(loss, (logp, values))
    grads_ref = torch.autograd.grad(pg + vf, (logp_r, values_r))
    for a, t in zip(grads, grads_ref):
        torch.testing.assert_close(a, t, rtol=0, atol=1e-12)
    for mine, theirs in [("pg_loss", "loss/policy"), ("vf_loss", "loss/value"), ("approx_kl", "policy/approxkl"),
                         ("policy_kl", "policy/policykl"), ("clip_frac", "policy/clipfrac"),
                         ("vf_clip_frac", "val/clipfrac"), ("entropy", "policy/entropy")]:
        torch.testing.assert_close(stats[mine], st[theirs], rtol=0, atol=1e-12, msg=mine)
    assert 0 < stats["clip_frac"] < 1 and 0 < stats["vf_clip_frac"] < 1, "both clips engaged somewhere"


def test_explained_variance():
    ret = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    m = torch.ones(1, 4)
    assert ppo.explained_variance(ret, ret, m) == 1.0
    torch.testing.assert_close(ppo.explained_variance(torch.full_like(ret, 2.5), ret, m), torch.tensor(0.0))


def test_kl_controllers_equal_trl_0114():
    mine, theirs = ppo.AdaptiveKLController(0.2, 6.0, 10000), ref.AdaptiveKLController(0.2, 6.0, 10000)
    for kl in (0.5, 3.0, 6.0, 9.0, 100.0, 0.0):
        mine.update(kl, 256)
        theirs.update(kl, 256)
        assert math.isclose(mine.value, float(theirs.value), rel_tol=1e-6)
    fixed = ppo.FixedKLController(0.3)
    fixed.update(100.0, 256)
    assert fixed.value == 0.3
    # the coefficient tracks its target: above it grows, below it shrinks, by at most 20% x n / horizon
    c = ppo.AdaptiveKLController(1.0, 1.0, 100)
    assert c.update(10.0, 10) == pytest.approx(1.02) and c.update(0.0, 10) == pytest.approx(1.02 * 0.98)
    with pytest.raises(ValueError):
        ppo.AdaptiveKLController(0.1, 0.0, 10)


def test_running_moments_and_score_processing_equal_trl_0114():
    g = torch.Generator().manual_seed(3)
    mine, theirs = ppo.RunningMoments(), ref.RunningMoments()
    for n in (4, 7, 1, 16):
        xs = torch.randn(n, generator=g) * 3 + 1
        a, b = mine.update(xs), theirs.update(xs)
        if n > 1:
            assert a == pytest.approx(b, rel=1e-6)
        assert (mine.mean, mine.std, mine.var) == pytest.approx((theirs.mean, theirs.std, theirs.var), rel=1e-6)
    for scaling, norm, clip in [(True, False, None), (True, True, 1.0), (False, False, 0.5)]:
        m, t = ppo.RunningMoments(), ref.RunningMoments()
        for step in range(3):
            scores = torch.randn(8, generator=g) * 2 + step
            out = ppo.scale_scores(scores, m, use_score_scaling=scaling, use_score_norm=norm, score_clip=clip)
            torch.testing.assert_close(out, ref.process_scores(scores, t, scaling, norm, clip))
    with pytest.raises(ValueError, match="use_score_norm"):
        ppo.scale_scores(torch.ones(3), ppo.RunningMoments(), use_score_norm=True)


def test_score_scaling_works_where_trl_0114_crashes():
    """trl 0.11.4's step() calls .to() on the Python float RunningMoments.update leaves: ours runs."""
    scores = torch.tensor([1.0, 2.0, 4.0])
    with pytest.raises(AttributeError, match="'float' object has no attribute 'to'"):
        ref.process_scores(scores, ref.RunningMoments(), True, False, None, fix_float_to_crash=False)
    out = ppo.scale_scores(scores, ppo.RunningMoments(), use_score_scaling=True)
    torch.testing.assert_close(out, scores / scores.std(), atol=1e-6, rtol=0)   # one batch: its own std


def test_distillation_loss_by_hand_and_its_temperature():
    s = torch.tensor([[[2.0, 0.0, 0.0]]], dtype=torch.float64)
    t = torch.tensor([[[0.0, 2.0, 0.0]]], dtype=torch.float64)
    m = torch.ones(1, 1)
    for T_ in (1.0, 2.0, 4.0):
        p_t, p_s = torch.softmax(t / T_, -1), torch.softmax(s / T_, -1)
        loss, stats = ppo.distillation_loss(s, t, m, temperature=T_)
        kl = (p_t * (p_t.log() - p_s.log())).sum()
        torch.testing.assert_close(loss, T_**2 * kl)
        torch.testing.assert_close(stats["kd_kl"], kl)
    assert ppo.distillation_loss(s, s, m)[0] == 0
    x = s.clone().requires_grad_(True)
    ppo.distillation_loss(x, t, torch.zeros(1, 1))[0].backward()       # empty mask: zero, no NaN
    assert torch.equal(x.grad, torch.zeros_like(x))
    with pytest.raises(ValueError, match="temperature"):
        ppo.distillation_loss(s, t, m, temperature=0.0)
    with pytest.raises(ValueError, match="shape"):
        ppo.distillation_loss(s, t[..., :2], m)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_distillation_loss_equals_trl_gkd_jsd_at_beta_0(temperature):
    """TRL's GKD generalized JSD at beta = 0 is KL(teacher || student) per token, averaged over the
    unmasked tokens: ours without the T^2 factor."""
    GKDTrainer = pytest.importorskip("trl.experimental.gkd").GKDTrainer
    b = batch(4)
    teacher = torch.randn(B, T, V, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    labels = torch.where(b["mask"].bool(), 1, -100)
    theirs = GKDTrainer.generalized_jsd_loss(b["logits"], teacher, labels=labels, beta=0.0, temperature=temperature)
    mine, _ = ppo.distillation_loss(b["logits"], teacher, b["mask"], temperature=temperature)
    torch.testing.assert_close(mine / temperature**2, theirs, rtol=0, atol=1e-12)


def test_early_stop_rule():
    assert ppo.early_stop(1.6, 1.0) and not ppo.early_stop(1.5, 1.0) and not ppo.early_stop(9.0, 1.0, enabled=False)
    assert ppo.early_stop(0.16, 0.1) == ref.early_stop(0.16, True, 0.1)
