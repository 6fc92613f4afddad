"""SDPO's sequence-level credit mode (ours, not TRL's; the SDPO paper's sequence-level ablation):
S_i = sum_t mask_it (log s_it - log t_it), l_it = sg(S_i) log s_it. In fp64: its gradient is S_i
times that of the sequence's mean log-prob; it is sampled_token when each row has one token and
differs from it otherwise; masked-out rows and tokens count for nothing; alpha != 1 is refused, and
so is a loss scale <= 0."""

from __future__ import annotations

import pytest
import torch
from test_losses_sdpo import batch as losses_batch

from sdpo_kit.core.logprobs import masked_mean, token_logprobs
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loss import sdpo_loss, sdpo_per_token_loss

F64 = {"rtol": 1e-10, "atol": 1e-12}


def batch(seed=0, B=4, T=5, V=7):
    """test_losses_sdpo's batch (row 1 without a teacher), with row 0 given >= 2 tokens so its ratios can vary."""
    student, teacher, ids, mask, _ = losses_batch(seed, B, T, V)
    mask[0, :2] = 1
    return student, teacher, ids, mask


def seq_weights(student, teacher, ids, mask):
    """S_i, (B,), by the equation."""
    s, t = token_logprobs(student.detach(), ids), token_logprobs(teacher, ids)     # (B, T)
    return ((s - t) * mask).sum(1)                                                 # (B,)


def test_gradient_is_the_sequence_weight_times_the_mean_logprob_gradient():
    """grad loss = (1/B) sum_i S_i grad(mean over the mask of log s_i), by autograd row by row;
    the value is (1/B) sum_i S_i mean_t log s_it."""
    student, teacher, ids, mask = batch()
    B = student.size(0)
    loss, _ = sdpo_loss(student, teacher, ids, mask, mode="sequence")
    (g,) = torch.autograd.grad(loss, student)
    S = seq_weights(student, teacher, ids, mask)                                  # (B,)
    assert S[mask.sum(1) > 0].abs().min() > 1e-3 and S[1] == 0                     # non-trivial weights; row 1 none
    expected_g, expected = torch.zeros_like(student), 0.0
    for i in range(B):
        mean_logp = masked_mean(token_logprobs(student, ids)[i], mask[i])          # scalar
        (g_i,) = torch.autograd.grad(mean_logp, student)
        expected_g += S[i] * g_i / B
        expected += S[i].item() * mean_logp.item() / B
    torch.testing.assert_close(g, expected_g, **F64)
    assert loss.item() == pytest.approx(expected, rel=1e-12)


def test_is_clip_weights_each_token():
    """With old log-probs and is_clip, l_it = S_i log s_it min(exp(log s_it - old_it), is_clip)."""
    student, teacher, ids, mask = batch(seed=1)
    g = torch.Generator().manual_seed(2)
    s = token_logprobs(student, ids)                                               # (B, T)
    old = s.detach() + (torch.rand(s.shape, generator=g, dtype=torch.float64) - 0.5) * 2
    loss, _ = sdpo_loss(student, teacher, ids, mask, mode="sequence", old_logp=old, is_clip=1.5)
    S = seq_weights(student, teacher, ids, mask)                                   # (B,)
    ratio = torch.exp(s.detach() - old).clamp(max=1.5)                             # (B, T)
    per_token = S.unsqueeze(1) * s * ratio                                         # (B, T)
    expected = ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)).mean()
    torch.testing.assert_close(loss, expected, **F64)


def test_differs_from_sampled_token_but_equals_it_with_one_token_per_row():
    """Ratios that vary across tokens: another loss and gradient than sampled_token. One token per
    row under the mask: S_i is that token's log-ratio, so the two modes are the same loss."""
    student, teacher, ids, mask = batch()
    seq, _ = sdpo_loss(student, teacher, ids, mask, mode="sequence")
    tok, _ = sdpo_loss(student, teacher, ids, mask, mode="sampled_token")
    (g_seq,) = torch.autograd.grad(seq, student)
    (g_tok,) = torch.autograd.grad(tok, student)
    assert abs(seq.item() - tok.item()) > 1e-3 and (g_seq - g_tok).abs().max() > 1e-3

    one = torch.zeros_like(mask)
    one[0, 3] = one[2, 0] = one[3, 4] = 1                                          # row 1: none
    seq, _ = sdpo_loss(student, teacher, ids, one, mode="sequence")
    tok, _ = sdpo_loss(student, teacher, ids, one, mode="sampled_token")
    torch.testing.assert_close(seq, tok, **F64)
    torch.testing.assert_close(torch.autograd.grad(seq, student)[0], torch.autograd.grad(tok, student)[0], **F64)


def test_masked_out_rows_and_tokens_count_for_nothing():
    """Row 1 (mask 0) and the masked-out tokens get zero gradient; changing the teacher there
    changes nothing; the loss is (active rows / B) x the loss of the active rows alone."""
    student, teacher, ids, mask = batch()
    loss, _ = sdpo_loss(student, teacher, ids, mask, mode="sequence")
    (g,) = torch.autograd.grad(loss, student)
    assert torch.equal(g[1], torch.zeros_like(g[1]))
    assert torch.equal(g[mask == 0], torch.zeros_like(g[mask == 0]))
    other = torch.where(mask.bool().unsqueeze(-1), teacher, torch.randn_like(teacher) * 5)
    torch.testing.assert_close(sdpo_loss(student, other, ids, mask, mode="sequence")[0], loss, **F64)
    keep = mask.sum(1) > 0
    alone, _ = sdpo_loss(student[keep], teacher[keep], ids[keep], mask[keep], mode="sequence")
    torch.testing.assert_close(loss, alone * keep.sum() / len(keep), **F64)
    per_token = sdpo_per_token_loss(student, teacher, ids, mode="sequence", mask=mask)
    assert torch.equal(per_token[1], torch.zeros_like(per_token[1]))


def test_bad_arguments_are_refused():
    student, teacher, ids, mask = batch()
    with pytest.raises(ValueError, match="alpha must be 1.0"):
        sdpo_loss(student, teacher, ids, mask, mode="sequence", alpha=0.5)
    with pytest.raises(ValueError, match="needs the mask"):
        sdpo_per_token_loss(student, teacher, ids, mode="sequence")
    with pytest.raises(ValueError, match="distillation_alpha=1.0"):
        SDPOScratchConfig(distillation_mode="sequence", distillation_alpha=0.5)
    for scale in (0.0, -1.0):
        with pytest.raises(ValueError, match="distillation_loss_scale must be > 0"):
            SDPOScratchConfig(distillation_loss_scale=scale)
    assert SDPOScratchConfig(distillation_mode="sequence", distillation_loss_scale=0.25).distillation_loss_scale == 0.25
