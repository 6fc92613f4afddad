"""Reference answers to the exercises of notebooks/01_policy_gradient_from_scratch.ipynb (REINFORCE to GRPO)."""

from __future__ import annotations

import torch


def my_rloo_advantages(rewards: torch.Tensor, G: int) -> torch.Tensor:
    """Exercise 1: the leave-one-out (RLOO) advantage, R_i minus the mean of the other G - 1 rewards
    of its group; (B,) in and out, the G completions of a prompt next to each other."""
    grouped = rewards.view(-1, G)                                             # (B/G, G)
    others_mean = (grouped.sum(1, keepdim=True) - grouped) / (G - 1)          # (B/G, G)
    return (grouped - others_mean).reshape(-1)                                # (B,)


def dr_grpo_normaliser(mask: torch.Tensor) -> float:
    """Exercise 2: Dr. GRPO's constant normaliser Z = B * T_max for a (B, T) completion mask
    (T = the padded length, passed as ``max_completion_length``)."""
    return mask.size(0) * mask.size(1)


def my_batch_scaled_advantages(rewards: torch.Tensor, G: int, eps: float = 1e-4) -> torch.Tensor:
    """Exercise 3: the group-centred reward divided by the std (unbiased) of the whole batch plus eps,
    TRL's ``scale_rewards="batch"``; a group with equal rewards gets exactly 0. (B,) in and out."""
    grouped = rewards.view(-1, G)                                             # (B/G, G)
    centred = (grouped - grouped.mean(1, keepdim=True)).reshape(-1)           # (B,)
    return centred / (rewards.std() + eps)                                    # (B,)
