"""Reference answers to the exercises of notebooks/06_test_time_self_distillation.ipynb (test-time
discovery: best-of-k from one-sample success rates, and the discovery rate from first successes)."""

from __future__ import annotations

import torch


def my_expected_best_of_k(p: torch.Tensor, k: int) -> torch.Tensor:
    """Exercise 1: question j is missed by all k independent samples with probability (1 - p_j)^k,
    so best-of-k solves it with probability 1 - (1 - p_j)^k; the expected share solved is the mean
    over the (F,) questions (a scalar). By Jensen (1 - (1 - p)^k is concave in p), a spread of easy
    and hard questions solves fewer than equal questions of the same mean p."""
    return (1 - (1 - p) ** k).mean()                                          # scalar


def my_discovery_rate(first_success: list, budgets: list) -> list:
    """Exercise 2: D(k) = the share of questions whose first success (1-based attempt index, None when
    none within the budget) is at an attempt <= k, for each k in ``budgets`` (``discovery_curves``' rule)."""
    n = len(first_success)
    return [sum(a is not None and a <= k for a in first_success) / n for k in budgets]
