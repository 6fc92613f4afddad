"""SDPO's teacher prompts: the original prompt plus a sibling's solution that worked, or feedback.

    build_teacher_prompts(prompts, completions, rewards, num_generations, feedbacks=None, *, ...)
        -> (teacher_prompts, self_distillation_mask)

The same selection and default templates as TRL's ``SuccessfulRolloutTeacherContextBuilder``
(``trl.experimental.sdpo``; tests use it as the oracle):

* a row's demonstration is the first successful sibling of its group (reward >=
  ``success_threshold``), itself excluded when ``dont_reprompt_on_self_success``;
* feedback is used only when it is a non-empty string, ``include_feedback`` is on, and (with
  ``feedback_only_without_solution``) the row has no demonstration;
* a row with neither gets mask 0 and its teacher prompt is the original prompt;
* chat prompts: the reprompt replaces the last user message's text (earlier messages kept; a
  prompt that does not end with a user turn is an error), plain prompts are reprompted whole.

``fit_teacher_prompts(..., count_tokens, max_len)`` keeps each teacher prompt within
``max_reprompt_len`` tokens by cutting the head of its demonstration (then of its feedback), so
the question (first in the default template) and the instruction after the demonstration stay
whole. TRL cuts the tokenised prompt from the left instead, which loses the question first;
``truncate_left(ids, max_len)`` is that cut, left as the last resort for a question that alone is
too long.

Left out on purpose: multi-process gathering (the trainers pass the whole generation batch).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from sdpo_kit.text.answers import completion_text

# TRL's defaults (trl.experimental.sdpo.SDPOConfig)
REPROMPT_TEMPLATE = "{prompt}{solution}{feedback}\n\nCorrectly solve the original question.\n"
SOLUTION_TEMPLATE = "\nCorrect solution:\n\n{successful_previous_attempt}\n\n"
FEEDBACK_TEMPLATE = "\nThe following is feedback from your unsuccessful earlier attempt:\n\n{feedback_raw}\n\n"
THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass
class TeacherSelection:
    """What ``select_teachers`` decided per row (B rows)."""

    demo: list[int | None]        # index of the row's demonstration, or None
    use_feedback: list[bool]      # whether the row's feedback goes into its reprompt
    feedback_available: list[bool]
    group_has_success: list[bool]  # per group (B / G)

    @property
    def mask(self) -> torch.Tensor:
        return torch.tensor([float(d is not None or f) for d, f in zip(self.demo, self.use_feedback)])  # (B,)

    def metrics(self) -> dict:
        """Fractions of rows (and groups) by what their teacher got (TRL's diagnostics, our names)."""
        B = max(1, len(self.demo))
        return {"sdpo/teacher_coverage": self.mask.mean().item() if self.demo else 0.0,
                "sdpo/success_rate": sum(d is not None for d in self.demo) / B,
                "sdpo/success_group_frac": sum(self.group_has_success) / max(1, len(self.group_has_success)),
                "sdpo/feedback_frac": sum(self.use_feedback) / B,
                "sdpo/feedback_available_frac": sum(self.feedback_available) / B}


def select_teachers(rewards, num_generations: int, feedbacks: Sequence | None = None, *, success_threshold=1.0,
                    dont_reprompt_on_self_success=True, include_feedback=True, feedback_only_without_solution=False,
                    use_successful_as_teacher=True) -> TeacherSelection:
    """Pick each row's demonstration and feedback (the module docstring's rules)."""
    r = [float(x) for x in (rewards.tolist() if hasattr(rewards, "tolist") else rewards)]
    B, G = len(r), num_generations
    if G < 1 or B % G:
        raise ValueError(f"{B} rewards are not whole groups of num_generations={G}")
    feedbacks = list(feedbacks) if feedbacks is not None else [None] * B
    if len(feedbacks) != B:
        raise ValueError(f"got {len(feedbacks)} feedbacks for {B} rows")
    demo, use_fb, fb_avail = [], [], []
    for i in range(B):
        g0 = i // G * G
        ok = [j for j in range(g0, g0 + G) if r[j] >= success_threshold and not (dont_reprompt_on_self_success and j == i)]
        has = isinstance(feedbacks[i], str) and feedbacks[i].strip() != ""
        solution = ok[0] if (ok and use_successful_as_teacher) else None
        demo.append(solution)
        fb_avail.append(has)
        use_fb.append(include_feedback and has and (not feedback_only_without_solution or solution is None))
    groups = [any(x >= success_threshold for x in r[g:g + G]) for g in range(0, B, G)]
    return TeacherSelection(demo, use_fb, fb_avail, groups)


def _last_user_text(messages: list[dict]) -> str:
    last = messages[-1]
    if last.get("role") != "user":
        raise ValueError(f"a teacher reprompt replaces the last user message, but the prompt ends with a "
                         f"{last.get('role')!r} message")
    content = last.get("content", "")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if part.get("type") == "text")
    return content


def build_teacher_prompts(prompts: Sequence, completions: Sequence, rewards, num_generations: int,
                          feedbacks: Sequence | None = None, *, success_threshold: float = 1.0,
                          dont_reprompt_on_self_success: bool = True, include_feedback: bool = True,
                          feedback_only_without_solution: bool = False, use_successful_as_teacher: bool = True,
                          reprompt_template: str = REPROMPT_TEMPLATE, solution_template: str = SOLUTION_TEMPLATE,
                          feedback_template: str = FEEDBACK_TEMPLATE,
                          remove_thinking_from_demonstration: bool = False):
    """(teacher_prompts, self_distillation_mask (B,)) for B = groups x G rows, G rows per prompt.

    ``completions``: the rows' completions (text or chat messages), the demonstrations' source;
    ``rewards`` (B,); ``feedbacks``: a string (or None) per row. Templates as TRL's
    (``{prompt}{solution}{feedback}``, ``{successful_previous_attempt}``, ``{feedback_raw}``)."""
    selection = select_teachers(rewards, num_generations, feedbacks, success_threshold=success_threshold,
                                dont_reprompt_on_self_success=dont_reprompt_on_self_success,
                                include_feedback=include_feedback,
                                feedback_only_without_solution=feedback_only_without_solution,
                                use_successful_as_teacher=use_successful_as_teacher)
    prompts_out = render_teacher_prompts(prompts, completions, feedbacks, selection, reprompt_template=reprompt_template,
                                         solution_template=solution_template, feedback_template=feedback_template,
                                         remove_thinking_from_demonstration=remove_thinking_from_demonstration)
    return prompts_out, selection.mask


def render_teacher_prompts(prompts: Sequence, completions: Sequence, feedbacks: Sequence | None,
                           selection: TeacherSelection, *, reprompt_template: str = REPROMPT_TEMPLATE,
                           solution_template: str = SOLUTION_TEMPLATE, feedback_template: str = FEEDBACK_TEMPLATE,
                           remove_thinking_from_demonstration: bool = False) -> list:
    """The teacher prompt of each row from a ``select_teachers`` decision (the original where masked)."""
    if len(prompts) != len(selection.demo) or len(completions) != len(selection.demo):
        raise ValueError(f"prompts ({len(prompts)}), completions ({len(completions)}) and rewards "
                         f"({len(selection.demo)}) must have one entry per row")
    templates = dict(reprompt_template=reprompt_template, solution_template=solution_template,
                     feedback_template=feedback_template)
    teacher = []
    for i, prompt in enumerate(prompts):
        attempt, feedback = _row_parts(i, completions, feedbacks, selection, remove_thinking_from_demonstration)
        teacher.append(prompt if attempt is None and feedback is None else reprompt(prompt, attempt, feedback, **templates))
    return teacher


def _row_parts(i: int, completions: Sequence, feedbacks: Sequence | None, selection: TeacherSelection,
               remove_thinking: bool) -> tuple[str | None, str | None]:
    """(row i's demonstration text or None, its feedback text or None)."""
    attempt = None
    if selection.demo[i] is not None:
        attempt = completion_text(completions[selection.demo[i]])
        if remove_thinking:
            attempt = THINKING.sub("", attempt).strip()
    return attempt, (feedbacks[i] if selection.use_feedback[i] else None)


def reprompt(prompt, attempt: str | None, feedback: str | None, *, reprompt_template: str = REPROMPT_TEMPLATE,
             solution_template: str = SOLUTION_TEMPLATE, feedback_template: str = FEEDBACK_TEMPLATE):
    """One teacher prompt: ``prompt`` (text, or chat messages whose last user text is reprompted)
    with the demonstration ``attempt`` and / or the ``feedback`` (None: that part is left out)."""
    solution = solution_template.format(successful_previous_attempt=attempt) if attempt is not None else ""
    fb = feedback_template.format(feedback_raw=feedback) if feedback is not None else ""
    if isinstance(prompt, str):
        return reprompt_template.format(prompt=prompt, solution=solution, feedback=fb)
    text = reprompt_template.format(prompt=_last_user_text(prompt), solution=solution, feedback=fb)
    return list(prompt[:-1]) + [{"role": "user", "content": text}]


def _cut_head(text: str, fits: Callable[[str], bool]) -> str | None:
    """The longest tail of ``text`` for which ``fits`` holds (binary search on the characters cut
    from the head; ``fits`` is near-monotone in the tail's length), or None if not even "" fits."""
    if fits(text):
        return text
    if not fits(""):
        return None
    lo, hi = 0, len(text)  # text[lo:] does not fit, text[hi:] fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(text[mid:]) else (mid, hi)
    return text[hi:]


def fit_teacher_prompts(prompts: Sequence, completions: Sequence, feedbacks: Sequence | None,
                        selection: TeacherSelection, count_tokens: Callable[[list], list[int]], max_len: int, *,
                        reprompt_template: str = REPROMPT_TEMPLATE, solution_template: str = SOLUTION_TEMPLATE,
                        feedback_template: str = FEEDBACK_TEMPLATE,
                        remove_thinking_from_demonstration: bool = False) -> tuple[list, list[bool]]:
    """``render_teacher_prompts``, each prompt cut to at most ``max_len`` tokens (``count_tokens``
    counts the tokens of each of a list of rendered prompts, as the trainer tokenises them; called
    once for the batch, then per row that is over) where the cut hurts least: the head of the
    demonstration goes first (its end, the answer, stays), then the head of the feedback. The
    question, the template's instruction after the demonstration and any earlier chat turns stay
    whole. Returns (teacher prompts, whether each row was over ``max_len``).

    A row whose question and instruction alone are over ``max_len`` loses its demonstration and
    feedback sections (the question keeps all the room there is) and stays over: the caller's
    left cut (``truncate_left``, TRL's) is the last resort and loses the question's head."""
    templates = dict(reprompt_template=reprompt_template, solution_template=solution_template,
                     feedback_template=feedback_template)
    teacher = render_teacher_prompts(prompts, completions, feedbacks, selection,
                                     remove_thinking_from_demonstration=remove_thinking_from_demonstration, **templates)
    over = [n > max_len for n in count_tokens(teacher)]
    for i in (i for i, o in enumerate(over) if o):
        attempt, feedback = _row_parts(i, completions, feedbacks, selection, remove_thinking_from_demonstration)
        teacher[i] = _fit_row(prompts[i], attempt, feedback, lambda p: count_tokens([p])[0] <= max_len, templates)
    return teacher, over


def _fit_row(prompt, attempt: str | None, feedback: str | None, fits: Callable[[object], bool], templates: dict):
    """One teacher prompt that ``fits``: the demonstration's head cut first, then the feedback's."""
    if attempt is not None:  # the demonstration's head first, the feedback whole
        cut = _cut_head(attempt, lambda a: fits(reprompt(prompt, a, feedback, **templates)))
        if cut is not None:
            return reprompt(prompt, cut, feedback, **templates)
    if feedback is not None:  # no room for any demonstration: its section goes, then the feedback's head
        feedback = _cut_head(feedback, lambda f: fits(reprompt(prompt, None, f, **templates)))  # None: no room
    return reprompt(prompt, None, feedback, **templates)


def truncate_left(ids: Sequence[int], max_len: int) -> tuple[list[int], bool]:
    """(the last ``max_len`` ids, whether anything was cut): TRL's ``max_reprompt_len`` cut.

    It keeps the end of the prompt, and the default template puts the question first, so on a
    prompt with a demonstration it loses the question before the demonstration:
    ``fit_teacher_prompts`` cuts the demonstration instead, and this is only its last resort."""
    ids = list(ids)
    return (ids[-max_len:], True) if len(ids) > max_len else (ids, False)
