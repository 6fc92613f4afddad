"""Reference answers to the exercises of notebook 07 (teacher-student PPO): GAE, the per-token rewards, how
fast the adaptive KL controller can move beta, and the distillation gradient in closed form. CI loads
them into the notebook after each exercise cell (the cell's ``nbmake.post_cell_execute`` metadata);
read them after trying."""

from __future__ import annotations

import math

import torch


def my_gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """Exercise 1: from the last token back, delta_t = r_t + gamma V_{t+1} - V_t (V_T = 0) and
    A_t = delta_t + gamma lam A_{t+1}; (B, T) in and out."""
    T = rewards.size(1)
    advantages, running = torch.zeros_like(rewards), torch.zeros_like(rewards[:, 0])   # (B, T), (B,)
    for t in reversed(range(T)):
        next_value = values[:, t + 1] if t < T - 1 else torch.zeros_like(running)      # (B,)
        running = rewards[:, t] + gamma * next_value - values[:, t] + gamma * lam * running
        advantages[:, t] = running
    return advantages


def kl_rewards(scores: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor,
               beta: float) -> torch.Tensor:
    """Exercise 2: -beta (logp - ref_logp) on every token, plus each answer's score on its last token (the
    mask is right-padded, so an answer of n tokens ends at position n - 1; an empty answer gets no score)."""
    rewards = -beta * (logp - ref_logp)                                       # (B, T)
    lengths = mask.sum(1).long()                                              # (B,)
    rows = torch.nonzero(lengths > 0).squeeze(1)                              # answers with a last token
    rewards[rows, lengths[rows] - 1] += scores[rows].to(rewards.dtype)
    return rewards


def updates_to_double(n_steps: int, horizon: float) -> int:
    """Exercise 3: far above its target the error is clipped to +0.2, so each update multiplies beta
    by 1 + 0.2 n / horizon; doubling takes ceil(log 2 / log(1 + 0.2 n / horizon)) updates."""
    return math.ceil(math.log(2.0) / math.log1p(0.2 * n_steps / horizon) - 1e-9)


def kd_grad(student_logits: torch.Tensor, teacher_logits: torch.Tensor, T: float) -> torch.Tensor:
    """Exercise 4: with p = softmax(s / T), q = softmax(t / T), d KL(q || p) / d s = (p - q) / T, so the
    T^2-scaled loss has gradient T (p - q): the 1 / T from the softened logits is compensated (Hinton
    et al.: for large T the gradient of the unscaled KL shrinks like 1 / T^2)."""
    return T * (torch.softmax(student_logits / T, -1) - torch.softmax(teacher_logits / T, -1))
