"""Reference answers to the exercises of notebook 03 (rewards: verifiable, self-scored and supervised). CI
loads them into the notebook after each exercise cell (the cell's ``nbmake.post_cell_execute`` metadata);
read them after trying."""

from __future__ import annotations

from sdpo_kit.text.answers import completion_text, is_correct


def no_empty(fn, penalty: float = -10.0):
    """Exercise 3: ``fn`` with the empty-completion loophole closed: ``penalty`` for an empty or
    whitespace-only completion (plain text or chat messages), ``fn``'s score otherwise, same name."""
    def wrapped(prompts, completions, **columns):
        scores = fn(prompts, completions, **columns)
        return [penalty if not completion_text(c).strip() else s for c, s in zip(completions, scores)]
    wrapped.__name__ = getattr(fn, "__name__", "reward")
    return wrapped


def strict_tagged_match(prompts, completions, answer, **columns) -> list[float]:
    """Exercise 1: 1.0 when the completion holds exactly one ``<answer>...</answer>`` pair (open before
    close) whose content is the right answer, else 0.0: the two-tag hedge scores 0."""
    out = []
    for completion, ref in zip(completions, answer):
        text = completion_text(completion)
        one_pair = text.count("<answer>") == 1 and text.count("</answer>") == 1 and \
            text.find("<answer>") < text.find("</answer>")
        out.append(float(one_pair and is_correct(text, ref, "answer_tag")))
    return out


def template_separator(template: str) -> str:
    """Exercise 2: the text between ``{question}`` and ``{solution}`` (for the tiny lab's HINT_TEMPLATE,
    ``"\\nCorrect answer: "``, a separator its warm start has seen)."""
    return template.split("{question}", 1)[1].split("{solution}", 1)[0]
