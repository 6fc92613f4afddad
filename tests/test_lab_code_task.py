"""The tiny lab's code task (``tasks/code.py``) and the one-child-per-program runner
(``sandbox/batch.py``), with real sandbox runs."""

import pytest

from sdpo_kit import make_task
from sdpo_kit.sandbox.batch import run_program_tests, run_programs_many
from sdpo_kit.sandbox.runner import run_tests
from sdpo_kit.tasks import TASKS, Task
from sdpo_kit.tasks.code import CodeTask, expression, hidden_tests, program


@pytest.fixture(scope="module")
def task():
    return CodeTask(timeout_s=0.5)   # the time-limit case runs four times


def test_registered_and_follows_protocol(task):
    """``lab_code`` is in TASKS, builds through make_task with the lab's knobs, and is a Task."""
    assert "lab_code" in TASKS
    t = make_task("lab_code", digits=1, terms=3, n_eval=20, seed=0)
    assert isinstance(t, Task) and t.name == "lab_code"


def test_prompt_and_answer(task):
    """The prompt shows f at the shown inputs; the answer is the canonical a*x+b."""
    row = task.row((3, 2), (1, 2, 3))
    assert row["prompt"][0]["content"] == "f(1)=5 f(2)=8 f(3)=11 f(x)="
    assert row["answer"] == "3*x+2"
    assert [t["expected"] for t in hidden_tests("3*x+2")][:3] == [2, 5, 14]   # x = 0, 1, 4


def test_heldout_disjoint_by_function(task):
    """No held-out function appears in training under any shown inputs; rows are deterministic."""
    train, held = task.splits()
    assert len(held) == task.n_eval and train
    assert not {r["answer"] for r in train} & {r["answer"] for r in held}
    # several surface forms per held-out function: the split is by function, not by prompt
    assert len({r["prompt"][0]["content"] for r in held}) > len({r["answer"] for r in held})
    assert task.splits() == (train, held)


# (completion, correct, status of the first failing test, text the feedback holds)
CASES = [
    ("3*x+2", True, "passed", ""),
    ("2+x*3", True, "passed", ""),                      # any equal expression is right
    ("3*x+2\nanything after the first line", True, "passed", ""),
    ("3*x+1", False, "wrong_answer", "Expected\n2"),
    ("x", False, "wrong_answer", "Wrong Answer"),
    ("3*x+", False, "runtime_error", "SyntaxError"),
    ("x/0", False, "runtime_error", "ZeroDivisionError"),
    ("__import__('os').system('touch /tmp/lab_code_pwned')", False, "wrong_answer", "Wrong Answer"),
    ("open('/etc/passwd').read()", False, "runtime_error", "Error"),
    ("9**9**9", False, "time_limit", "Time Limit Exceeded"),
    ("x) if 0 else (3*x+2", True, "passed", ""),        # odd but equal: only behaviour counts
]


@pytest.mark.parametrize("completion,correct,status,text", CASES)
def test_completions_table(task, completion, correct, status, text):
    """Right, wrong, malformed and dangerous expressions get the right verdict and feedback."""
    result = task.results([completion], ["3*x+2"])[0]
    assert task.reward(None, [completion], ["3*x+2"]) == [float(correct)]
    assert result.status == status
    assert text in result.feedback
    assert "3*x+2" not in task.feedback(completion, "3*x+2")   # never the answer
    if not correct:
        assert not task.is_correct(completion, "3*x+2")


def test_dangerous_expression_contained(task):
    """A shell command from the expression does not run (no new processes in the sandbox)."""
    import os
    task.results(["__import__('os').system('touch /tmp/lab_code_pwned')"], ["3*x+2"])
    assert not os.path.exists("/tmp/lab_code_pwned")


def test_empty_completion(task):
    """An empty completion fails without running and gets a format message."""
    assert task.reward(None, ["", "  \n"], ["3*x+2", "3*x+2"]) == [0.0, 0.0]
    assert expression("   ") is None and program(None) is None
    assert "empty" in task.feedback("", "3*x+2")


def test_one_child_matches_one_child_per_test():
    """``run_program_tests`` gives the same per-test verdicts as ``run_tests`` (child per test)."""
    tests = hidden_tests("3*x+2")
    for code in ("def f(x):\n    return 3*x+2\n", "def f(x):\n    return 10 // (x - 4)\n",
                 "def f(x):\n    return [x]\n", "def f(x) return x\n"):
        one, per_test = run_program_tests(code, tests), run_tests(code, tests)
        assert [o.status for o in one.tests] == [o.status for o in per_test.tests], code
        assert (one.passed, one.score) == (per_test.passed, per_test.score)


def forging(record: str, tail: str) -> str:
    """A program that writes ``record`` (a Python dict literal) as a report line to every open fd (the
    report pipe's number is the parent's, higher under pytest), then runs ``tail``."""
    return ("import os, json\n"
            "for fd in range(3, 1024):\n"
            "    try:\n"
            f"        os.write(fd, (json.dumps({record}) + '\\n').encode())\n"
            "    except OSError:\n"
            "        pass\n" + tail)


def test_forged_report_cannot_pass():
    """A program that writes its own result records to the report pipe gets no pass."""
    forged = forging("{'kind': 'result', 'value': [{'value': 2}] * 6}", "def f(x):\n    return 0\n")
    r = run_program_tests(forged, hidden_tests("3*x+2"))
    assert r.passed == 0 and r.score == 0.0
    assert "more than one result reported" in r.feedback   # the forged record did reach the pipe


def test_a_result_record_without_a_value_is_contained():
    """A program that writes one result record with no value, then exits before the harness
    reports, fails its tests with a clear line and does not crash the caller (it used to raise
    KeyError in the parent)."""
    forged = forging("{'kind': 'result'}", "os._exit(0)\n")
    r = run_program_tests(forged, hidden_tests("3*x+2"))
    assert r.passed == 0 and r.score == 0.0
    assert "did not report one result" in r.feedback


def test_near_miss_form_is_what_python_reads():
    """``ANSWER_RE`` takes only what Python reads as a*x+b: no leading zeros, ASCII digits, no newline."""
    from sdpo_kit.tasks.code import ANSWER_RE

    assert ANSWER_RE.fullmatch("3*x+2") and ANSWER_RE.fullmatch("10*x+0")
    assert not any(ANSWER_RE.fullmatch(t) for t in ("03*x+2", "3*x+2\n", "\u0663*x+2", "3*x+ 2"))


def test_dedup_runs_each_program_once():
    """Identical (program, tests) jobs run once; results come back in input order."""
    right, wrong = "def f(x):\n    return 3*x+2\n", "def f(x):\n    return x\n"
    tests = hidden_tests("3*x+2")
    stats = {}
    out = run_programs_many([(right, tests), (wrong, tests), (right, tests), (None, tests)], workers=2, stats=stats)
    assert stats == {"jobs": 4, "distinct": 3}
    assert [r.score for r in out] == [1.0, 0.0, 1.0, 0.0]
    assert out[3].status == "format"


def test_mixed_function_names_rejected():
    """Tests of two different functions cannot share one child."""
    with pytest.raises(ValueError, match="one function"):
        run_program_tests("def f(x): return x", [{"fn_name": "f", "args": [1], "expected": 1},
                                                 {"fn_name": "g", "args": [1], "expected": 1}])


def test_sft_rows_copy_hints(task):
    """Task rows target the answer; hinted rows target the hint, which is not always the answer."""
    train, _ = task.splits()
    rows = task.sft_rows(train[:400], copy_fraction=1.0, seed=0)
    kinds = [r["kind"] for r in rows]
    assert kinds.count("task") == 400 and kinds.count("copy") == 400
    copies = [r for r in rows if r["kind"] == "copy"]
    assert all(r["prompt"][0]["content"].endswith("Correct answer: " + r["completion"]) for r in copies)
    task_by_prompt = {r["prompt"][0]["content"]: r["completion"] for r in rows if r["kind"] == "task"}
    wrong = [r for r in copies if task_by_prompt[r["prompt"][0]["content"].split("\n")[0]] != r["completion"]]
    assert 100 < len(wrong) < 300   # about half carry another function's expression


def test_context_rows_for_the_dial(task):
    """The skill dial's teacher prompts work on lab_code: near misses are wrong expressions of the
    answer's form, their feedback is the sandbox's, and every target is the right answer."""
    import random

    from sdpo_kit.lab.skill import context_rows
    train, _ = task.splits()
    rng = random.Random(0)
    misses = [task.near_miss("3*x+2", rng) for _ in range(50)]
    assert "3*x+2" not in misses and all(hidden_tests(m) for m in misses)
    rows = context_rows(task, train[:30], seed=0, templates="compact", feedback_share=1.0)
    assert all(r["completion"] == t["answer"] for r, t in zip(rows, train))
    assert all("Wrong Answer" in r["prompt"][0]["content"] for r in rows)


def test_warm_start_builds_and_evaluates(tmp_path, monkeypatch):
    """A few-step warm start on lab_code builds, and evaluate returns an accuracy in [0, 1]. The
    learning claim (non-zero held-out accuracy) is measured, not tested."""
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path))
    from sdpo_kit.lab.model import LabConfig, warm_start
    cfg = LabConfig(task="lab_code", n_eval=8, sft_steps=3, hidden_size=16, intermediate_size=32, sft_batch_size=4)
    model, tok = warm_start(cfg, verbose=False)
    acc = CodeTask(n_eval=8).evaluate(model, tok)
    assert 0.0 <= acc <= 1.0


def test_near_miss_feedback_matches_the_sandbox(task):
    """The dial's near misses get, rendered in the parent, exactly the text the sandbox gives;
    a string that is not of the form a*x+b is refused (model code is always run sandboxed)."""
    import random

    rng = random.Random(3)
    train, _ = task.splits()
    answers = [r["answer"] for r in train[:12]]
    wrongs = [task.near_miss(a, rng) for a in answers]
    assert task.near_miss_feedback(wrongs, answers) == task.feedback_many(wrongs, answers)
    assert all("Wrong Answer" in f and "Expected" in f for f in task.near_miss_feedback(wrongs, answers))
    with pytest.raises(ValueError, match="a\\*x\\+b"):
        task.near_miss_feedback(["__import__('os')"], ["3*x+2"])


def test_feedback_reward_uses_the_tasks_checker(task):
    """``make_reward("feedback", task=lab_code)`` scores by running the programs: any expression
    equal to f passes, a wrong one gets the tests' feedback (never the answer), an empty one the
    empty-answer line."""
    from sdpo_kit.rewards import make_reward
    from sdpo_kit.tasks.code import EMPTY_FEEDBACK

    (fn,) = make_reward("feedback", task=task)
    out = fn(None, ["2+x*3", "3*x+3", ""], answer=["3*x+2"] * 3)
    assert [o["score"] for o in out] == [1.0, 0.0, 0.0]
    assert out[0]["feedback"] == "" and out[2]["feedback"] == EMPTY_FEEDBACK
    assert "Wrong Answer" in out[1]["feedback"] and "3*x+2" not in out[1]["feedback"]


def test_the_teacher_prompt_of_a_near_miss(task):
    """The example of docs/concepts/sdpo.md ("Feedback from code"): on a held-out function a near
    miss fails with the tests' feedback (never the answer, nor an equal expression), a syntax error is named,
    an expression equal to f passes with no feedback, and the teacher prompt SDPO builds with
    configs/sdpo_code_lab.yaml's templates is the question followed by that feedback."""
    import random

    from sdpo_kit.rewards import make_reward
    from sdpo_kit.text.reprompt import reprompt

    row = task.splits()[1][0]
    answer = row["answer"]
    near = task.near_miss(answer, random.Random(0))
    a, b = (int(v) for v in answer.replace("x+", "").split("*"))
    same_f = f"{b}+x*{a}"                                            # right, written differently
    (fn,) = make_reward("feedback", task=task)
    scored = fn(None, [near, same_f, "x*("], answer=[answer] * 3)
    assert [s["score"] for s in scored] == [0.0, 1.0, 0.0] and scored[1]["feedback"] == ""
    assert "SyntaxError" in scored[2]["feedback"]
    assert answer not in scored[0]["feedback"] and same_f not in scored[0]["feedback"]
    templates = dict(reprompt_template="{prompt}{solution}{feedback}", feedback_template="\nFeedback: {feedback_raw}")
    text = reprompt(row["prompt"], None, scored[0]["feedback"], **templates)[-1]["content"]
    assert text.startswith(row["prompt"][-1]["content"]) and scored[0]["feedback"] in text
