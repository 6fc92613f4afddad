"""Reference answers to the exercises of notebook 01 (policy gradient from scratch). CI loads them into the
notebook after each exercise cell (the cell's ``nbmake.post_cell_execute`` metadata); read them after trying."""

from __future__ import annotations

import torch


def my_group_advantages(rewards: torch.Tensor, G: int) -> torch.Tensor:
    """Exercise 1: GRPO's group-relative advantage, (R_i - mean of its group) / (std of its group + 1e-4),
    the unbiased std (divides by G - 1) as ``torch.std`` computes it; (B,) in and out, the G completions of a
    prompt next to each other."""
    grouped = rewards.view(-1, G)                                             # (B/G, G)
    centred = grouped - grouped.mean(1, keepdim=True)                         # (B/G, G)
    return (centred / (grouped.std(1, keepdim=True) + 1e-4)).reshape(-1)      # (B,)


def my_rloo_advantages(rewards: torch.Tensor, G: int) -> torch.Tensor:
    """Exercise 2: the leave-one-out (RLOO) advantage, R_i minus the mean of the other G - 1 rewards
    of its group; (B,) in and out, the G completions of a prompt next to each other."""
    grouped = rewards.view(-1, G)                                             # (B/G, G)
    others_mean = (grouped.sum(1, keepdim=True) - grouped) / (G - 1)          # (B/G, G)
    return (grouped - others_mean).reshape(-1)                                # (B,)


def dr_grpo_normaliser(mask: torch.Tensor) -> float:
    """Exercise 3: Dr. GRPO's constant normaliser Z = B * T_max for a (B, T) completion mask
    (T = the padded length, passed as ``max_completion_length``)."""
    return mask.size(0) * mask.size(1)
