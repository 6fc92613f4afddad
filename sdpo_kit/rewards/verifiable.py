"""Verifiable rewards: scored by a rule, not by a model. Never crash on empty or garbage text:
they score it 0.0.

Correctness is ``tasks.is_correct`` under the task's answer rule (``text/answers.py``) (the rule held-out evaluation uses too), so the reward
pays for exactly what evaluation counts.
"""

from __future__ import annotations

from sdpo_kit.rewards.core import RewardFunc
from sdpo_kit.tasks.arithmetic import arithmetic_feedback
from sdpo_kit.tasks.base import is_correct
from sdpo_kit.text.answers import as_rule, completion_text, extract_answer, rule_for, rule_name


def exact_match_reward(answer_field: str = "answer", tagged: bool = False, rule: str | None = None) -> RewardFunc:
    """1.0 when the completion's answer equals the dataset's answer, else 0.0.

    ``rule`` reads the answer (``text/answers.py``): ``first_line`` (the default for a plain task:
    the completion's first line), ``answer_tag`` (the default when ``tagged``: the first
    ``<answer>...</answer>``, no tags scores 0), or for a real model's free text ``auto``,
    ``last_number``, ``boxed`` or ``hashes``. Both sides are compared after
    ``answers.normalise_answer`` (``"9."`` and ``"1,000"`` count), as in held-out evaluation.
    """
    rule = rule_for(tagged, rule)

    def exact_match(prompts, completions, **columns) -> list[float]:
        return [float(is_correct(c, a, rule)) for c, a in zip(completions, columns[answer_field])]

    exact_match.required_columns = (answer_field,)
    exact_match.answer_rule = rule
    exact_match.__name__ = "tagged_exact_match" if rule == "answer_tag" else "exact_match"
    return exact_match


def tag_format_reward(tag: str = "answer") -> RewardFunc:
    """1.0 when the completion holds exactly one well-formed ``<tag>...</tag>`` with text inside."""
    open_t, close_t = f"<{tag}>", f"</{tag}>"

    def tag_format(prompts, completions, **columns) -> list[float]:
        out = []
        for c in completions:
            t = completion_text(c)
            i, j = t.find(open_t), t.find(close_t)
            ok = (t.count(open_t) == 1 and t.count(close_t) == 1 and i < j
                  and t[i + len(open_t):j].strip() != "")
            out.append(float(ok))
        return out

    tag_format.__name__ = f"{tag}_format"
    return tag_format


def answer_format_reward(rule: str = "hashes") -> RewardFunc:
    """1.0 when the completion gives an answer that ``rule`` can read (``text/answers.py``), right or
    wrong, else 0.0: with ``rule="hashes"`` and an instruction such as "end with #### and the
    number", a small weight beside exact match teaches a real model where to put its answer."""
    rule = as_rule(rule)

    def answer_format(prompts, completions, **columns) -> list[float]:
        return [float(extract_answer(c, rule) is not None) for c in completions]

    answer_format.__name__ = f"{rule_name(rule)}_format"
    return answer_format


def format_and_match_reward(answer_field: str = "answer", format_weight: float = 0.2) -> RewardFunc:
    """``format_weight * tag_format + (1 - format_weight) * tagged_exact_match``, in [0, 1]."""
    fmt, match = tag_format_reward(), exact_match_reward(answer_field, tagged=True)

    def format_and_match(prompts, completions, **columns) -> list[float]:
        f = fmt(prompts, completions, **columns)
        m = match(prompts, completions, **columns)
        return [format_weight * a + (1 - format_weight) * b for a, b in zip(f, m)]

    format_and_match.required_columns = (answer_field,)
    return format_and_match




def feedback_reward(answer_field: str = "answer", tagged: bool = False, style: str = "direction",
                    rule: str | None = None) -> RewardFunc:
    """Exact match with a checker's feedback: ``{"score": 0.0 or 1.0, "feedback": text}`` per
    completion, "" when right; ``style`` as ``tasks/feedback.py``: ``"direction"`` ("Your answer 12
    is too large; the sum is smaller.") or ``"digits"`` ("Your answer 13391 is wrong in the
    hundreds and tens digits: 13??1"); ``rule`` reads the answer as ``exact_match_reward`` does.
    The scores are the rewards; SDPO's teacher reads the feedback (``include_environment_feedback``)."""
    rule = rule_for(tagged, rule)
    arithmetic_feedback("", "0", rule, style)  # an unknown style fails here, not mid-run

    def feedback(prompts, completions, **columns) -> list[dict]:
        return [{"score": float(is_correct(c, a, rule)), "feedback": arithmetic_feedback(c, a, rule, style)}
                for c, a in zip(completions, columns[answer_field])]

    feedback.required_columns = (answer_field,)
    feedback.answer_rule = rule
    feedback.__name__ = "tagged_feedback" if rule == "answer_tag" else "feedback"
    return feedback


def task_feedback_reward(task, answer_field: str = "answer") -> RewardFunc:
    """The ``feedback`` reward of a task with its own checker (``task.scored(completions,
    answers)`` -> ``{"score", "feedback"}`` per completion; the lab's code task runs each
    distinct program once in the sandbox)."""

    def feedback(prompts, completions, **columns) -> list[dict]:
        return task.scored(completions, columns[answer_field])

    feedback.required_columns = (answer_field,)
    feedback.__name__ = "feedback"
    return feedback
