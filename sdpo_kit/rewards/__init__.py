"""Reward functions with TRL's signature: ``fn(prompts, completions, **columns) -> list[float]``.

    core.py           the contract: column checks (signature or ``required_columns``), named
                      errors for a reward that raises or returns NaN, weighted sums
    verifiable.py     exact match (``tasks.base.is_correct`` under an answer rule), answer format, tag
                      format, format-and-match, arithmetic feedback
    model_scored.py   inverse loss, coverage-weighted CE, answer likelihood (batched, no_grad)
    learned.py        the tiny lab's learned reward model (a sequence classifier) and its reward
    code.py           the ``code`` reward: model-written Python against each row's tests, run in the sandbox
                      (``sdpo_kit.sandbox``: the runner, its pool, the child process, the feedback text)
    code_problems.py  the shipped code problems (data/code_problems.jsonl) and LiveCodeBench files as chat rows
    registry.py       ``make_reward(config, model, tokenizer, task)`` from config dicts
    precheck.py       your own reward and answer rule, called once before any model loads

``completions`` are strings or chat message lists (TRL passes lists of
``{"role": "assistant", "content": ...}`` for conversational datasets); every reward here
takes both. Every public name is re-exported here: ``from sdpo_kit.rewards import make_reward``.
"""

from sdpo_kit.rewards.code import code_reward
from sdpo_kit.rewards.code_problems import load_code_problems, read_code_problems
from sdpo_kit.rewards.core import (
    TRL_REWARD_KWARGS,
    RewardError,
    RewardFunc,
    call_reward,
    call_reward_with_feedback,
    check_columns,
    checked,
    compute_rewards,
    compute_rewards_with_feedback,
    required_columns,
    reward_name,
)
from sdpo_kit.rewards.learned import agreement
from sdpo_kit.rewards.model_scored import (
    ANSWER_SEPARATOR,
    SCORERS,
    answer_likelihood_reward,
    coverage_weighted_ce_reward,
    inverse_loss_reward,
)
from sdpo_kit.rewards.registry import REWARD_BUILDERS, REWARD_TYPES, make_reward
from sdpo_kit.rewards.verifiable import (
    answer_format_reward,
    exact_match_reward,
    feedback_reward,
    format_and_match_reward,
    tag_format_reward,
)
from sdpo_kit.sandbox.runner import (  # the sandbox's runner, re-exported: from sdpo_kit.rewards import run_tests
    CodeResult,
    extract_code,
    run_tests,
    run_tests_many,
    score_completions,
    split_tests,
)

__all__ = [
    "ANSWER_SEPARATOR", "REWARD_BUILDERS", "REWARD_TYPES", "SCORERS", "TRL_REWARD_KWARGS", "CodeResult",
    "RewardError", "RewardFunc", "agreement", "answer_format_reward", "answer_likelihood_reward", "code_reward", "extract_code", "load_code_problems",
    "read_code_problems", "run_tests", "run_tests_many", "score_completions", "split_tests", "call_reward", "call_reward_with_feedback",
    "check_columns", "checked",
    "compute_rewards", "compute_rewards_with_feedback",
    "coverage_weighted_ce_reward", "exact_match_reward", "feedback_reward", "format_and_match_reward", "inverse_loss_reward",
    "make_reward", "required_columns", "reward_name", "tag_format_reward",
]
