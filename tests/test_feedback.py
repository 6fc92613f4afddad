"""Feedback from rewards and environments (SDPO's privileged context): rewards may return
{"score", "feedback"} dicts; the tiny lab's feedback reward and environment say what is wrong."""

from __future__ import annotations

import pytest

from sdpo_kit.rewards import (
    RewardError,
    call_reward,
    call_reward_with_feedback,
    checked,
    compute_rewards_with_feedback,
    feedback_reward,
    make_reward,
)
from sdpo_kit.tasks import ArithmeticTask
from sdpo_kit.tasks.arithmetic import arithmetic_feedback
from sdpo_kit.tasks.environments import ArithmeticEnvironment, Environment, environment_reward

# (completion, answer, tagged, expected feedback)
FEEDBACK = [
    ("9", "9", False, ""),
    ("12", "9", False, "Your answer 12 is too large; the sum is smaller."),
    ("3", "9", False, "Your answer 3 is too small; the sum is larger."),
    ("", "9", False, "Your reply is empty; write the sum as a number."),
    ("nine", "9", False, "Your answer 'nine' is not a whole number."),
    ("<answer>9</answer>", "9", True, ""),
    ("9", "9", True, "Your reply has no <answer>...</answer> with a number in it."),
    ("<answer>1,000</answer>", "999", True, "Your answer 1000 is too large; the sum is smaller."),
]


@pytest.mark.parametrize("completion,answer,tagged,expected", FEEDBACK)
def test_arithmetic_feedback(completion, answer, tagged, expected):
    assert arithmetic_feedback(completion, answer, tagged) == expected
    assert ArithmeticTask(tagged=tagged).feedback(completion, answer) == expected


def test_rewards_may_return_score_and_feedback():
    """Scores are the rewards; feedback texts come along (blank ones become None); floats still work."""
    fb = feedback_reward()
    scores, texts = call_reward_with_feedback(fb, [None] * 3, ["9", "12", ""], answer=["9", "9", "9"])
    assert scores == [1.0, 0.0, 0.0] and texts[0] is None and "too large" in texts[1]
    assert call_reward(fb, [None], ["12"], answer=["9"]) == [0.0]
    sink = []
    assert checked(fb, sink)([None], ["3"], answer=["9"]) == [0.0] and "too small" in sink[0]
    total, per_func, feedbacks = compute_rewards_with_feedback(
        [fb, make_reward("exact_match")[0]], [None] * 2, ["9", "12"], {"answer": ["9", "9"]})
    assert total.tolist() == [2.0, 0.0] and per_func.shape == (2, 2) and feedbacks[0] is None
    with pytest.raises(RewardError, match="without 'score'"):
        call_reward(lambda prompts, completions, **kw: [{"feedback": "x"}], [None], ["9"])
    assert make_reward("feedback", task=ArithmeticTask(tagged=True))[0].__name__ == "tagged_feedback"


def test_the_arithmetic_environment():
    """reset -> a prompt; step -> (reward, feedback, done): done on success or after max_turns."""
    env = ArithmeticEnvironment(ArithmeticTask(n_eval=10), split="heldout", max_turns=2, seed=1)
    assert isinstance(env, Environment)
    prompt = env.reset()
    answer = env.row["answer"]
    assert prompt == env.row["prompt"] and env.row in env.rows
    wrong = str(int(answer) + 5)
    assert env.step(wrong) == (0.0, f"Your answer {wrong} is too large; the sum is smaller.", False)
    assert env.step(wrong)[2] is True            # out of turns
    env.reset()
    assert env.step([{"role": "assistant", "content": env.row["answer"]}]) == (1.0, "", True)
    with pytest.raises(RuntimeError, match="reset"):
        ArithmeticEnvironment(ArithmeticTask(n_eval=10)).step("1")
    reward = environment_reward(lambda: ArithmeticEnvironment(ArithmeticTask(n_eval=10)))
    assert reward([None, None], ["9", "1"], answer=["9", "9"]) == [
        {"score": 1.0, "feedback": ""}, {"score": 0.0, "feedback": "Your answer 1 is too small; the sum is larger."}]


def test_an_environment_is_a_reward_type_and_scores_as_the_feedback_reward():
    from sdpo_kit.rewards import make_reward

    task = ArithmeticTask(n_eval=10)
    rows = task.splits()[1][:4]
    prompts, answers = [r["prompt"] for r in rows], [r["answer"] for r in rows]
    texts = [str(answers[0]), str(int(answers[1]) + 3), "x", str(answers[3])]
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    (env,) = make_reward({"type": "environment"}, task=task)
    (fb,) = make_reward({"type": "feedback"}, task=task)
    assert env(prompts, completions, answer=answers) == fb(prompts, completions, answer=answers)
    (by_path,) = make_reward({"type": "environment", "factory": "sdpo_kit.tasks.environments:ArithmeticEnvironment"})
    assert [d["score"] for d in by_path(prompts, completions, answer=answers)] == [1.0, 0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="cannot import factory"):
        make_reward({"type": "environment", "factory": "no.such.module:Env"})
