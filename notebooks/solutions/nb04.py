"""Reference answers to the exercises of notebook 04 (VAPOR: spans, the objective, its gradient). CI loads
them into the notebook after each exercise cell (the cell's ``nbmake.post_cell_execute`` metadata); read
them after trying."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def my_zero_gradient_range(epsilon: float, epsilon_high: float) -> tuple[float, float]:
    """Exercise 2: on-policy every completion of a prompt has h = P, so while 1 - epsilon < P <
    1 + epsilon_high none is clipped and d loss / d log P = -(P / B) sum_i A_i = 0. In log P that
    is the open interval (log(1 - epsilon), log(1 + epsilon_high))."""
    return math.log(1 - epsilon), math.log(1 + epsilon_high)


def my_additive_loss(logp: torch.Tensor, old_logp: torch.Tensor, span_mask: torch.Tensor, advantages: torch.Tensor,
                     log_preference: torch.Tensor, found: torch.Tensor, G: int, preference_weight: float,
                     epsilon: float = 0.2) -> torch.Tensor:
    """Exercise 3: the additive variant, VAPOR's clipped surrogate with log P = 0 (GRPO on the
    verifiable span) plus preference_weight x DPO's -log sigmoid(log P) averaged over the pairs
    whose spans were found. (B, T) logp / old_logp / span_mask, (B,) advantages, (P,)
    log_preference and found; returns a scalar."""
    log_v = ((logp - old_logp) * span_mask).sum(1) / span_mask.sum(1).clamp(min=1)   # (B,) 0 where no span
    v = torch.exp(torch.clamp(log_v, -20.0, 20.0))                                   # (B,) h = v when log P = 0
    surrogate = -torch.min(v * advantages, torch.clamp(v, 1 - epsilon, 1 + epsilon) * advantages).mean()  # scalar
    dpo = (-F.logsigmoid(log_preference) * found).sum() / found.sum().clamp(min=1)   # scalar
    return surrogate + preference_weight * dpo


def my_strict_span(text: str, open_tag: str, close_tag: str, offsets) -> range | None:
    """Exercise 1: the tokens lying entirely between the first complete tag pair's tags (no
    straddling token), as a range; None when a tag is missing, the content is empty or no token
    fits inside it."""
    i = text.find(open_tag)
    if i < 0:
        return None
    c0 = i + len(open_tag)
    c1 = text.find(close_tag, c0)
    if c1 <= c0:
        return None
    inside = [t for t, (s, e) in enumerate(offsets) if e > s and s >= c0 and e <= c1]
    return range(inside[0], inside[-1] + 1) if inside else None
