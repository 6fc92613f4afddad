"""Environments: a task that answers back. One protocol, one tiny-lab environment.

    class Environment(Protocol):
        reset() -> prompt                          a new episode's first prompt (chat messages)
        step(response) -> (reward, feedback, done) score one response; feedback for a retry

SDPO reads the feedback as privileged context for its teacher; the verl track reuses the same
protocol for its reward function (``environment_reward`` turns an environment into a
TRL-signature reward that returns ``{"score", "feedback"}``).

Left out on purpose: tool calls and multi-turn transcripts inside one completion (a later
extension; TRL's ``environment_factory`` covers them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sdpo_kit.tasks.arithmetic import ArithmeticTask
from sdpo_kit.text.answers import completion_text


@runtime_checkable
class Environment(Protocol):
    def reset(self): ...

    def step(self, response) -> tuple[float, str, bool]: ...


@dataclass
class ArithmeticEnvironment:
    """Sums from an ``ArithmeticTask``'s rows; a wrong answer is told whether it is too large or
    too small. An episode ends on the right answer or after ``max_turns`` responses."""

    task: ArithmeticTask = field(default_factory=ArithmeticTask)
    split: str = "train"       # which rows episodes draw from: train | heldout
    max_turns: int = 3
    seed: int = 0

    def __post_init__(self):
        if self.split not in ("train", "heldout"):
            raise ValueError(f"split must be 'train' or 'heldout', got {self.split!r}")
        train, heldout = self.task.splits()
        self.rows = train if self.split == "train" else heldout
        self._rng = random.Random(self.seed)
        self.row, self.turns = None, 0

    def reset(self):
        """Start an episode: a random row's chat prompt."""
        self.row, self.turns = self.rows[self._rng.randrange(len(self.rows))], 0
        return self.row["prompt"]

    def step(self, response) -> tuple[float, str, bool]:
        """(1.0 or 0.0, feedback, done) for one response (text or chat messages)."""
        if self.row is None:
            raise RuntimeError("call reset() before step()")
        self.turns += 1
        text = completion_text(response)
        reward = float(self.task.is_correct(text, self.row["answer"]))
        feedback = self.task.feedback(text, self.row["answer"])
        return reward, feedback, reward == 1.0 or self.turns >= self.max_turns


def environment_reward(make_env, answer_field: str = "answer"):
    """A TRL-signature reward from an environment: for each completion, a fresh environment is
    pointed at the row (its ``answer`` column) and stepped once; returns ``{"score", "feedback"}``."""

    def env_reward(prompts, completions, **columns) -> list[dict]:
        out = []
        for prompt, completion, answer in zip(prompts, completions, columns[answer_field]):
            env = make_env()
            env.row, env.turns = {"prompt": prompt, "answer": answer}, 0
            reward, feedback, _ = env.step(completion)
            out.append({"score": reward, "feedback": feedback})
        return out

    env_reward.required_columns = (answer_field,)
    return env_reward
