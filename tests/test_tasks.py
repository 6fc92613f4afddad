"""Tests for sdpo_kit.tasks: the Task protocol, one correctness rule for reward and evaluation,
signature-declared reward columns, and the task registry."""

from __future__ import annotations

import functools

import pytest

from sdpo_kit import make_task
from sdpo_kit.core import sampling as generation
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.rewards import check_columns, checked, exact_match_reward, required_columns
from sdpo_kit.tasks import TASKS, ArithmeticTask, Task, is_correct
from sdpo_kit.tasks.word_problems import WordProblemTask
from sdpo_kit.text.answers import answers_match, normalise_answer

# (completion, answer, plain correct?, tagged correct?)
CORRECTNESS = [
    ("9", "9", True, False), ("9.", "9", True, False), (" 9 \n", "9", True, False),
    ("1,000", "1000", True, False), ("1000", "1,000", True, False), ("09", "9", False, False),
    ("19", "9", False, False), ("", "9", False, False), (".", "", False, False),
    ("9\nbecause", "9", True, False), ("<answer>9.</answer>", "9", False, True),
    ("<answer> 1,000 </answer>", "1000", False, True), ("<answer></answer>", "", False, False),
    ("<answer>8</answer><answer>9</answer>", "9", False, False),
]


@pytest.mark.parametrize("completion,answer,plain,tagged", CORRECTNESS)
def test_reward_and_evaluation_share_one_correctness_rule(completion, answer, plain, tagged):
    """The exact-match reward, the task's is_correct and tasks.is_correct agree on every row,
    plain and tagged (the reward used to forgive "9." and "1,000" while evaluation did not)."""
    for is_tagged, expected in ((False, plain), (True, tagged)):
        task = ArithmeticTask(tagged=is_tagged)
        reward = exact_match_reward(tagged=is_tagged)(prompts=[None], completions=[completion], answer=[answer])
        assert task.is_correct(completion, answer) is expected
        assert is_correct(completion, answer, is_tagged) is expected
        assert reward == [float(expected)]
        assert task.reward([None], [completion], answer=[answer]) == [float(expected)]


def test_normalise_answer():
    """Spaces, one trailing period and thousands commas go; nothing else changes."""
    assert normalise_answer(" 1,000. ") == "1000"
    assert normalise_answer("09") == "09" and normalise_answer("9 is") == "9 is"
    assert answers_match("9.", 9) and not answers_match(None, "9") and not answers_match("", "")


def test_evaluate_counts_what_the_reward_pays_for(monkeypatch):
    """Held-out greedy accuracy goes through is_correct: "9." and "1,000" count as right."""
    task = ArithmeticTask(n_eval=4, seed=0)
    rows = [{"prompt": "q", "answer": a} for a in ("9", "1000", "5", "7")]
    monkeypatch.setattr(generation, "generate_completions",
                        lambda model, tok, prompts, **kw: ["9.", "1,000", "6", ""][:len(prompts)])
    assert task.evaluate(None, None, rows) == 0.5


def test_arithmetic_task_is_a_task_and_evaluates_its_heldout_split_by_default():
    """ArithmeticTask implements the Task protocol; evaluate() without rows uses the held-out split."""
    task = make_task("arithmetic", n_eval=20)
    assert isinstance(task, Task) and task.answer_column == "answer"
    tok = build_tokenizer()
    model = build_model(tok, seed=0)
    heldout = task.splits()[1]
    assert task.evaluate(model, tok) == task.evaluate(model, tok, heldout)
    assert make_task("tagged_arithmetic").tagged and set(TASKS) >= {"arithmetic", "tagged_arithmetic"}
    with pytest.raises(ValueError, match="unknown task 'nope'.*arithmetic"):
        make_task("nope")


def target_reward(prompts, completions, target, **kwargs):
    return [float(c == t) for c, t in zip(completions, target)]


class ClassReward:
    __name__ = "class_reward"

    def __call__(self, prompts, completions, gold, completion_ids=None, **kwargs):
        return [0.0] * len(completions)


def test_reward_columns_come_from_the_signature():
    """A TRL-style reward declares its columns through its signature: parameters without a
    default, other than what TRL passes itself (prompts, completions, completion_ids,
    trainer_state, ...). The attribute still counts; wrappers and partials are seen through."""
    assert required_columns(target_reward) == ("target",)
    assert required_columns(checked(target_reward)) == ("target",)
    assert required_columns(ClassReward()) == ("gold",)
    assert required_columns(functools.partial(target_reward, target=["1"])) == ()
    assert required_columns(exact_match_reward("gold")) == ("gold",)
    assert required_columns(ArithmeticTask().reward) == ("answer",)
    assert required_columns(lambda prompts, completions, trainer_state, log_metric, **kw: []) == ()
    check_columns(["prompt", "target"], [target_reward])
    with pytest.raises(ValueError, match="reward 'target_reward' needs the dataset column 'target'"):
        check_columns(["prompt", "answer"], [target_reward])


def test_a_signature_declared_column_is_checked_before_training():
    """GRPOScratchTrainer refuses rows without the column a reward's signature asks for, up front."""
    tok = build_tokenizer()
    model = build_model(tok, seed=0)
    rows = [{"prompt": "1+1=", "answer": "2"}]
    with pytest.raises(ValueError, match="'target'"):
        GRPOScratchTrainer(model, tok, [target_reward], rows, GRPOScratchConfig(max_steps=1, prompts_per_step=1))


def test_vapor_task_rows_have_a_seeded_preference_pair():
    """vapor_arithmetic: tagged rows with chosen (right answer, well formed) and rejected (the same
    form, a near miss off by 1 or 2), the same in every run; the reward prefers chosen."""
    from sdpo_kit.tasks.arithmetic import VaporArithmeticTask
    from sdpo_kit.tasks.base import check_preference_rows

    task = make_task("vapor_arithmetic", n_eval=20)
    assert isinstance(task, VaporArithmeticTask) and task.tagged and isinstance(task, Task)
    train, heldout = task.splits()
    check_preference_rows(train + heldout)
    for r in train[:100]:
        assert r["chosen"] == f"<answer>{r['answer']}</answer>"
        wrong = int(r["rejected"][len("<answer>"):-len("</answer>")])
        assert 1 <= abs(wrong - int(r["answer"])) <= 2 and wrong >= 0
        assert task.reward(None, [r["chosen"], r["rejected"]], answer=[r["answer"]] * 2) == [1.0, 0.0]
    assert make_task("vapor_arithmetic", n_eval=20).splits() == (train, heldout)


@pytest.mark.parametrize("row,message", [
    ({"prompt": "q", "rejected": "<answer>1</answer>"}, "row 1: column 'chosen' is missing"),
    ({"prompt": "q", "chosen": "<answer>1</answer>", "rejected": 7}, "row 1: column 'rejected' must be a non-empty string"),
    ({"prompt": "q", "chosen": "", "rejected": "x"}, "row 1: column 'chosen'"),
])
def test_bad_preference_rows_name_the_row_and_column(row, message):
    from sdpo_kit.tasks.base import check_preference_rows

    good = {"prompt": "q", "chosen": "<answer>1</answer>", "rejected": "<answer>2</answer>"}
    with pytest.raises(ValueError, match=message):
        check_preference_rows([good, row])


def operands(row) -> tuple[int, ...]:
    """The operands of an arithmetic row's question, read back from the prompt text."""
    q = row["prompt"][-1]["content"].split("=")[0]
    return tuple(int(x) for x in q.split("+"))


# the arithmetic tasks (lab_code's split is by function: tests/test_lab_code_task.py)
# the tasks that ask "3+5+1=" (word problems ask in words: tests/test_word_problems.py, tests/test_vapor_tasks.py)
ARITHMETIC_TASKS = sorted(n for n in TASKS if n != "dataset" and isinstance(TASKS[n](), ArithmeticTask)   # a file's: test_dataset_task.py
                          and not isinstance(TASKS[n](), WordProblemTask))


@pytest.mark.parametrize("name", ARITHMETIC_TASKS)
@pytest.mark.parametrize("size", [dict(), dict(digits=1, terms=2, n_eval=20), dict(digits=2, terms=2),
                                  dict(digits=3, terms=4, n_train=3000)])
def test_heldout_shares_no_problem_with_training_in_any_order(name, size):
    """Disjoint by multiset of operands: no held-out question, nor any reordering of it, is a
    training row or in the warm start's SFT rows (plain and hinted)."""
    task = TASKS[name](**size)
    train, heldout = task.splits()
    held = {tuple(sorted(operands(r))) for r in heldout}
    assert len(heldout) == task.n_eval and train
    assert not held & {tuple(sorted(operands(r))) for r in train}
    sft_questions = [r["prompt"][-1]["content"].split("\n")[0] for r in task.sft_rows(train, copy_fraction=1.0)]
    assert not held & {tuple(sorted(operands({"prompt": [{"content": q}]}))) for q in sft_questions}


def test_the_split_used_to_leak_permutations_and_the_key_catches_them():
    """The check above can fail: split by ordered question, as before, nearly every held-out question
    of the default task is a reordering of a training one (1000 questions, 220 multisets)."""
    task = ArithmeticTask()
    import itertools
    import random

    ops = list(itertools.product(range(10), repeat=3))
    random.Random(0).shuffle(ops)
    held, train = ops[:200], ops[200:]
    train_keys = {task.problem_key(p) for p in train}
    leaked = [p for p in held if task.problem_key(p) in train_keys]
    assert len(leaked) > 150                         # 199 of 200 held-out questions, as reported


def test_heldout_is_the_whole_problem_group_when_the_space_is_enumerated():
    """Held-out takes every ordering of a multiset before the next one (the last group cut to
    n_eval; its other orderings are trained on by nobody)."""
    task = ArithmeticTask()
    train, heldout = task.splits()
    keys = [task.problem_key(operands(r)) for r in heldout]
    assert len(set(keys)) < len(keys) / 3            # about 4.5 orderings per multiset
    assert len(train) + len(heldout) <= 1000 and len(train) >= 750


def test_a_warm_start_split_that_could_hold_the_tasks_heldout_problems_is_an_error():
    """The CLI refuses a task whose held-out problems could be in the tiny lab's SFT rows."""
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.registry import config_from_dict

    ok = config_from_dict({"task": {"name": "arithmetic", "n_eval": 100}})
    assert lab_config_for(ok, make_task(**ok.task))["task"] == "arithmetic"   # a prefix of the same split
    for task in ({"name": "arithmetic", "n_eval": 300}, {"name": "arithmetic", "seed": 1}):
        cfg = config_from_dict({"task": task})
        with pytest.raises(ConfigError, match="model.lab.n_eval and model.lab.seed"):
            lab_config_for(cfg, make_task(**cfg.task))
    cfg = config_from_dict({"task": {"name": "arithmetic", "seed": 1}, "model": {"lab": {"seed": 1}}})
    assert lab_config_for(cfg, make_task(**cfg.task))["seed"] == 1
