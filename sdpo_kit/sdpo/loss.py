"""SDPO: self-distillation from the policy reprompted with a successful sibling (or feedback).

The student is the policy on the original prompt; the teacher is a policy (itself, a frozen
start or an EMA of it) that sees the same prompt plus a demonstration that worked, and reads the
*same* completion. Per completion token the student is pulled towards the teacher's next-token
distribution. Equal to ``trl.experimental.sdpo`` (its ``loss_utils`` and its trainer's
aggregation; tested in fp64 over each of its three modes), plus one mode of ours, ``sequence``:

    divergence (TRL's compute_divergence), alpha in [0, 1]:
        alpha = 0:  KL(teacher || student)          alpha = 1:  KL(student || teacher)
        else:       generalised JSD: lerp(KL(m || student), KL(m || teacher), alpha),
                    m = (1 - alpha) * student + alpha * teacher  (in probability space)
    modes:
        full_logits    the divergence over the whole vocabulary
        topk_logits    over the student's top-k tokens (the teacher gathered at the student's
                       indices, never its own top-k), renormalised, or with one tail bucket
                       holding the rest of the mass (add_tail)
        sampled_token  the reverse-KL surrogate on the sampled tokens only:
                       l_t = sg(log s_t - log t_t) * log s_t   (alpha must be 1)
        sequence       ours, not TRL's: the SDPO paper's sequence-level credit ablation (the paper
                       orders logit-level > token-level > sequence-level > GRPO). One weight per
                       completion, its summed log-ratio over the mask, on every token of it:
                       S_i = sum_t mask_it * (log s_it - log t_it),   l_it = sg(S_i) * log s_it
                       (alpha must be 1; its gradient is S_i x that of the sequence's mean log-prob)
    importance correction (optional): l_t * min(exp(clamp(logp_t - old_logp_t, +-20)), is_clip), detached
    aggregation: per sequence, the mean over ``mask`` (completion mask x self-distillation mask);
                 then the mean over all B sequences (a masked-out sequence counts as 0)

Dimension letters as in ``core.logprobs``; ``K`` the top-k support (``K + 1`` with the tail).
"""

from __future__ import annotations

import torch

from sdpo_kit.core.logprobs import masked_mean, masked_sum, token_logprobs

SDPO_MODES = ("sampled_token", "topk_logits", "full_logits", "sequence")  # the last one is ours, not TRL's
TRL_SDPO_MODES = SDPO_MODES[:3]
LOG_RATIO_BOUND = 20.0


def generalized_jsd(student_log_probs: torch.Tensor, teacher_log_probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """Divergence per position, summed over the last (vocabulary or support) dimension: (..., V) -> (...).

    alpha = 0: KL(teacher || student); alpha = 1: KL(student || teacher); in between the
    generalised Jensen-Shannon divergence with mixture m = (1 - alpha) s + alpha t:
        alpha * KL(t || m) + (1 - alpha) * KL(s || m)   (TRL's lerp of the two)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    s, t = student_log_probs, teacher_log_probs
    if alpha == 0.0:
        kl = torch.exp(t) * (t - s)                                                # (..., V) KL(t || s)
    elif alpha == 1.0:
        kl = torch.exp(s) * (s - t)                                                # (..., V) KL(s || t)
    else:
        a = torch.tensor(alpha, dtype=s.dtype, device=s.device)
        log_m = torch.logsumexp(torch.stack([s + torch.log1p(-a), t + torch.log(a)]), dim=0)  # (..., V)
        kl_t = torch.exp(t) * (t - log_m)                                          # (..., V) KL(t || m)
        kl_s = torch.exp(s) * (s - log_m)                                          # (..., V) KL(s || m)
        kl = torch.lerp(kl_s, kl_t, a)                                             # (..., V)
    return kl.sum(-1)                                                              # (...)


def add_tail_bucket(log_probs: torch.Tensor) -> torch.Tensor:
    """Append one category holding the mass the top-k support leaves out: (..., K) -> (..., K+1).

    The K log-probs sum (in probability) to P_topk <= 1; the bucket is log(1 - P_topk), so the
    result is a distribution (P_topk clamped just below 1, as TRL does)."""
    log_s = torch.logsumexp(log_probs, dim=-1, keepdim=True).clamp(max=-1e-7)     # (..., 1)
    return torch.cat([log_probs, torch.log(-torch.expm1(log_s))], dim=-1)          # (..., K+1)


def topk_log_probs(student_logits: torch.Tensor, teacher_logits: torch.Tensor, k: int, add_tail: bool):
    """Student and teacher log-probs on the student's top-k support, (B, T, K) or (B, T, K+1)."""
    s_all = student_logits - torch.logsumexp(student_logits, dim=-1, keepdim=True)  # (B, T, V)
    s_top, idx = torch.topk(s_all, k=k, dim=-1)                                     # (B, T, K)
    t_all = teacher_logits - torch.logsumexp(teacher_logits, dim=-1, keepdim=True)  # (B, T, V)
    t_top = t_all.gather(-1, idx)                                                  # (B, T, K) the student's indices
    if add_tail:
        return add_tail_bucket(s_top), add_tail_bucket(t_top)                      # (B, T, K+1)
    renorm = lambda x: x - torch.logsumexp(x, dim=-1, keepdim=True)  # noqa: E731  the top-k conditional
    return renorm(s_top), renorm(t_top)                                            # (B, T, K)


def sdpo_per_token_loss(student_logits, teacher_logits, completion_ids, *, mode, top_k=None, alpha=1.0,
                        add_tail=False, mask=None) -> torch.Tensor:
    """The per-token distillation loss of one mode, (B, T) (module docstring); ``mask`` (B, T) is
    needed by ``sequence`` only (it sums each completion's log-ratios over it)."""
    if mode not in SDPO_MODES:
        raise ValueError(f"mode must be one of {SDPO_MODES}, got {mode!r}")
    if mode in ("sampled_token", "sequence"):
        if alpha != 1.0:
            raise ValueError(f"mode={mode!r} is a reverse-KL surrogate: alpha must be 1.0, got {alpha}")
        s = token_logprobs(student_logits, completion_ids)                          # (B, T)
        t = token_logprobs(teacher_logits, completion_ids)                          # (B, T)
        if mode == "sampled_token":
            return (s - t).detach() * s                                            # (B, T)
        if mask is None:
            raise ValueError("mode='sequence' needs the mask (its weight sums the log-ratios over it)")
        seq = masked_sum((s - t).detach(), mask.to(s.dtype), dim=1)                 # (B,) S_i
        return seq.unsqueeze(1) * s                                                # (B, T)
    if mode == "topk_logits":
        if not top_k or top_k < 1:
            raise ValueError("mode='topk_logits' needs top_k >= 1")
        s, t = topk_log_probs(student_logits, teacher_logits, min(top_k, student_logits.size(-1)), add_tail)
        return generalized_jsd(s, t, alpha)                                        # (B, T)
    s = torch.log_softmax(student_logits, dim=-1)                                  # (B, T, V)
    t = torch.log_softmax(teacher_logits, dim=-1)                                  # (B, T, V)
    return generalized_jsd(s, t, alpha)                                            # (B, T)


def sdpo_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, completion_ids: torch.Tensor,
              mask: torch.Tensor, *, mode: str, top_k: int | None = None, alpha: float = 1.0, add_tail: bool = False,
              old_logp: torch.Tensor | None = None, is_clip: float | None = None, per_token_fn=None):
    """SDPO's self-distillation loss (module docstring), equal to ``trl.experimental.sdpo``'s
    (``TRL_SDPO_MODES``; ``sequence`` is ours).

    Args (shapes):

        student_logits, teacher_logits: (B, T, V) aligned to the completion tokens (position t
            predicts ``completion_ids[:, t]``), temperature already applied; the teacher's are
            detached by the caller (it runs under no_grad).
        completion_ids: (B, T).
        mask: (B, T) completion mask x each row's self-distillation mask (0: no teacher).
        old_logp: (B, T) the student's log-probs at rollout time, for the optional importance
            correction with ``is_clip``.
        per_token_fn: ``per_token_fn(student_logits, teacher_logits, completion_ids) -> (B, T)`` in place of
            ``sdpo_per_token_loss`` of ``mode`` (a learner's, ``sdpo/pieces.py``); the correction and the
            aggregation stay these.

    An all-zero mask gives a zero loss still attached to the student's graph (backward gives
    zero gradients, never NaN). Returns ``(loss, stats)``: ``distill_loss`` (token mean over the
    mask), ``kl_sampled`` (masked mean of log s - log t on the sampled tokens), ``active_frac``
    (fraction of sequences with at least one token in the mask).
    """
    if student_logits.shape != teacher_logits.shape or student_logits.dim() != 3:
        raise ValueError(f"student and teacher logits must both be (B, T, V), got {tuple(student_logits.shape)} "
                         f"and {tuple(teacher_logits.shape)}")
    for name, x in (("mask", mask), ("completion_ids", completion_ids), ("old_logp", old_logp)):
        if x is not None and x.shape != student_logits.shape[:2]:
            raise ValueError(f"{name} must be (B, T) = {tuple(student_logits.shape[:2])}, got {tuple(x.shape)}")
    mask = mask.to(student_logits.dtype)
    if mask.sum() == 0:  # no row has a teacher: a zero that still backpropagates
        zero = student_logits.sum() * 0.0
        return zero, {"distill_loss": zero.detach(), "kl_sampled": zero.detach(), "active_frac": zero.detach()}
    if per_token_fn is not None:
        per_token = per_token_fn(student_logits, teacher_logits, completion_ids)    # (B, T)
    else:
        per_token = sdpo_per_token_loss(student_logits, teacher_logits, completion_ids, mode=mode, top_k=top_k,
                                        alpha=alpha, add_tail=add_tail, mask=mask)  # (B, T)
    if is_clip is not None and old_logp is not None:
        logp = token_logprobs(student_logits, completion_ids)                       # (B, T)
        log_ratio = torch.clamp((logp - old_logp).detach(), -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
        per_token = per_token * torch.exp(log_ratio).clamp(max=is_clip)            # (B, T)
    loss = (masked_sum(per_token, mask, dim=1) / mask.sum(1).clamp(min=1.0)).mean()  # scalar
    with torch.no_grad():
        s = token_logprobs(student_logits.detach(), completion_ids)                 # (B, T)
        t = token_logprobs(teacher_logits.detach(), completion_ids)                 # (B, T)
        stats = {"distill_loss": masked_mean(per_token.detach(), mask),
                 "kl_sampled": masked_mean(s - t, mask),
                 "active_frac": (mask.sum(1) > 0).to(mask.dtype).mean()}
    return loss, stats
