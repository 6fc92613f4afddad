"""Reference answers to the exercises of notebooks/07_teacher_student_ppo.ipynb (adaptive KL
control's speed, the distillation gradient)."""

from __future__ import annotations

import math

import torch


def my_updates_to_double(n_steps: int, horizon: float) -> int:
    """Exercise 1: far above its target the error is clipped to +0.2, so each update multiplies beta
    by 1 + 0.2 n / horizon; doubling takes ceil(log 2 / log(1 + 0.2 n / horizon)) updates."""
    return math.ceil(math.log(2.0) / math.log1p(0.2 * n_steps / horizon) - 1e-9)


def my_kd_grad(student_logits: torch.Tensor, teacher_logits: torch.Tensor, T: float) -> torch.Tensor:
    """Exercise 2: with p = softmax(s / T), q = softmax(t / T), d KL(q || p) / d s = (p - q) / T, so the
    T^2-scaled loss has gradient T (p - q): the 1 / T from the softened logits is compensated (Hinton
    et al.: for large T the gradient of the unscaled KL shrinks like 1 / T^2)."""
    return T * (torch.softmax(student_logits / T, -1) - torch.softmax(teacher_logits / T, -1))
