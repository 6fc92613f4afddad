"""Reference answers to the exercises of notebook 05 (SDPO). CI loads them into the notebook after each
exercise cell (the cell's ``nbmake.post_cell_execute`` metadata); read them after trying."""

from __future__ import annotations

import math

import torch


def my_topk_tail_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, k: int) -> torch.Tensor:
    """Exercise 2: log-softmax both (B, T, V); take the student's top-k log-probs and its indices, gather
    the teacher's at those indices (never its own top-k); append to each a tail bucket
    log(1 - sum of the k probabilities); then KL(s || t) = sum s (log s - log t) over the k + 1
    categories, (B, T)."""
    log_s = torch.log_softmax(student_logits, dim=-1)                         # (B, T, V)
    log_t = torch.log_softmax(teacher_logits, dim=-1)                         # (B, T, V)
    s_top, idx = log_s.topk(k, dim=-1)                                        # (B, T, k)
    t_top = log_t.gather(-1, idx)                                             # (B, T, k)

    def with_tail(x):                                                         # (B, T, k) -> (B, T, k + 1)
        top_mass = torch.logsumexp(x, dim=-1, keepdim=True).clamp(max=-1e-7)  # log P(top-k), kept below 0
        return torch.cat([x, torch.log(-torch.expm1(top_mass))], dim=-1)      # log(1 - P(top-k))

    s, t = with_tail(s_top), with_tail(t_top)                                 # (B, T, k + 1)
    return (s.exp() * (s - t)).sum(-1)                                        # (B, T)


def my_ema_half_life(tau: float) -> int:
    """Exercise 3: after k updates the start's share is (1 - tau)^k, so the smallest k with
    (1 - tau)^k <= 1/2, i.e. k = ceil(log(1/2) / log(1 - tau)); one update when tau >= 1/2."""
    if tau >= 0.5:
        return 1
    return math.ceil(math.log(0.5) / math.log(1.0 - tau) - 1e-12)


def my_sampled_token_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                          completion_ids: torch.Tensor) -> torch.Tensor:
    """Exercise 1: sg(log s_o - log t_o) * log s_o at each sampled token o; (B, T, V), (B, T, V), (B, T) -> (B, T).
    The log-ratio is detached: a weight on the gradient of log s_o, which alone carries it."""
    ids = completion_ids.unsqueeze(-1)                                        # (B, T, 1)
    log_s = torch.log_softmax(student_logits, dim=-1).gather(-1, ids).squeeze(-1)   # (B, T)
    log_t = torch.log_softmax(teacher_logits, dim=-1).gather(-1, ids).squeeze(-1)   # (B, T)
    return (log_s - log_t).detach() * log_s                                   # (B, T)
