"""Reference answers to the exercises of notebooks/03_rewards.ipynb (rewards and reward hacking)."""

from __future__ import annotations

from sdpo_kit.lab.tasks import completion_text


def no_empty(fn, penalty: float = -10.0):
    """Exercise 1: ``fn`` with the empty-completion loophole closed: ``penalty`` for an empty or
    whitespace-only completion (plain text or chat messages), ``fn``'s score otherwise, same name."""
    def wrapped(prompts, completions, **columns):
        scores = fn(prompts, completions, **columns)
        return [penalty if not completion_text(c).strip() else s for c, s in zip(completions, scores)]
    wrapped.__name__ = getattr(fn, "__name__", "reward")
    return wrapped


# Exercise 2: the separator of the tiny lab's warm-start copy prompts (HINT_TEMPLATE), one it has seen.
MY_SEPARATOR = "\nCorrect answer: "

# Exercise 3: DeepSeekMath's GRPO KL weight (configs/default.yaml's too); it slows the self-scored collapse,
# it does not stop it.
EX3_BETA = 0.04
