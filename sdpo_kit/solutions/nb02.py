"""Reference answers to the exercises of notebooks/02_grpo.ipynb (GRPO: ratio, KL, aggregation)."""

from __future__ import annotations

import torch


def my_gspo_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exercise 1: GSPO's sequence-level ratio, the geometric mean of a completion's token ratios,
    exp(sum_t m_t (logp - old_logp)_t / |o|); (B, T) inputs, (B,) output."""
    log_ratio = (logp - old_logp) * mask                                      # (B, T)
    return torch.exp(log_ratio.sum(1) / mask.sum(1).clamp(min=1))             # (B,)


# Exercise 2: on-policy and without the ratio, E[grad k2] = grad KL(pi || ref):
# grad (log r)^2 / 2 = log r * grad log r = -log r * grad log pi = log(pi / ref) * grad log pi,
# whose expectation under pi is the score-function gradient of KL(pi || ref).
WHICH = "k2"


def my_advantages(rewards: torch.Tensor, G: int, scale: str) -> torch.Tensor:
    """Exercise 3: group advantages, r - group mean, divided by (unbiased group std + 1e-4) when
    ``scale == "group"`` and left unscaled when ``scale == "none"`` (Dr. GRPO); (B,) in and out."""
    grouped = rewards.view(-1, G)                                             # (B/G, G)
    A = grouped - grouped.mean(1, keepdim=True)                               # (B/G, G)
    if scale == "group":
        A = A / (grouped.std(1, keepdim=True) + 1e-4)                         # (B/G, G)
    return A.reshape(-1)                                                      # (B,)
