"""Reference answers to the exercises of notebooks/06_test_time_self_distillation.ipynb (multi-turn
reprompting at test time, ``sdpo.multi_turn``: best-of-k, and feedback the model can read)."""

from __future__ import annotations

import torch

from sdpo_kit.lab.tasks import is_correct

# the copy warm start's own form (tasks.HINT_TEMPLATE's second line): the answer after "Correct answer: "
EX2_FEEDBACK_TEMPLATE = "\nCorrect answer: {feedback_raw}"


def my_expected_best_of_k(p: torch.Tensor, k: int) -> torch.Tensor:
    """Exercise 1: question j is missed by all k independent samples with probability (1 - p_j)^k,
    so best-of-k solves it with probability 1 - (1 - p_j)^k; the expected share solved is the mean
    over the (F,) questions (a scalar). By Jensen (1 - (1 - p)^k is concave in p), a spread of easy
    and hard questions solves fewer than equal questions of the same mean p."""
    return (1 - (1 - p) ** k).mean()                                          # scalar


def my_oracle_reward(prompts, completions, answer, **columns) -> list[dict]:
    """Exercise 2: exact match (``tasks.is_correct``, the one correctness rule) as the score, and the
    right answer itself as the feedback: an oracle, which ``EX2_FEEDBACK_TEMPLATE`` shows the model in
    the "Correct answer: N" form it learned to copy."""
    return [{"score": float(is_correct(c, a)), "feedback": str(a)} for c, a in zip(completions, answer)]
