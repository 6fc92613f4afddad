"""Reference answers to the exercises of notebook 02 (GRPO). CI loads them into the notebook after each
exercise cell (the cell's ``nbmake.post_cell_execute`` metadata); read them after trying."""

from __future__ import annotations

import torch


def my_grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                 epsilon: float) -> torch.Tensor:
    """Exercise 1: GRPO's clipped loss, -min(ratio A, clip(ratio, 1 - eps, 1 + eps) A) per token, averaged over
    the completion tokens of the whole batch (loss_type "dapo"), no KL term. (B, T) inputs, advantages (B,)."""
    ratio = torch.exp(logp - old_logp)                                        # (B, T)
    A = advantages[:, None]                                                   # (B, 1) one advantage per completion
    per_token = -torch.min(ratio * A, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * A)   # (B, T)
    return (per_token * mask).sum() / mask.sum()                              # scalar: padding counts for nothing


def my_group_advantages(rewards: torch.Tensor, G: int) -> torch.Tensor:
    """Exercise 3: notebook 01's exercise 1 brought over, the group-relative advantage (R_i - mean of its group) /
    (std of its group + 1e-4), the unbiased std; (B,) in and out, the G completions of a prompt next to each other."""
    grouped = rewards.view(-1, G)                                             # (B/G, G)
    centred = grouped - grouped.mean(1, keepdim=True)                         # (B/G, G)
    return (centred / (grouped.std(1, keepdim=True) + 1e-4)).reshape(-1)      # (B,)


def my_gspo_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exercise 2: GSPO's sequence-level ratio, the geometric mean of a completion's token ratios,
    exp(sum_t m_t (logp - old_logp)_t / |o|); (B, T) inputs, (B,) output."""
    log_ratio = (logp - old_logp) * mask                                      # (B, T)
    return torch.exp(log_ratio.sum(1) / mask.sum(1).clamp(min=1))             # (B,)
