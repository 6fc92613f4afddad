"""What every task is: the ``Task`` protocol, the registry of tasks by name, and the answer helpers they share.

A task makes chat rows ``{"prompt": [{"role": "user", "content": ...}], "answer": "..."}``,
splits them into train / held-out disjoint by problem (no reordering of a held-out question is trained on),
scores completions with a verifiable reward and measures greedy accuracy of a model on a split. Every task
implements ``Task``:

    name, answer_column                the rows' answer column (``"answer"``)
    splits() -> (train_rows, heldout_rows)
    reward(prompts, completions, **columns) -> list[float]     TRL's reward signature
    is_correct(completion, answer) -> bool                     the one correctness rule
    evaluate(model, tokenizer, rows=None) -> float             greedy accuracy (held-out by default)

``TASKS`` maps a config's ``task.name`` to a factory; each task module registers its own, an algorithm's
own tasks register from its package (VAPOR's ``vapor_word_problems``), and ``make_task(name, **options)``
builds one. One ``is_correct`` decides both the exact-match reward and held-out accuracy
(``text.answers``): a completion the reward pays for is one evaluation counts.

Left out on purpose: multi-turn environments (``environments.py``) and any task's data.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from sdpo_kit.text import answers
from sdpo_kit.text.answers import as_rule, completion_text

# the reprompt used by the warm start's copy examples and, later, by SDPO's teacher:
# the question followed by a solution that worked. plain ASCII so the tiny tokenizer covers it.
HINT_TEMPLATE = "{question}\nCorrect answer: {solution}"


def prompt_text(prompt) -> str:
    """The last user message of a chat prompt, or the prompt itself when it is a string."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if m.get("role") == "user"]
    return users[-1] if users else completion_text(prompt)


def extract_answer(text, rule=False) -> str | None:
    """``answers.extract_answer`` under ``rule``: an answer rule's name, or a bool (True: the
    ``<answer>`` tag, False: the first line, the tiny lab's rules). Never raises."""
    return answers.extract_answer(text, as_rule(rule))


def is_correct(completion, answer, rule=False) -> bool:
    """The correctness rule shared by the exact-match reward and held-out evaluation (``rule`` as
    ``extract_answer``)."""
    return answers.is_correct(completion, answer, as_rule(rule))


@runtime_checkable
class Task(Protocol):
    """What the trainers, the CLI and the evaluators need from a task (see the module docstring)."""

    name: str
    answer_column: str

    def splits(self) -> tuple[list[dict], list[dict]]: ...

    def reward(self, prompts, completions, **columns) -> list[float]: ...

    def is_correct(self, completion, answer) -> bool: ...

    def evaluate(self, model, tokenizer, rows: list[dict] | None = None) -> float: ...


@torch.no_grad()
def greedy_replies(model, tokenizer, rows: list[dict], *, max_new_tokens: int, batch_size: int = 256,
                   on_batch=None) -> list[str]:
    """Each row's greedy completion of its prompt (batched); ``on_batch(n)`` after each batch of n rows."""
    from sdpo_kit.core.sampling import generate_completions

    texts = []
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        texts += generate_completions(model, tokenizer, [r["prompt"] for r in chunk],
                                      max_new_tokens=max_new_tokens, do_sample=False)
        if on_batch is not None:
            on_batch(len(chunk))
    return texts


def greedy_accuracy(task: Task, model, tokenizer, rows: list[dict], *, max_new_tokens: int,
                    batch_size: int = 256) -> float:
    """Fraction of ``rows`` whose greedy completion ``task.is_correct`` accepts (batched)."""
    if not rows:
        raise ValueError("evaluate() got no rows")
    texts = greedy_replies(model, tokenizer, rows, max_new_tokens=max_new_tokens, batch_size=batch_size)
    return sum(task.is_correct(t, r[task.answer_column]) for t, r in zip(texts, rows)) / len(rows)


PREFERENCE_COLUMNS = ("chosen", "rejected")


def check_preference_rows(rows: list[dict], columns=PREFERENCE_COLUMNS) -> None:
    """ValueError naming the row and the column when a preference row lacks ``chosen`` /
    ``rejected`` or holds something that is not a non-empty string."""
    for i, row in enumerate(rows):
        for col in columns:
            if col not in row:
                raise ValueError(f"row {i}: column {col!r} is missing (a preference row needs {list(columns)})")
            if not isinstance(row[col], str) or not row[col]:
                raise ValueError(f"row {i}: column {col!r} must be a non-empty string, got {row[col]!r}")


# name -> factory; each task module registers its own (one line), an algorithm's from its package
TASKS: dict = {}


def make_task(name: str = "arithmetic", **kwargs) -> Task:
    """Task factory: a name from ``TASKS`` and its keyword arguments. ``TASKS`` holds every task of this
    room once ``sdpo_kit.tasks`` is imported; an algorithm's own tasks register from its package (VAPOR's
    ``vapor_word_problems`` from ``sdpo_kit.vapor.tasks``), so callers above the algorithms use
    ``sdpo_kit.registry.make_task``, which knows them all."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)} (some tasks register from their "
                         "algorithm's package, e.g. vapor_word_problems from sdpo_kit.vapor.tasks; "
                         "sdpo_kit.registry.make_task knows them all)")
    return TASKS[name](**kwargs)
