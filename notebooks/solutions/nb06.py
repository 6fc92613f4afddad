"""Reference answers to the exercises of notebook 06 (test-time discovery). CI loads them into the notebook
after each exercise cell (the cell's ``nbmake.post_cell_execute`` metadata); read them after trying."""

from __future__ import annotations

import torch


def expected_best_of_k(p: torch.Tensor, k: int) -> torch.Tensor:
    """Exercise 1: question j is missed by all k independent samples with probability (1 - p_j)^k, so
    best-of-k solves it with probability 1 - (1 - p_j)^k; the expected share solved is the mean over the
    (F,) questions (a scalar). 1 - (1 - p)^k is concave in p, so a spread of easy and hard questions
    solves fewer than equal questions of the same mean p (Jensen's inequality)."""
    return (1 - (1 - p) ** k).mean()                                          # scalar


def discovery_rate(first_success: list, budgets: list) -> list:
    """Exercise 2: D(k), the share of questions whose first success (a 1-based attempt index, None when
    none came within the budget) is at an attempt <= k, for each k in ``budgets``."""
    n = len(first_success)
    return [sum(a is not None and a <= k for a in first_success) / n for k in budgets]
