"""Answer rules (``text/answers.py``): each rule reads what its models write, and nothing else.

Tables of (completion, expected) for every rule, with empty, malformed and adversarial text; the
rewards and the feedback follow the rule the task names."""

import pytest

from sdpo_kit.rewards import answer_format_reward, exact_match_reward, feedback_reward, make_reward
from sdpo_kit.tasks import ArithmeticTask
from sdpo_kit.tasks.arithmetic import arithmetic_feedback
from sdpo_kit.tasks.feedback import digit_feedback, direction_feedback
from sdpo_kit.tasks.word_problems import WordProblemTask
from sdpo_kit.text.answers import (
    ANSWER_RULES,
    answers_match,
    canonical_number,
    extract_answer,
    is_correct,
    normalise_answer,
    rule_for,
)

# (completion, {rule: expected answer}); a rule left out expects None
EXTRACT = [
    ("154", {"first_line": "154", "last_number": "154", "auto": "154"}),
    ("76 + 88 = 154", {"first_line": "76 + 88 = 154", "last_number": "154", "auto": "154"}),
    ("To add 7 and 2, we get 7 + 2 = 9.\nSo the answer is 9.", {"first_line": "To add 7 and 2, we get 7 + 2 = 9.",
                                                                  "last_number": "9", "auto": "9"}),
    ("The sum is 1,234.", {"first_line": "The sum is 1,234.", "last_number": "1234", "auto": "1234"}),
    ("It is 12.0 apples", {"first_line": "It is 12.0 apples", "last_number": "12", "auto": "12"}),
    ("13 - 20 = -7", {"first_line": "13 - 20 = -7", "last_number": "-7", "auto": "-7"}),
    ("The answer is \\boxed{42}. Check: 40 + 2", {"first_line": "The answer is \\boxed{42}. Check: 40 + 2",
                                                  "boxed": "42", "last_number": "2", "auto": "42"}),
    ("\\boxed{\\frac{1}{2}} no", {"first_line": "\\boxed{\\frac{1}{2}} no", "boxed": "2", "last_number": "2",
                                   "auto": "2"}),
    ("5 + 7 = 12\n#### 12\nExtra 99", {"first_line": "5 + 7 = 12", "hashes": "12", "last_number": "99", "auto": "12"}),
    ("#### 2\nwait\n#### 1", {"first_line": "#### 2", "hashes": "1", "last_number": "1", "auto": "1"}),
    ("<answer>9</answer> then 10", {"first_line": "<answer>9</answer> then 10", "answer_tag": "9",
                                     "last_number": "10", "auto": "9"}),
    ("<answer>8</answer><answer>9</answer>", {"first_line": "<answer>8</answer><answer>9</answer>", "answer_tag": "8",
                                              "last_number": "9", "auto": "8"}),
    ("#### none here", {"first_line": "#### none here"}),          # a mark with no number: no answer
    ("", {}),
    ("   \n  ", {}),
    ("no digits at all", {"first_line": "no digits at all"}),
    ("\\boxed{12", {"first_line": "\\boxed{12", "last_number": "12", "auto": "12"}),   # unclosed box: not a mark
]


# the first_number rule on each EXTRACT row, in order: the first number written, canonical ("1,234" -> "1234")
FIRST_NUMBER = ["154", "76", "7", "1234", "12", "13", "42", "1", "5", "2", "9", "8", None, None, None, None, "12"]


@pytest.mark.parametrize("i", range(len(EXTRACT)))
def test_each_rule_reads_what_it_should(i):
    """Every rule on every completion: the table's answer, or None where the rule finds none."""
    text, expected = EXTRACT[i]
    for rule in ANSWER_RULES:
        want = FIRST_NUMBER[i] if rule == "first_number" else expected.get(rule)
        assert extract_answer(text, rule) == want, (rule, text)


def test_chat_completions_and_none_are_read_like_text():
    """TRL's chat completions (a list of messages) and None are read like strings."""
    assert extract_answer([{"role": "assistant", "content": "7 + 5 = 12"}], "auto") == "12"
    assert extract_answer(None, "auto") is None and extract_answer(None, "first_line") is None


def test_canonical_numbers_and_unknown_rules():
    """Numbers are written one way; an unknown rule is an error naming the rules."""
    assert [canonical_number(x) for x in ("1,000", "154.0", "-0.50", "007")] == ["1000", "154", "-0.5", "7"]
    with pytest.raises(ValueError, match="unknown answer_rule 'nope'.*last_number"):
        extract_answer("1", "nope")
    assert rule_for(False) == "first_line" and rule_for(True) == "answer_tag" and rule_for(True, "auto") == "auto"


# (completion, answer, right under auto?): what a real instruct model writes
REAL = [
    ("53 + 21 = 74", "74", True), ("The answer is 74.", "74", True), ("74", "74", True),
    ("53 + 21 = 75", "74", False), ("The answer is 74 apples, or maybe 73", "74", False),
    ("", "74", False), ("I cannot compute that.", "74", False), ("#### 74", "74", True),
    ("53 + 21 = 74\n#### 75", "74", False),                        # the mark wins over the last number
    ("074", "74", True), ("74.5", "74", False), ("-74", "74", False),
]


@pytest.mark.parametrize("completion, answer, right", REAL)
def test_auto_pays_right_answers_and_only_right_answers(completion, answer, right):
    """Under ``auto`` the exact-match reward and ``is_correct`` agree on every row of the table, and
    the strict tiny-lab rule scores the sentence forms 0."""
    reward = exact_match_reward(rule="auto")
    assert is_correct(completion, answer, "auto") is right
    assert reward(prompts=["q"], completions=[completion], answer=[answer]) == [float(right)]


def test_the_strict_rule_stays_the_tiny_labs():
    """The tiny lab's rule is unchanged: "53 + 21 = 74" is not the answer 74 there."""
    assert not is_correct("53 + 21 = 74", "74", "first_line") and is_correct("74\n", "74", "first_line")
    assert ArithmeticTask().rule == "first_line" and ArithmeticTask(tagged=True).rule == "answer_tag"


def test_feedback_reads_the_answer_with_the_tasks_rule():
    """The checker's feedback on a real model's sentence names its number, not "not a whole number"."""
    assert arithmetic_feedback("76 + 88 = 154", "164", "auto") == "Your answer 154 is too small; the sum is larger."
    assert arithmetic_feedback("76 + 88 = 164", "164", "auto") == ""
    assert arithmetic_feedback("I do not know", "164", "auto") == "Your reply has no number in it."
    assert "not a whole number" in arithmetic_feedback("76 + 88 = 154", "164", "first_line")
    fb = feedback_reward(rule="auto", style="digits")
    out = fb(prompts=["q"], completions=["So 76 + 88 = 154."], answer=["164"])
    assert out == [{"score": 0.0, "feedback": "Your answer 154 is wrong in the tens digit: 1?4"}]


@pytest.mark.parametrize("written, right", [(" 1,000. ", True), ("1,000", True), ("1000.", True),
                                            ("1,001.", False), (" 999 ", False)])
def test_feedback_reads_a_written_number_as_the_answer_rules_do(written, right):
    """The feedback normalises a number as ``normalise_answer`` does (spaces, a trailing ``.``, thousands
    commas): it is silent exactly where ``answers_match`` calls the answer right, and names the number else."""
    assert answers_match(written, "1000") is right
    for style in (direction_feedback, digit_feedback):
        said = style(written, "1000")
        assert (said == "") is right
        assert right or said.startswith(f"Your answer {normalise_answer(written)} ")


def test_config_rewards_follow_the_tasks_rule():
    """``make_reward`` builds exact match, feedback and format with the task's rule unless told otherwise."""
    task = WordProblemTask()
    (em, fb, fmt) = make_reward(["exact_match", "feedback", "format"], task=task)
    assert em.answer_rule == fb.answer_rule == "auto" == task.rule
    assert em(prompts=["q"], completions=["3 + 4 = 7"], answer=["7"]) == [1.0]
    assert fmt(prompts=["q"], completions=["3 + 4 = 7", "seven"], answer=["7", "7"]) == [1.0, 0.0]
    (strict,) = make_reward([{"type": "exact_match", "rule": "hashes"}], task=task)
    assert strict(prompts=["q"], completions=["3 + 4 = 7", "#### 7"], answer=["7", "7"]) == [0.0, 1.0]
    (tiny,) = make_reward(["exact_match"], task=ArithmeticTask())
    assert tiny.answer_rule == "first_line"


def test_the_format_reward_pays_a_readable_answer_right_or_wrong():
    """``answer_format_reward("hashes")`` pays "#### N" whatever N is, and nothing without the mark."""
    fmt = answer_format_reward("hashes")
    assert fmt(prompts=["q"] * 4, completions=["#### 7", "#### 8", "7", "####"]) == [1.0, 1.0, 0.0, 0.0]


def test_feedback_never_says_right_to_what_the_reward_calls_wrong():
    """The strict rule calls "0154" wrong; the checker's styles read it as 154: the feedback must not
    then stay silent (an empty feedback reads as "right"), for either style."""
    for style in ("direction", "digits"):
        assert not is_correct("0154", "154", "first_line")
        assert arithmetic_feedback("0154", "154", "first_line", style) == "Your answer '0154' is not written as the plain number."
        assert arithmetic_feedback("154", "154", "first_line", style) == ""
