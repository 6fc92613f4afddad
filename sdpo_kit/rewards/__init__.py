"""Reward functions with TRL's signature: ``fn(prompts, completions, **columns) -> list[float]``.

    core.py           the contract: column checks (signature or ``required_columns``), named
                      errors for a reward that raises or returns NaN, weighted sums
    verifiable.py     exact match (``lab.tasks.is_correct`` under an answer rule), answer format, tag
                      format, format-and-match, arithmetic feedback
    model_scored.py   inverse loss, coverage-weighted CE, answer likelihood (batched, no_grad)
    learned.py        the tiny lab's learned reward model (a sequence classifier) and its reward
    code_runner.py    model-written Python against test cases: run_tests, the worker pool, the code reward
    code_batch.py     call tests of many programs, one sandboxed child per distinct program (the lab's code
                      task; imported from its module, not re-exported here)
    code_feedback.py  the SDPO authors' test-case feedback text (runtime error, time limit, wrong answer)
    code_problems.py  the shipped code problems (data/code_problems.jsonl) and LiveCodeBench files as chat rows
    sandbox.py        one program in a fresh locked-down child process (limits, no network, temp dir)
    sandbox_child.py  the child's script: rlimits, network namespace, nobody, Landlock, then the program
    registry.py       ``make_reward(config, model, tokenizer, task)`` from config dicts

``completions`` are strings or chat message lists (TRL passes lists of
``{"role": "assistant", "content": ...}`` for conversational datasets); every reward here
takes both. Every public name is re-exported here: ``from sdpo_kit.rewards import make_reward``.
"""

from sdpo_kit.rewards.code_problems import load_code_problems, read_code_problems
from sdpo_kit.rewards.code_runner import (
    CodeResult,
    code_reward,
    extract_code,
    run_tests,
    run_tests_many,
    score_completions,
    split_tests,
)
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

__all__ = [
    "ANSWER_SEPARATOR", "REWARD_BUILDERS", "REWARD_TYPES", "SCORERS", "TRL_REWARD_KWARGS", "CodeResult",
    "RewardError", "RewardFunc", "answer_format_reward", "answer_likelihood_reward", "code_reward", "extract_code", "load_code_problems",
    "read_code_problems", "run_tests", "run_tests_many", "score_completions", "split_tests", "call_reward", "call_reward_with_feedback",
    "check_columns", "checked",
    "compute_rewards", "compute_rewards_with_feedback",
    "coverage_weighted_ce_reward", "exact_match_reward", "feedback_reward", "format_and_match_reward", "inverse_loss_reward",
    "make_reward", "required_columns", "reward_name", "tag_format_reward",
]
