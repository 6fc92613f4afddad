"""SDPO's self-distillation loss equals trl.experimental.sdpo's (loss_utils + its trainer's
aggregation), values and gradients in fp64, over every mode TRL has (``sequence`` is ours, not
TRL's: tests/test_sdpo_credit.py); a hand-worked top-k case; an all-zero mask gives zero gradients,
not NaN."""

from __future__ import annotations

import math
import os

import pytest
import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # the reference lives in trl.experimental on purpose
from trl.experimental.sdpo import loss_utils as trl_sdpo  # noqa: E402

from sdpo_kit.losses import SDPO_MODES, add_tail_bucket, generalized_jsd, sdpo_loss
from sdpo_kit.sdpo.loss import TRL_SDPO_MODES

F64 = {"rtol": 1e-10, "atol": 1e-12}


def trl_reference(student_logits, teacher_logits, completion_ids, mask, *, mode, top_k, alpha, add_tail, old_logp,
                  is_clip):
    """TRL 1.16 SDPOTrainer._compute_self_distillation_loss, with its loss_utils functions."""
    if mode == "topk_logits":
        per_token = trl_sdpo.compute_topk_self_distillation_loss(
            student_logits, teacher_logits, distillation_topk=top_k, distillation_alpha=alpha,
            distillation_add_tail=add_tail)
    elif mode == "full_logits":
        per_token = trl_sdpo.compute_full_logit_self_distillation_loss(student_logits, teacher_logits,
                                                                         distillation_alpha=alpha)
    else:
        per_token = trl_sdpo.compute_sampled_token_self_distillation_loss(student_logits, teacher_logits,
                                                                            completion_ids, distillation_alpha=alpha)
    if is_clip is not None and old_logp is not None:
        logp = torch.log_softmax(student_logits, -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
        per_token = trl_sdpo.apply_importance_sampling_clipping(per_token, logp, old_logp, is_clip)
    return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


def batch(seed=0, B=4, T=5, V=7):
    g = torch.Generator().manual_seed(seed)
    student = (torch.randn(B, T, V, generator=g, dtype=torch.float64) * 2).requires_grad_(True)  # (B, T, V)
    teacher = torch.randn(B, T, V, generator=g, dtype=torch.float64) * 2                           # (B, T, V)
    ids = torch.randint(0, V, (B, T), generator=g)                                                 # (B, T)
    mask = (torch.rand(B, T, generator=g) < 0.7).double()                                          # (B, T)
    mask[1] = 0                                              # a row without a teacher (self-distillation mask 0)
    old = torch.log_softmax(student.detach(), -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1) \
        + (torch.rand(B, T, generator=g, dtype=torch.float64) - 0.5) * 2                          # (B, T)
    return student, teacher, ids, mask, old


CASES = [("full_logits", None, a, False) for a in (0.0, 0.3, 1.0)] + \
        [("topk_logits", k, a, tail) for k in (1, 3) for a in (0.0, 0.5, 1.0) for tail in (False, True)] + \
        [("sampled_token", None, 1.0, False)]


def test_the_cases_cover_trls_modes_and_trl_has_no_sequence_mode():
    """TRL's SDPOConfig.distillation_mode Literal is exactly our modes less ``sequence`` (ours),
    and the equality cases below cover every one of them."""
    import typing

    from trl.experimental.sdpo import SDPOConfig

    trl_modes = typing.get_args(typing.get_type_hints(SDPOConfig)["distillation_mode"])
    assert set(trl_modes) == set(TRL_SDPO_MODES) == set(SDPO_MODES) - {"sequence"}
    assert {c[0] for c in CASES} == set(TRL_SDPO_MODES)


@pytest.mark.parametrize("is_clip", [None, 1.5])
@pytest.mark.parametrize("mode,top_k,alpha,add_tail", CASES)
def test_sdpo_loss_equals_trl(mode, top_k, alpha, add_tail, is_clip):
    student, teacher, ids, mask, old = batch()
    kw = dict(mode=mode, top_k=top_k, alpha=alpha, add_tail=add_tail, old_logp=old, is_clip=is_clip)
    loss, stats = sdpo_loss(student, teacher, ids, mask, **kw)
    ref = trl_reference(student, teacher, ids, mask, **kw)
    torch.testing.assert_close(loss, ref, **F64)
    (g,) = torch.autograd.grad(loss, student)
    (g_ref,) = torch.autograd.grad(ref, student)
    torch.testing.assert_close(g, g_ref, **F64)
    assert stats["active_frac"] == 0.75


def test_hand_worked_topk_case():
    """V = 5, k = 2, alpha = 1 (KL(student || teacher)) on one token.
    student probs (0.5, 0.2, 0.15, 0.1, 0.05): its top-2 are tokens 0 and 1.
    teacher probs (0.1, 0.4, 0.3, 0.1, 0.1): gathered at the student's indices, 0.1 and 0.4
    (not the teacher's own top-2, which would be tokens 1 and 2).
    renormalised: s = (5/7, 2/7), t = (0.2, 0.8)
        KL(s || t) = 5/7 ln((5/7)/0.2) + 2/7 ln((2/7)/0.8) = 0.90925 - 0.29417 = 0.61508
    with a tail bucket: s = (0.5, 0.2, 0.3), t = (0.1, 0.4, 0.5)
        KL = 0.5 ln 5 + 0.2 ln 0.5 + 0.3 ln 0.6 = 0.80472 - 0.13863 - 0.15325 = 0.51284"""
    s = torch.log(torch.tensor([[[0.5, 0.2, 0.15, 0.1, 0.05]]], dtype=torch.float64))
    t = torch.log(torch.tensor([[[0.1, 0.4, 0.3, 0.1, 0.1]]], dtype=torch.float64))
    ids, mask = torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.float64)
    renorm, _ = sdpo_loss(s, t, ids, mask, mode="topk_logits", top_k=2)
    tail, _ = sdpo_loss(s, t, ids, mask, mode="topk_logits", top_k=2, add_tail=True)
    expected = 5 / 7 * math.log((5 / 7) / 0.2) + 2 / 7 * math.log((2 / 7) / 0.8)
    assert renorm.item() == pytest.approx(expected, rel=1e-12) == pytest.approx(0.61508, abs=1e-5)
    assert tail.item() == pytest.approx(0.5 * math.log(5) + 0.2 * math.log(0.5) + 0.3 * math.log(0.6), rel=1e-12)


def test_divergence_endpoints_and_tail_bucket():
    """alpha 0 / 1 are the two KLs; the JSD is symmetric at alpha 0.5 and zero for equal inputs;
    the tail bucket completes a distribution."""
    g = torch.Generator().manual_seed(1)
    s = torch.log_softmax(torch.randn(3, 6, generator=g, dtype=torch.float64), -1)
    t = torch.log_softmax(torch.randn(3, 6, generator=g, dtype=torch.float64), -1)
    torch.testing.assert_close(generalized_jsd(s, t, 1.0), (s.exp() * (s - t)).sum(-1))
    torch.testing.assert_close(generalized_jsd(s, t, 0.0), (t.exp() * (t - s)).sum(-1))
    torch.testing.assert_close(generalized_jsd(s, t, 0.5), generalized_jsd(t, s, 0.5))
    assert generalized_jsd(s, s, 0.3).abs().max() < 1e-12
    top = s[:, :2]
    torch.testing.assert_close(add_tail_bucket(top).exp().sum(-1), torch.ones(3, dtype=torch.float64))


def test_all_zero_mask_is_a_zero_that_backpropagates():
    """No row has a teacher: loss 0, gradients 0 (not NaN), still attached to the student graph."""
    student, teacher, ids, _, _ = batch()
    loss, stats = sdpo_loss(student, teacher, ids, torch.zeros(4, 5), mode="full_logits")
    (g,) = torch.autograd.grad(loss, student)
    assert loss.item() == 0.0 and torch.equal(g, torch.zeros_like(g)) and stats["active_frac"] == 0


def test_bad_arguments():
    student, teacher, ids, mask, _ = batch()
    with pytest.raises(ValueError, match="alpha must be 1.0"):
        sdpo_loss(student, teacher, ids, mask, mode="sampled_token", alpha=0.5)
    with pytest.raises(ValueError, match="top_k"):
        sdpo_loss(student, teacher, ids, mask, mode="topk_logits")
    with pytest.raises(ValueError, match="mode must be one of"):
        sdpo_loss(student, teacher, ids, mask, mode="kl")
    with pytest.raises(ValueError, match="mask must be"):
        sdpo_loss(student, teacher, ids, mask[:, :3], mode="full_logits")
