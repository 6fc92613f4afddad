"""The real-model task family (``tasks/word_problems.py``) and the prompt settings every task has."""

import re

import pytest

from sdpo_kit import make_task
from sdpo_kit.core.config import ConfigError
from sdpo_kit.registry import config_from_dict
from sdpo_kit.tasks import ArithmeticTask
from sdpo_kit.tasks.word_problems import LEVELS, WordProblemTask


def numbers_and_ops(question: str) -> tuple[int, list[tuple[str, int]]]:
    """Recompute a problem from its text alone: the start and the signed events."""
    if question.startswith("What is"):
        tokens = re.findall(r"[+-]|\d+", question.split("?")[0])
        start, events = int(tokens[0]), [(tokens[i], int(tokens[i + 1])) for i in range(1, len(tokens), 2)]
        return start, events
    start = int(re.search(r"has (\d+)", question).group(1))
    events = []
    for verb, n in re.findall(r"Then \w+ (buys|finds|gets|picks up|gives away|gives|loses|trades away) (\d+)", question):
        events.append(("+" if verb in ("buys", "finds", "gets", "picks up") else "-", int(n)))
    return start, events


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_every_level_asks_well_formed_questions_with_right_answers(level):
    """Each level's rows: the answer is the question's arithmetic (read back from the text alone),
    never below zero, numbers within max_operand, and the prompt is a chat turn with the instruction."""
    task = WordProblemTask(**LEVELS[level], n_eval=20, n_train=200)
    train, heldout = task.splits()
    assert len(heldout) == 20 and train
    for row in train[:50] + heldout:
        (msg,) = row["prompt"]
        assert msg["role"] == "user" and msg["content"].endswith("end with #### and the number.")
        start, events = numbers_and_ops(msg["content"])
        assert len(events) == task.terms - 1
        value = start + sum(n if s == "+" else -n for s, n in events)
        assert int(row["answer"]) == value >= 0
        assert all(1 <= n <= task.top for n in [start] + [n for _, n in events])


def test_heldout_holds_no_rewording_or_reordering_of_a_training_problem():
    """Train and held-out are disjoint by the multisets of added and taken-away numbers, read back from
    the text: a held-out problem told another way or in another order is never trained on."""
    for kw in (LEVELS[3], LEVELS[4], {}):
        train, heldout = WordProblemTask(**kw).splits()

        def key(row):
            start, events = numbers_and_ops(row["prompt"][-1]["content"])
            return (tuple(sorted([start] + [n for s, n in events if s == "+"])),
                    tuple(sorted(n for s, n in events if s == "-")))
        assert not {key(r) for r in heldout} & {key(r) for r in train}
        assert len({key(r) for r in heldout}) == len(heldout)


def test_the_same_problem_is_told_the_same_way_and_splits_are_seeded():
    """A problem's story is drawn from the problem (not the call), and splits repeat for a seed."""
    task = WordProblemTask(kind="word")
    assert task.question((7, ("+", 5))) == task.question((7, ("+", 5)))
    assert task.splits() == WordProblemTask(kind="word").splits()
    assert task.splits()[1] != WordProblemTask(kind="word", seed=1).splits()[1]


def test_a_space_too_small_for_the_heldout_set_is_refused():
    """45 one-digit sums cannot give 100 held-out problems and a training set: a clear error."""
    with pytest.raises(ValueError, match="only 45 distinct problems; n_eval=100"):
        WordProblemTask(**LEVELS[1] | {"max_operand": 9}).splits()
    with pytest.raises(ValueError, match="kind must be"):
        WordProblemTask(kind="story")
    with pytest.raises(ValueError, match="ops must be"):
        WordProblemTask(ops="*")
    with pytest.raises(ValueError, match="ops='-' with terms=3 can take everything away"):
        WordProblemTask(ops="-", terms=3)


@pytest.mark.parametrize("kw", [{}, LEVELS[2] | {"n_eval": 8}])
def test_a_small_space_gives_every_problem_it_has_and_the_same_rows_as_drawing_on(kw):
    """When the training draw runs out of problems it stops at the last key it can add: the rows are
    those of drawing the full 50 n + 1000 tries (a reference loop here), and every key of the space
    (listed here by brute force) is held out or trained on."""
    import itertools
    import random

    task = WordProblemTask(**kw)
    train, heldout = task.splits()
    rng = random.Random(task.seed)
    held = {task.problem_key(p) for p in task._heldout_problems(rng)}
    seen, ref = set(), []
    for _ in range(50 * 5000 + 1000):
        p = task._problem(rng)
        key = task.problem_key(p)
        if key not in seen and key not in held:
            seen.add(key)
            ref.append(p)
    assert train == [task.row(p) for p in ref] and len(train) < 5000   # the space ran out
    every = set()
    for start, *ns in itertools.product(range(1, task.top + 1), repeat=task.terms):
        for signs in itertools.product(task.ops, repeat=task.terms - 1):
            total = start
            for s, n in zip(signs, ns):
                total += n if s == "+" else -n
                if total < 0:
                    break
            else:
                every.add(task.problem_key((start, *zip(signs, ns))))
    assert held | seen == every and not held & seen


def test_prompt_settings_system_instruction_and_plain():
    """Every task takes a system prompt, an instruction template and chat or plain prompts."""
    task = ArithmeticTask(system_prompt="Be brief.", instruction="Compute {question}")
    row = task.row((1, 2, 3))
    assert row["prompt"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Compute 1+2+3="}]
    plain = WordProblemTask(chat=False, system_prompt="You add.", instruction="Q: {question}\nA:")
    assert plain.row((7, ("+", 5)))["prompt"] == "You add.\n\nQ: What is 7 + 5?\nA:"
    assert ArithmeticTask().row((1, 2))["prompt"] == [{"role": "user", "content": "1+2="}]   # the tiny lab's, unchanged
    with pytest.raises(ValueError, match="must hold '{question}'"):
        ArithmeticTask(instruction="Answer briefly.")
    with pytest.raises(ValueError, match="not a template"):
        ArithmeticTask(instruction="{question} in {braces}")


def test_prompt_settings_and_the_rule_come_from_the_config():
    """A run config's task section sets the prompt settings and the answer rule; a typo is named."""
    cfg = config_from_dict({"task": {"name": "word_problems", "kind": "word", "system_prompt": "Be careful.",
                                     "answer_rule": "hashes"}})
    task = make_task(**cfg.task)
    assert task.rule == "hashes" and task.row((3, ("+", 4)))["prompt"][0] == {"role": "system", "content": "Be careful."}
    with pytest.raises(ConfigError, match="system_promt"):
        config_from_dict({"task": {"name": "word_problems", "system_promt": "x"}})
    with pytest.raises(ConfigError, match="unknown answer_rule"):
        config_from_dict({"task": {"name": "arithmetic", "answer_rule": "last_line"}})
