"""The shipped code problems and the loader: the data is well formed, every reference solution
(tests/data/code_problem_references.json, not shipped) passes all its tests through the sandbox,
a trivial program earns no reward on any problem, the reward's half of the tests is deterministic
and inside the evaluation set, and LiveCodeBench-format records (tests/data/livecodebench_sample.jsonl,
written in that format for this test, private tests compressed as code_generation_lite ships
them) load into the same rows.
"""

from __future__ import annotations

import base64
import collections
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from sdpo_kit.rewards import load_code_problems, make_reward, read_code_problems, run_tests, run_tests_many
from sdpo_kit.rewards.code_problems import PROBLEMS_PATH, lcb_test_cases
from sdpo_kit.sandbox.runner import parse_tests, split_tests

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs a POSIX system")

LCB_SAMPLE = Path(__file__).with_name("data") / "livecodebench_sample.jsonl"
REFERENCES = json.loads((Path(__file__).with_name("data") / "code_problem_references.json").read_text())
LCB_REFERENCES = {  # LiveCodeBench ships no solutions; the second leans on the predefined typing names
    "abc900_a": "input()\nprint(sum(int(x) % 2 == 0 for x in input().split()))\n",
    "9001": "class Solution:\n    def countAbove(self, nums: List[int], k: int) -> int:\n"
            "        return sum(x > k for x in nums)\n",
}


def trivial_program(tests: list[dict]) -> str:
    """A program that ignores its input and answers 0 (in the test's form)."""
    fn = next((t["fn_name"] for t in tests if "fn_name" in t), None)
    return f"{fn} = lambda *args, **kwargs: 0\n" if fn else "print(0)\n"


def expected(test: dict) -> str:
    return json.dumps(test["expected"]) if "fn_name" in test else test["output"].strip()


def test_the_shipped_problems_are_well_formed():
    """About 40 problems with unique ids, 6 to 10 tests each, both forms well represented, each with
    a reference solution in tests/data and none in the shipped file; the reward's half of each
    problem holds two different expected outputs, so no constant answer can earn the reward."""
    problems = read_code_problems()
    assert 35 <= len(problems) <= 45 and len({p["problem_id"] for p in problems}) == len(problems)
    forms = collections.Counter("call" if "fn_name" in p["tests"][0] else "stdin" for p in problems)
    assert forms["call"] >= 15 and forms["stdin"] >= 15, forms
    assert sorted(REFERENCES) == sorted(p["problem_id"] for p in problems)
    for p in problems:
        tests = parse_tests(p["tests"])
        assert 6 <= len(tests) <= 10 and REFERENCES[p["problem_id"]] and p["question"], p["problem_id"]
        assert "reference" not in p, p["problem_id"]
        assert len({expected(t) for t in split_tests(tests)[0]}) >= 2, p["problem_id"]


def test_rows_are_chat_prompts_with_the_reward_half_for_training_and_all_for_evaluation():
    """Train rows hold split_tests' deterministic half (in the tests' order, inside the evaluation
    tests), eval rows every test; the same problems in the same order; the prompt is one user
    message with the question and the code-block format; no reference is in a row."""
    train, evaluation = load_code_problems(), load_code_problems(split="eval")
    assert load_code_problems(split="train") == train
    assert [r["problem_id"] for r in train] == [r["problem_id"] for r in evaluation]
    for tr, ev, p in zip(train, evaluation, read_code_problems()):
        shown, every = json.loads(tr["tests"]), json.loads(ev["tests"])
        assert every == parse_tests(p["tests"]) and tr["n_tests"] == ev["n_tests"] == len(every)
        assert shown == split_tests(every)[0] and len(shown) == len(every) // 2
        assert [t for t in every if t in shown] == shown
        (message,) = tr["prompt"]
        assert message["role"] == "user" and p["question"].strip() in message["content"]
        assert "```python" in message["content"] and (p["starter_code"].strip() or "stdin") in message["content"]
        assert (tr["form"] == "call") == bool(tr["fn_name"]) and tr["split"] == "train" and tr["source"] == "sdpo_kit"
        assert "reference" not in tr and REFERENCES[p["problem_id"]] not in json.dumps(tr)
    with pytest.raises(ValueError, match="split must be one of"):
        load_code_problems(split="test")


def test_every_reference_passes_and_a_trivial_program_earns_nothing():
    """Each reference solution passes every one of its problem's tests in the sandbox (the pool
    runs them); a program that answers 0 whatever the input fails the reward's half of every problem."""
    problems = read_code_problems()
    jobs = [(REFERENCES[p["problem_id"]], p["tests"]) for p in problems]
    jobs += [(trivial_program(parse_tests(p["tests"])), split_tests(p["tests"])[0]) for p in problems]
    results = run_tests_many(jobs, timeout_s=5.0, memory_mb=512)
    references, trivial = results[:len(problems)], results[len(problems):]
    failed = {p["problem_id"]: r.feedback for p, r in zip(problems, references) if r.status != "passed"}
    assert not failed, failed
    assert sum(r.total for r in references) == sum(len(p["tests"]) for p in problems)
    assert [p["problem_id"] for p, r in zip(problems, trivial) if r.score != 0.0] == []


def test_the_code_reward_scores_loaded_rows():
    """A reference in a ```python block scores 1 with empty feedback on its train row; the trivial
    program scores 0 with feedback, in both forms."""
    rows = {r["problem_id"]: r for r in load_code_problems()}
    picked = [rows["sum_two"], rows["two_sum"]]
    (reward,) = make_reward({"type": "code", "timeout_s": 5.0})
    completions = [f"```python\n{REFERENCES[r['problem_id']]}```" for r in picked]
    completions += [f"```python\n{trivial_program(json.loads(r['tests']))}```" for r in picked]
    out = reward([r["prompt"] for r in picked * 2], completions, tests=[r["tests"] for r in picked * 2])
    assert [o["score"] for o in out] == [1.0, 1.0, 0.0, 0.0]
    assert out[0]["feedback"] == out[1]["feedback"] == "" and all("Wrong Answer" in o["feedback"] for o in out[2:])


def test_livecodebench_records_load_the_same_way():
    """Public and private tests (the private ones compressed, or plain JSON text) are joined, the
    functional ones called by metadata's func_name with LiveCodeBench's one-JSON-value-a-line
    arguments; the starter code is in the prompt; a right program passes every test, a wrong one fails."""
    train, evaluation = load_code_problems(LCB_SAMPLE), load_code_problems(LCB_SAMPLE, split="eval")
    assert [(r["problem_id"], r["form"], r["fn_name"], r["n_tests"]) for r in evaluation] == [
        ("abc900_a", "stdin", None, 4), ("9001", "call", "countAbove", 4)]
    assert [r["source"] for r in evaluation] == ["livecodebench/atcoder", "livecodebench/leetcode"]
    assert json.loads(evaluation[1]["tests"])[0] == {"fn_name": "countAbove", "args": [[1, 5, 3], 2], "expected": 2}
    assert "def countAbove(self, nums: List[int], k: int)" in evaluation[1]["prompt"][0]["content"]
    assert "Read the inputs from stdin" in evaluation[0]["prompt"][0]["content"]
    assert all(len(json.loads(r["tests"])) == 2 for r in train)
    for row in evaluation:
        assert run_tests(LCB_REFERENCES[row["problem_id"]], row["tests"], timeout_s=5.0).status == "passed"
        assert run_tests(trivial_program(json.loads(row["tests"])), row["tests"], timeout_s=5.0).score == 0.0


def test_livecodebench_fields_that_are_not_plain_data_are_refused(tmp_path):
    """A compressed test field whose pickle names a class or function is refused (a pickle that
    imports runs code); functional tests without a func_name, and broken tests, name the problem."""
    evil = base64.b64encode(zlib.compress(pickle.dumps(collections.OrderedDict()))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        lcb_test_cases(evil)
    record = json.loads(LCB_SAMPLE.read_text().splitlines()[1])
    path = tmp_path / "lcb.jsonl"
    path.write_text(json.dumps({**record, "metadata": "{}"}) + "\n")
    with pytest.raises(ValueError, match="9001: functional tests but no metadata.func_name"):
        load_code_problems(path)
    path.write_text(json.dumps([{"problem_id": "p1", "question": "q", "tests": [{"x": 1}]}]))
    with pytest.raises(ValueError, match="problem p1: test 0 has neither"):
        load_code_problems(path)


def test_the_problem_file_ships_with_the_package():
    """The data file sits inside the package and pyproject declares it as package data (the
    references, in tests/data, are no package's data)."""
    assert PROBLEMS_PATH.is_file() and PROBLEMS_PATH.parent.parent.name == "rewards"
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"sdpo_kit.rewards" = ["data/*.jsonl"]' in pyproject
