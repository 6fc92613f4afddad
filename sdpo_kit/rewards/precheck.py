"""The learner's own code, tried before any model loads.

    check_user_code(reward_specs, task, rows) -> None      raises ConfigError naming the file, function and fault

A config can name code of one's own: a ``type: python`` reward (``function: "my_rewards.py:larger"``) and a
dataset task's ``answer_rule: "my_rules.py:first_number"``. Each is called once, on the first training rows,
with placeholder completions (each row's own answer, and a reply that gives none), exactly as the trainers
call it (``core.call_reward_with_feedback``, ``text.answers.read_with``). A wrong signature, a wrong number
or type of values, or an exception is then a one-line ``ConfigError`` before the minutes a model takes to
load; the same faults found later in training keep their own messages (``RewardError``).

Left out on purpose: the library's own rewards (tested in tests/) and model-scored rewards, which need the
model.
"""

from __future__ import annotations

from sdpo_kit.core.config import ConfigError
from sdpo_kit.core.pieces import describe
from sdpo_kit.rewards.core import RewardError, call_reward_with_feedback
from sdpo_kit.text.answers import read_with

NO_ANSWER = "I am not sure."
BEFORE = "called once on the first training rows with placeholder completions, before the model loads"


def placeholder_batch(rows: list[dict]) -> tuple[list, list, dict]:
    """(prompts, completions, columns) as a trainer passes them: two completions per row, the row's own
    answer and a reply that gives none; chat messages for chat prompts; every column but the prompt."""
    chat = not isinstance(rows[0]["prompt"], str)
    texts = [t for row in rows for t in (str(row.get("answer", "")), NO_ANSWER)]
    prompts = [row["prompt"] for row in rows for _ in range(2)]
    completions = [[{"role": "assistant", "content": t}] if chat else t for t in texts]
    columns = {k: [row[k] for row in rows for _ in range(2)] for k in rows[0] if k != "prompt"}
    columns["completion_ids"] = [[] for _ in texts]
    return prompts, completions, columns


def check_user_code(reward_specs: list[dict], task, rows: list[dict], n_rows: int = 2) -> None:
    """Call each ``type: python`` reward in ``reward_specs`` and the task's own answer rule (when it is a
    function) on ``rows[:n_rows]`` with placeholder completions; a fault is a ``ConfigError``."""
    from sdpo_kit.rewards.registry import make_reward

    rows = list(rows[:n_rows])
    if not rows:
        return
    prompts, completions, columns = placeholder_batch(rows)
    for spec in reward_specs:
        if spec.get("type") != "python":
            continue
        try:
            fn = make_reward([{k: v for k, v in spec.items() if k != "weight"}], task=task)[0]
        except ValueError as e:
            raise ConfigError(f"reward: {e}") from None
        try:
            call_reward_with_feedback(fn, prompts, completions, **columns)
        except RewardError as e:
            raise ConfigError(f"your reward {describe(fn)}: {e} ({BEFORE})") from e
    rule = getattr(task, "rule", None)
    if callable(rule):
        for completion in completions:
            text = completion if isinstance(completion, str) else completion[0]["content"]
            try:
                read_with(rule, text)
            except ValueError as e:
                raise ConfigError(f"your answer rule {describe(rule)}: {e} ({BEFORE})") from e
