"""Checkers' feedback on a numeric answer: where it is wrong, never what is right.

    direction_feedback(got, target) -> str     "Your answer 12 is too large; the sum is smaller."
    digit_feedback(got, target) -> str         "Your answer 13391 is wrong in the hundreds and tens
                                                digits: 13??1"

Both take the answer a completion gave (``None`` when it gave none), the reference and the task's
answer rule (``text/answers.py``: what to say when no answer was found), and return "" for a right
answer. ``digit_feedback`` is localized the way test cases are: each digit is a
test that passes or fails, the feedback names the failing ones by place value and repeats the
attempt with a ``?`` over each, and it never shows an expected digit (a LiveCodeBench "Wrong
Answer" would show the expected output; here that would be the answer). A wrong length says
only how many digits the sum has. Why this form: a model that reads it can keep the digits that
passed and has to recompute only the marked ones, which is the in-context skill SDPO's teacher
needs on the long-answer lab (``lab/skill.py``), while the answer itself stays out of the context.

Left out on purpose: the size of the error ("off by 100"), which with the attempt shown would
hand over the answer.
"""

from __future__ import annotations

from sdpo_kit.text.answers import missing_answer_message, normalise_answer, rule_for

PLACE_NAMES = ("ones", "tens", "hundreds", "thousands", "ten-thousands", "hundred-thousands")


def _number(text: str | None) -> str | None:
    """``normalise_answer`` (``" 1,000. "`` -> ``"1000"``); None when it is not a whole number written in digits."""
    if text is None:
        return None
    s = normalise_answer(text)
    return s if s.removeprefix("-").isdigit() else None


def _empty_or_not_a_number(got: str | None, rule) -> str:
    if got is None or not str(got).strip():
        return missing_answer_message(rule if isinstance(rule, str) or callable(rule) else rule_for(tagged=bool(rule)))
    return f"Your answer {got!r} is not a whole number."


def direction_feedback(got: str | None, target: str, rule="first_line") -> str:
    """Whether a wrong sum is too large or too small ("" when right). ``rule``: the answer rule the
    answer was read with (a bool means tagged, True, or plain, False)."""
    value, want = _number(got), _number(target)
    if value is None:
        return _empty_or_not_a_number(got, rule)
    if int(value) == int(want):
        return ""
    side = "too large; the sum is smaller" if int(value) > int(want) else "too small; the sum is larger"
    return f"Your answer {int(value)} is {side}."


def place_name(position_from_right: int) -> str:
    """0 -> "ones", 1 -> "tens", ...; "digit 7 from the right" past the named places."""
    if position_from_right < len(PLACE_NAMES):
        return PLACE_NAMES[position_from_right]
    return f"digit {position_from_right + 1} from the right"


def digit_feedback(got: str | None, target: str, rule="first_line") -> str:
    """Which digits of a wrong answer are wrong, by place value, with the attempt masked:
    "Your answer 13391 is wrong in the hundreds and tens digits: 13??1" ("" when right)."""
    value, want = _number(got), _number(target)
    if value is None:
        return _empty_or_not_a_number(got, rule)
    if value.startswith("-"):
        return f"Your answer {value} is negative; the sum is not."
    value = value.lstrip("0") or "0"
    want = want.lstrip("0") or "0"
    if value == want:
        return ""
    if len(value) != len(want):
        return f"Your answer {value} has {len(value)} digits; the sum has {len(want)}."
    wrong = [i for i, (a, b) in enumerate(zip(value, want)) if a != b]          # from the left
    names = [place_name(len(value) - 1 - i) for i in wrong]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    mask = "".join("?" if i in wrong else c for i, c in enumerate(value))
    return f"Your answer {value} is wrong in the {listed} digit{'s' if len(names) > 1 else ''}: {mask}"


FEEDBACK_STYLES = {"direction": direction_feedback, "digits": digit_feedback}
