"""VAPOR's data for a real instruct model: word problems with a tagged answer and a preference pair.

    VaporWordProblemTask()   registered as "vapor_word_problems" (``tasks.base.TASKS``) when ``sdpo_kit.vapor``
                             is imported; ``sdpo_kit.registry`` imports it, so ``registry.make_task`` knows it

The tiny lab's ``vapor_arithmetic`` asks ``"3+5+1= <answer>"`` and its warm start writes
``9</answer>``. A real instruct model asked for tags in words ignores them (SmolLM2-135M-Instruct wrote
none in 16 questions, greedy), but it copies a demonstration, so the instruction shows one:

    Example: What is 4 + 3?
    Answer: 4 + 3 = 7 <answer>7</answer>

    Now: What is 13 - 4?
    Answer:

(SmolLM2-135M-Instruct, greedy, tags some of its answers and gets fewer of them right). Answers are read with
the ``answer_tag`` rule, so an untagged answer earns nothing and has no verifiable span. Each row adds
``chosen``, the demonstration's form with the right answer (``"13 - 4 = 9 <answer>9</answer>"``), and
``rejected``, the same form with a near miss (off by 1 or 2 in the working and in the tags, as a slip in the
sum gives), drawn from ``seed`` and the problem so rows are the same in every run, as
``tasks.arithmetic.VaporArithmeticTask`` draws them. Everything else (problems, difficulty, the split by
``problem_key``) is ``WordProblemTask``'s. Left out on purpose: pairs that differ in form rather than in the
number (a missing tag, a rambling answer): the preference span compares numbers only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sdpo_kit.tasks.base import TASKS
from sdpo_kit.tasks.word_problems import WordProblemTask

INSTRUCTION = "Example: What is 4 + 3?\nAnswer: 4 + 3 = 7 <answer>7</answer>\n\nNow: {question}\nAnswer:"


@dataclass
class VaporWordProblemTask(WordProblemTask):
    """Word problems whose answer goes in ``<answer>`` tags, with a chosen / rejected pair per row
    (see the module docstring). Options as ``WordProblemTask``; ``answer_rule`` ``answer_tag``."""

    answer_rule: str | None = "answer_tag"
    instruction: str | None = INSTRUCTION
    name: str = field(init=False, default="vapor_word_problems")

    @staticmethod
    def working(problem) -> str:
        """The problem's arithmetic as a model writes it: ``"13 - 4"``."""
        start, *events = problem
        return " ".join([str(start)] + [f"{s} {n}" for s, n in events])

    def solution(self, problem, answer: int) -> str:
        """The demonstration's form with ``answer``: ``"13 - 4 = 9 <answer>9</answer>"``."""
        return f"{self.working(problem)} = {answer} <answer>{answer}</answer>"

    def format_answer(self, answer: str) -> str:
        return f"<answer>{answer}</answer>"

    def row(self, problem) -> dict:
        row = super().row(problem)
        rng = random.Random(f"{self.seed}:{problem!r}")
        answer = int(row["answer"])
        wrong = answer + rng.choice([d for d in (-2, -1, 1, 2) if answer + d >= 0])
        return {**row, "chosen": self.solution(problem, answer), "rejected": self.solution(problem, wrong)}

    def max_completion_tokens(self) -> int:
        """``"19 + 17 = 36 <answer>36</answer>"`` is 18 SmolLM2 tokens (one per digit): 24 leave room."""
        return 24


TASKS["vapor_word_problems"] = VaporWordProblemTask
