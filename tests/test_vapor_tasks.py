"""VAPOR's real-model data (``vapor/tasks.py``): tagged word problems with a seeded preference pair."""

import re

import pytest

from sdpo_kit import make_task
from sdpo_kit.lab.model import build_tokenizer
from sdpo_kit.tasks import Task
from sdpo_kit.tasks.base import check_preference_rows
from sdpo_kit.tasks.word_problems import LEVELS
from sdpo_kit.vapor.parts import preference_batch
from sdpo_kit.vapor.spans import find_span_token_indices
from sdpo_kit.vapor.tasks import VaporWordProblemTask

TAGS = ("<answer>", "</answer>")
SOLUTION = re.compile(r"^(\d+(?: [+-] \d+)+) = (\d+) <answer>(\d+)</answer>$")


def test_registered_by_its_package_and_known_to_the_registry():
    """``make_task("vapor_word_problems")`` works once ``sdpo_kit.vapor`` is imported (this module imports it), and
    ``registry.make_task`` knows it with nothing else imported; the tasks room alone does not (it stands below vapor/), and
    its error says where the task registers. The task reads answers in tags."""
    import subprocess
    import sys

    from sdpo_kit.registry import make_task as make_any_task

    assert make_any_task(name="vapor_word_problems", n_eval=10).name == "vapor_word_problems"
    lab_only = ("from sdpo_kit.tasks.base import make_task\n"
                "try:\n    make_task('vapor_word_problems')\nexcept ValueError as e:\n    print(e)\n"
                "import sdpo_kit.registry\nprint(make_task('vapor_word_problems', n_eval=2).name)")
    out = subprocess.run([sys.executable, "-c", lab_only], capture_output=True, text=True, check=True).stdout
    assert "unknown task 'vapor_word_problems'" in out and "sdpo_kit.vapor.tasks" in out, out
    assert out.strip().endswith("vapor_word_problems"), out
    task = make_task("vapor_word_problems", n_eval=10)
    assert isinstance(task, VaporWordProblemTask) and isinstance(task, Task)
    assert task.rule == "answer_tag" and task.name == "vapor_word_problems"
    (msg,) = task.splits()[1][0]["prompt"]
    assert msg["role"] == "user" and "<answer>7</answer>" in msg["content"] and msg["content"].endswith("\nAnswer:")


@pytest.mark.parametrize("kw", [{}, LEVELS[2], LEVELS[4]])
def test_pairs_are_well_formed_near_misses_of_the_same_working(kw):
    """chosen is the working with the right answer in the tags; rejected the same working with a number off
    by 1 or 2 (never below 0) in both places; the working is the problem's own arithmetic, whatever its kind."""
    task = VaporWordProblemTask(**kw, n_eval=20, n_train=300)
    train, heldout = task.splits()
    check_preference_rows(train + heldout)
    for r in train[:100] + heldout:
        (working_w, sum_w, tag_w), (working_l, sum_l, tag_l) = (SOLUTION.match(r[c]).groups() for c in ("chosen", "rejected"))
        assert working_w == working_l and sum_w == tag_w == r["answer"] and sum_l == tag_l
        assert eval(working_w) == int(r["answer"])                              # the working is the problem's sum
        assert 1 <= abs(int(tag_l) - int(r["answer"])) <= 2 and int(tag_l) >= 0


def test_the_reward_pays_chosen_and_not_rejected_nor_an_untagged_right_answer():
    """The task's rule is ``answer_tag``: chosen earns 1, rejected 0, and the right number without tags 0."""
    task = make_task("vapor_word_problems", n_eval=20)
    for r in task.splits()[1]:
        bare = r["chosen"].split(" <answer>")[0]                               # "13 - 4 = 9"
        assert task.reward(None, [r["chosen"], r["rejected"], bare], answer=[r["answer"]] * 3) == [1.0, 0.0, 0.0]


def test_rows_are_seeded():
    """The same seed gives the same pairs; another seed gives other problems."""
    a = make_task("vapor_word_problems", n_eval=20, seed=0).splits()
    assert make_task("vapor_word_problems", n_eval=20, seed=0).splits() == a
    assert make_task("vapor_word_problems", n_eval=20, seed=1).splits()[1] != a[1]


def test_spans_are_found_on_chosen_and_rejected_with_the_lab_tokenizer():
    """With character tokens the preference span of chosen is exactly the answer's digits, of rejected the
    near miss's; ``preference_batch`` finds both spans of every pair."""
    tok = build_tokenizer()
    task = make_task("vapor_word_problems", n_eval=20)
    rows = task.splits()[1]
    for r in rows:
        for col in ("chosen", "rejected"):
            span = find_span_token_indices(r[col], *TAGS, tok)
            assert r[col][span.start:span.stop] == SOLUTION.match(r[col]).group(3)
    batch = preference_batch(tok, [r["prompt"] for r in rows], [r["chosen"] for r in rows],
                             [r["rejected"] for r in rows], TAGS)
    assert batch.found.tolist() == [1] * len(rows)



def test_heldout_holds_no_training_problem():
    """The split is ``WordProblemTask``'s: train and held-out disjoint by ``problem_key`` (the multisets of
    added and of taken-away numbers), read back from the pairs' working."""
    task = make_task("vapor_word_problems", n_eval=50)
    train, heldout = task.splits()

    def key(row):
        tokens = SOLUTION.match(row["chosen"]).group(1).split()
        problem = (int(tokens[0]), *((tokens[i], int(tokens[i + 1])) for i in range(1, len(tokens), 2)))
        return task.problem_key(problem)
    assert len(heldout) == 50 and train
    assert not {key(r) for r in heldout} & {key(r) for r in train}
