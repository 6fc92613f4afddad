"""The SDPO skill lab: the warm start's in-context-skill dial.

SDPO's teacher is the policy itself reprompted with a successful sibling's answer or with the
checker's feedback (``text/reprompt.py``, TRL's default templates). It only helps a model that
can use that context; the paper sees SDPO tie GRPO at 0.6B and pull ahead as models get better
in-context learners. The tiny lab's dial, ``LabConfig.context_steps``, sets how much of that skill
the warm start teaches, with the task's own SFT budget held fixed:

    context_rows(task, rows, *, seed) -> list[dict]    SFT rows whose prompt is a teacher prompt
    near_miss(answer, rng) -> str                      a wrong answer of the same length

A context row's prompt is exactly what SDPO's teacher sees at training time (``reprompt`` with
TRL's default templates), in three kinds (``feedback_share`` of them feedback only, the rest
demo or both evenly; configs/sdpo_lab.yaml: 0.6, since the feedback skill is the slower to learn):

    demo       the question and a successful sibling's answer ("Correct solution: ...")
    feedback   the question and the checker's feedback on a near miss ("...wrong in the tens digit: 45?3")
    both       the two together (TRL's default when a failed row has a successful sibling)

and its target is the right answer. The near misses stand in for the student's failed attempts:
one digit wrong (two in a third of them), each off by one (a dropped carry, the warm start's most
common slip) or, half the time, any other digit, so reading the feedback is what pays. They are
synthetic, not sampled from the model, so the rows are the same at every dial setting.

Left out on purpose: reprompt templates other than TRL's defaults (a config that changes them
should train the skill on its own templates, which is one line here).
"""

from __future__ import annotations

import random

from sdpo_kit.text.reprompt import reprompt

KINDS = ("demo", "feedback", "both")
# the teacher prompts' templates (``reprompt``'s keywords): TRL's defaults, or the lab's one-line form
# (configs/sdpo.yaml's: about a third of the tokens, so each context step and teacher forward is cheaper)
TEMPLATES = {
    "trl": {},
    "compact": {"reprompt_template": "{prompt}{solution}{feedback}",
                "solution_template": "\nCorrect answer: {successful_previous_attempt}",
                "feedback_template": "\nFeedback: {feedback_raw}"},
}


def near_miss(answer: str, rng: random.Random) -> str:
    """``answer`` with one digit wrong (two, a third of the time), the same length and no leading
    zero: each changed digit is off by one half the time, else any other digit."""
    digits = list(str(answer))
    n = 1 if len(digits) == 1 or rng.random() < 2 / 3 else 2
    for i in rng.sample(range(len(digits)), n):
        old = int(digits[i])
        low = 1 if i == 0 and len(digits) > 1 else 0
        choices = [d for d in range(low, 10) if d != old]
        near = [d for d in (old - 1, old + 1) if d in choices]
        digits[i] = str(rng.choice(near if near and rng.random() < 0.5 else choices))
    return "".join(digits)


def context_rows(task, rows: list[dict], *, seed: int = 0, templates: str = "trl",
                 feedback_share: float = 1 / 3) -> list[dict]:
    """One teacher-prompt SFT row per task row: ``{"prompt", "completion", "kind"}``, the prompt built
    by SDPO's ``reprompt`` and the completion the right answer in the task's format; ``templates``
    names one of ``TEMPLATES``. A row is ``feedback`` with probability ``feedback_share``, else
    ``demo`` or ``both`` evenly (1/3: the three ``KINDS`` evenly)."""
    if not 0.0 <= feedback_share <= 1.0:
        raise ValueError(f"feedback_share must be in [0, 1], got {feedback_share}")
    if templates not in TEMPLATES:
        raise ValueError(f"templates must be one of {sorted(TEMPLATES)}, got {templates!r}")
    if not hasattr(task, "feedback") or not hasattr(task, "format_answer"):
        raise TypeError(f"{type(task).__name__} has no feedback() / format_answer(): the skill lab needs a "
                        "task whose checker gives feedback")
    rng = random.Random(seed)
    miss = getattr(task, "near_miss", near_miss)   # a task whose answers are not numbers brings its own
    drafts = []
    for r in rows:
        kind = rng.choices(KINDS, weights=((1 - feedback_share) / 2, feedback_share, (1 - feedback_share) / 2))[0]
        wrong = task.format_answer(miss(r["answer"], rng)) if kind in ("feedback", "both") else None
        drafts.append((r, kind, wrong))
    # the checker's words on each near miss (lab_code renders them without running anything)
    asked = [(wrong, r["answer"]) for r, _, wrong in drafts if wrong is not None]
    if hasattr(task, "near_miss_feedback"):   # lab_code: the near misses' values are known, no sandbox needed
        said = iter(task.near_miss_feedback([w for w, _ in asked], [a for _, a in asked]))
    else:
        said = iter([task.feedback(w, a) for w, a in asked])
    out = []
    for r, kind, wrong in drafts:
        right = task.format_answer(r["answer"])
        demo = right if kind in ("demo", "both") else None
        feedback = next(said) if wrong is not None else None
        out.append({"prompt": reprompt(r["prompt"], demo, feedback, **TEMPLATES[templates]), "completion": right,
                    "kind": kind})
    return out
