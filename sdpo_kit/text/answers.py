"""Reading the answer out of a completion: one rule per way models write answers.

    extract_answer(text, rule) -> str | None     the answer a completion gives, None when it gives none
    answers_match(got, answer) -> bool           equal after ``normalise_answer``
    is_correct(completion, answer, rule) -> bool the one correctness rule of rewards and evaluation

The rules (``ANSWER_RULES``; a task's ``answer_rule`` names one, and the config's ``task:`` section
sets it):

    first_line    the text up to the first newline, stripped: the tiny lab, trained to write the
                  number alone ("154"); strict on purpose, a real model's "76 + 88 = 154" is wrong
    answer_tag    the content of the first ``<answer>...</answer>`` (no tags: no answer)
    boxed         the last number inside the last ``\\boxed{...}`` (MATH's convention)
    hashes        the last number after the last ``####`` (GSM8K's convention)
    last_number   the last number anywhere in the text (lm-eval's "flexible extract")
    first_number  the first number anywhere in the text: for questions whose answer leads the reply
                  ("Which is larger, 35 or 39?" -> "39 is larger"; "35 is smaller than 39" is wrong)
    auto          what instruct models write: the answer a mark names (the last ``\\boxed{}``,
                  ``<answer>`` or ``####``, whichever comes last), else the last number of the text

A rule may also be a function of one's own, from a completion's text to its answer string or None
(``check_rule`` takes it; a dataset task loads it from ``answer_rule: "my_rules.py:name"``).

The number-reading rules return the number canonically (``"1,000"`` -> ``"1000"``, ``"154.0"`` ->
``"154"``, ``"$7$"`` -> ``"7"``), so a reference written as an integer matches. ``first_line`` and
``answer_tag`` return the text as written, compared after ``normalise_answer`` (spaces, one trailing
``.``, thousands commas): ``"9."`` and ``"1,000"`` are right, ``"09"`` is not.

Left out on purpose: fractions and expressions (``\\frac{1}{2}``, ``3/4``) and units: the tasks here
have whole-number answers.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# a number as people write it: optional sign, thousands commas, decimals ("-1,234.50")
NUMBER_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
MARKS = ("boxed", "answer_tag", "hashes")
ANSWER_RULES = ("first_line", "answer_tag", "boxed", "hashes", "last_number", "first_number", "auto")


def check_rule(rule):
    """``rule`` when it is one of ``ANSWER_RULES`` or a reader of one's own (a callable from a completion's
    text to its answer string, or None: ``answer_rule: "my_rules.py:first_number"`` in a dataset task)."""
    if callable(rule):
        return rule
    if rule not in ANSWER_RULES:
        raise ValueError(f"unknown answer_rule {rule!r}; choose one of {list(ANSWER_RULES)}, or a function of "
                         "your own ('file.py:name' in a config)")
    return rule


def rule_name(rule) -> str:
    """A rule's name for messages and logs: the built-in's, or the reader function's."""
    return getattr(rule, "__name__", repr(rule)) if callable(rule) else str(rule)


def read_with(reader, text: str) -> str | None:
    """A reader of one's own applied to a completion's text; what it returns as a string, or None. A reader
    that raises, or returns something other than a string, a number or None, is an error naming it."""
    try:
        got = reader(text)
    except Exception as e:
        raise ValueError(f"answer rule {rule_name(reader)!r} raised {type(e).__name__} on {text[:80]!r}: {e}") from e
    if got is None or isinstance(got, str):
        return got
    if isinstance(got, (int, float)) and not isinstance(got, bool):
        return canonical_number(str(got))
    raise ValueError(f"answer rule {rule_name(reader)!r} returned a {type(got).__name__} for {text[:80]!r}; "
                     "it should return the answer as a string, or None when the text gives none")


def rule_for(tagged: bool = False, answer_rule: str | None = None) -> str:
    """The rule a task or reward uses: ``answer_rule`` when given, else ``answer_tag`` for a tagged
    task and ``first_line`` for the tiny lab's plain one."""
    return check_rule(answer_rule) if answer_rule is not None else ("answer_tag" if tagged else "first_line")


def as_rule(rule):
    """An answer rule from a name, a reader of one's own, or a bool (True: ``answer_tag``, False: ``first_line``)."""
    return rule_for(tagged=rule) if isinstance(rule, bool) else check_rule(rule)


def canonical_number(text: str) -> str:
    """``"1,000"`` -> ``"1000"``, ``"154.0"`` -> ``"154"``, ``"-0.50"`` -> ``"-0.5"`` (a number as ``NUMBER_RE`` reads it)."""
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return text
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def last_number(text: str | None) -> str | None:
    """The last number in ``text``, canonical; None when there is none."""
    found = NUMBER_RE.findall(text or "")
    return canonical_number(found[-1]) if found else None


def first_number(text: str | None) -> str | None:
    """The first number in ``text``, canonical; None when there is none."""
    found = NUMBER_RE.search(text or "")
    return canonical_number(found.group(0)) if found else None


def _boxed(text: str) -> tuple[int, str] | None:
    """(position, content) of the last ``\\boxed{...}``, braces balanced."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return start, text[i:j]
    return None


def _marked(text: str, mark: str) -> tuple[int, str] | None:
    """(position, text) a mark names: the last ``\\boxed{}``, the first ``<answer>``, the line after the last ``####``."""
    if mark == "boxed":
        return _boxed(text)
    if mark == "answer_tag":
        m = ANSWER_TAG_RE.search(text)
        return (m.start(), m.group(1)) if m else None
    at = text.rfind("####")
    return (at, text[at + 4:].split("\n", 1)[0]) if at >= 0 else None


def completion_text(completion) -> str:
    """Text of a completion in either TRL format: a string or a list of chat messages."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, (list, tuple)):
        return "".join(completion_text(m) for m in completion if isinstance(m, dict))
    return str(completion)


def extract_answer(text, rule: str = "first_line") -> str | None:
    """The answer a completion gives under ``rule`` (see the module docstring), or None. Never raises
    on any text; ``text`` may be a string or TRL's chat-message completion."""
    text = completion_text(text)
    check_rule(rule)
    if callable(rule):
        return read_with(rule, text)
    if rule == "first_line":
        first = text.strip().split("\n", 1)[0].strip() if text.strip() else ""
        return first or None
    if rule == "answer_tag":
        found = _marked(text, "answer_tag")
        return found[1].strip() if found else None
    if rule in ("boxed", "hashes"):
        found = _marked(text, rule)
        return last_number(found[1]) if found else None
    if rule == "first_number":
        return first_number(text)
    if rule == "auto":
        marks = [m for m in (_marked(text, k) for k in MARKS) if m is not None and last_number(m[1]) is not None]
        if marks:
            return last_number(max(marks)[1])
    return last_number(text)


def normalise_answer(text: str) -> str:
    """``" 1,000. "`` -> ``"1000"``: strip spaces, one trailing ``.`` and thousands commas."""
    return str(text).strip().rstrip(".").replace(",", "").strip()


def answers_match(got: str | None, answer) -> bool:
    """True when an extracted answer equals the reference after ``normalise_answer``; None never matches."""
    return got is not None and normalise_answer(got) != "" and normalise_answer(got) == normalise_answer(answer)


def is_correct(completion, answer, rule: str = "first_line") -> bool:
    """The correctness rule shared by the exact-match reward and held-out evaluation."""
    return answers_match(extract_answer(completion, rule), answer)


def missing_answer_message(rule) -> str:
    """What a checker says of a completion that gives no answer under ``rule``."""
    return {"first_line": "Your reply is empty; write the sum as a number.",
            "answer_tag": "Your reply has no <answer>...</answer> with a number in it.",
            "boxed": "Your reply has no \\boxed{...} with a number in it.",
            "hashes": "Your reply has no #### followed by a number.",
            }.get(rule, "Your reply gives no answer." if callable(rule) else "Your reply has no number in it.")
