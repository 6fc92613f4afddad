"""The code runner, its sandbox and the ``code`` reward.

Every bad completion (an infinite loop, a fork bomb, 10 GB allocated, a full disk, a socket, ...)
scores 0 with a feedback line that names the failure, the run goes on, and the host is unharmed (the
parent alive, no file written outside, no secret read, no connection made, no process left behind). Then: passing programs in both test forms,
the SDPO authors' feedback format and its cuts, the pool's order and timing, the test split and
the reward. Time limits are 1 s to keep the file fast on a loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import tempfile
import time
from pathlib import Path

import pytest

from sdpo_kit.rewards import make_reward
from sdpo_kit.sandbox.feedback import FORMAT_MESSAGE, TRUNCATED_MESSAGE
from sdpo_kit.sandbox.process import STARTUP_S, isolation_report, run_program
from sdpo_kit.sandbox.runner import (
    extract_code,
    outputs_match,
    parse_tests,
    run_tests,
    run_tests_many,
    score_completions,
    split_tests,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs a POSIX system")

ADD = [{"input": "1 2\n", "output": "3"}, {"input": "5 7\n", "output": "12"}]
ADD_OK = "a, b = map(int, input().split())\nprint(a + b)\n"
FAST = {"timeout_s": 1.0, "memory_mb": 512}


def block(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\n"


def parent_of(pid: int) -> int:
    """The parent pid from /proc (0 when the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def sandbox_processes() -> list[int]:
    """Live processes running the sandbox's child script (a fork keeps its parent's cmdline) that are
    this test process's descendants, or nobody's (an escaped process is re-parented to init). Another
    pytest-xdist worker's children, alive while it runs its own sandbox tests, are not counted."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if not (d.name.isdigit() and b"-S\x00child.py\x00" in (d / "cmdline").read_bytes()):
                continue
        except OSError:
            continue
        pid, chain = int(d.name), []
        p = parent_of(pid)
        while p > 1 and p != os.getpid() and len(chain) < 64:
            chain.append(p)
            p = parent_of(p)
        if p == os.getpid() or not chain:     # ours, or an orphan (its parent is init, or it is gone)
            out.append(pid)
    return out


def bad(code: str, tests=ADD, **kw):
    """Run a bad program; it must score 0 and leave no process behind."""
    r = run_tests(code, tests, **{**FAST, **kw})
    assert r.score == 0.0 and r.passed == 0, r
    assert r.feedback, "a failure always has feedback"
    assert sandbox_processes() == [], "a sandboxed process outlived its run"
    return r


# ---------------------------------------------------------------------------------------
# each bad completion is contained
# ---------------------------------------------------------------------------------------
def test_infinite_loop_hits_the_time_limit_and_skips_the_other_tests():
    """A loop costs one time limit (the second test is skipped), not one per test."""
    t0 = time.monotonic()
    r = bad("while True:\n    pass\n")
    assert r.status == "time_limit" and r.feedback.startswith("Time Limit Exceeded")
    assert "Last Executed Input\n1 2" in r.feedback
    assert [o.status for o in r.tests] == ["time_limit", "skipped"]
    assert time.monotonic() - t0 < FAST["timeout_s"] + STARTUP_S + 3.0


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="counts processes through /proc")
def test_fork_bomb_is_refused_after_a_bounded_probe():
    """First a bounded probe (50 forks, each child exits at once) shows the process cap holds;
    only then the real bomb, which must not start a single process and must leave none behind."""
    probe = ("import os\nok = 0\nfor _ in range(50):\n    try:\n        pid = os.fork()\n    except OSError:\n"
             "        continue\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n    ok += 1\nprint(ok)\n")
    run = run_program(probe, timeout_s=5)
    if run.stdout.strip() != b"0":
        pytest.fail(f"the process cap does not hold here (probe forked {run.stdout!r}); not running the bomb")
    r = bad("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert r.status == "time_limit"
    r = bad("import os\nwhile True:\n    os.fork()\n")
    assert r.status == "runtime_error" and "BlockingIOError" in r.feedback and "os.fork()" in r.feedback


def test_allocating_10_gb_is_a_memory_failure():
    r = bad("x = bytearray(10 * 1024 ** 3)\nprint(len(x))\n")
    assert r.status == "memory"
    assert r.feedback.startswith("Memory Limit Exceeded\nMemoryError")
    assert "Line 1 in <module> (Solution.py)" in r.feedback


def test_100_mb_printed_is_cut_at_the_cap():
    r = bad("import sys\nsys.stdout.write('x' * (100 * 1024 * 1024))\n")
    assert r.status == "wrong_answer"
    assert "Wrong Answer (output limit exceeded" in r.feedback
    assert len(r.feedback) <= 2000 and "x" * 250 + "..." in r.feedback


def test_sys_exit_before_printing_is_a_wrong_answer():
    r = bad("import sys\nsys.exit(0)\nprint(3)\n")
    assert r.status == "wrong_answer" and "Output\n(no output)\n\nExpected\n3" in r.feedback


def test_os_exit_is_a_wrong_answer_and_a_nonzero_code_a_runtime_error():
    assert bad("import os\nos._exit(0)\n").status == "wrong_answer"
    r = bad("import os\nos._exit(3)\n")
    assert r.status == "runtime_error" and "Exited with code 3" in r.feedback


def test_a_signal_to_the_parent_never_arrives():
    """SIGUSR1 to the parent: a handler here would record it (instead of the default, which
    would end the test run); it must not arrive, and the program's error is the feedback."""
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *a: got.append(a))
    try:
        r = bad("import os, signal\nos.kill(os.getppid(), signal.SIGUSR1)\nos.killpg(os.getpgid(os.getppid()), "
                "signal.SIGUSR1)\nprint(3)\n")
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert got == []
    assert r.status == "runtime_error" and ("PermissionError" in r.feedback or "ProcessLookupError" in r.feedback)


def test_writing_outside_the_temp_dir_fails(tmp_path):
    """Into pytest's temp dir, world-writable /tmp, and the repository: nothing is written (as root
    the child sees /tmp as an empty read-only tmpfs, so the first path may not even exist there)."""
    repo_file = Path(__file__).resolve().parents[1] / "sdpo-kit-pwned.txt"
    for target in (tmp_path / "pwned.txt", Path("/tmp/sdpo-kit-pwned.txt"), repo_file):
        r = bad(f"open({str(target)!r}, 'w').write('x')\nprint(3)\n")
        assert not target.exists(), target
        assert r.status == "runtime_error"
        assert any(e in r.feedback for e in ("PermissionError", "FileNotFoundError", "Read-only file system"))


def test_writing_inside_the_temp_dir_works_and_is_removed():
    """The program's own directory is writable and gone after the run. Another pytest-xdist worker's
    running sandboxes have directories of their own, which vanish within seconds; a leaked one stays."""
    def dirs():
        return set(Path(tempfile.gettempdir()).glob("sdpo-sandbox-*"))

    before = dirs()
    code = "import os\nopen('scratch.txt', 'w').write('7')\nprint(int(open('scratch.txt').read()) - 4)\n"
    r = run_tests(code, [{"input": "", "output": "3"}], **FAST)
    assert r.status == "passed"
    deadline = time.monotonic() + 10
    while (left := dirs() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, left


def test_filling_the_disk_stops_at_the_caps():
    """16 MiB a file (RLIMIT_FSIZE) everywhere; as root also 64 MiB in all (the temp dir's tmpfs)."""
    r = bad("open('big', 'wb').write(b'x' * (17 << 20))\n")
    assert r.status == "runtime_error" and "File too large" in r.feedback
    if not isolation_report()["disk"].startswith("tmpfs"):
        pytest.skip("no tmpfs over the temp dir here (not root): only the per-file cap")
    r = bad("for i in range(8):\n    open(f'big{i}', 'wb').write(b'x' * (15 << 20))\n")
    assert r.status == "runtime_error" and "No space left on device" in r.feedback


def test_the_parents_environment_is_not_visible(monkeypatch):
    """The child's environment is a fixed minimal one; as nobody, or under Landlock (no /proc),
    the parent's /proc/<pid>/environ cannot be read either."""
    monkeypatch.setenv("SDPO_KIT_TEST_SECRET", "hunter2-secret")
    r = bad("import os\nprint(os.environ.get('SDPO_KIT_TEST_SECRET'))\n")
    assert "Output\nNone\n" in r.feedback and "hunter2-secret" not in r.feedback
    run = run_program("import os\nprint(sorted(os.environ))\n")
    assert b"SDPO_KIT_TEST_SECRET" not in run.stdout and b"HOME" in run.stdout
    iso = isolation_report()
    if iso["user"] != "nobody" and not iso["landlock_abi"]:
        pytest.skip("same user as the parent and no Landlock: /proc/<parent>/environ is readable here")
    r = bad("import os\nprint(open(f'/proc/{os.getppid()}/environ', 'rb').read())\n")
    assert r.status == "runtime_error" and "PermissionError" in r.feedback and "hunter2-secret" not in r.feedback


def test_opening_a_socket_reaches_nothing():
    """A listener here on 127.0.0.1: the program's connection never arrives."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        r = bad(f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
                "s.sendall(b'pwned')\nprint(3)\n")
        with pytest.raises(socket.timeout):
            server.accept()
    assert r.status == "runtime_error" and "Error" in r.feedback.splitlines()[1]
    assert isolation_report()["network"] in ("netns", "sockets-disabled")


def test_deep_recursion_is_a_runtime_error_or_a_limit():
    r = bad("def f(n):\n    return f(n + 1)\nf(0)\n")
    assert r.status == "runtime_error" and "RecursionError" in r.feedback and "Line 2 in f (Solution.py)" in r.feedback
    r = bad("import sys\nsys.setrecursionlimit(10 ** 8)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n", memory_mb=256)
    assert r.status in ("runtime_error", "memory", "time_limit")


def test_syntax_error_names_the_line():
    r = bad("def f(:\n    pass\n")
    assert r.status == "runtime_error"
    assert "SyntaxError" in r.feedback and "  def f(:\nLine 1 in <module> (Solution.py)" in r.feedback


def test_no_code_block_is_a_format_failure_and_an_open_one_a_truncation():
    results = score_completions(["print(3)", "```python\nprint(3)\n", "```\nprint(3)\n```"], [ADD] * 3)
    assert [r.status for r in results] == ["format"] * 3 and all(r.score == 0 for r in results)
    assert results[0].feedback == FORMAT_MESSAGE and "```python" in FORMAT_MESSAGE
    assert results[1].feedback == TRUNCATED_MESSAGE


def test_output_that_is_not_utf8_is_read_with_replacements():
    r = bad("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe3\\n')\n")
    assert r.status == "wrong_answer" and "\ufffd\ufffd3" in r.feedback


def test_reading_more_stdin_than_given_is_an_eof_error():
    r = bad("a = input()\nb = input()\nprint(a)\n")
    assert r.status == "runtime_error" and "EOFError: EOF when reading a line" in r.feedback
    assert "  b = input()\nLine 2 in <module> (Solution.py)" in r.feedback


# ---------------------------------------------------------------------------------------
# results the program cannot forge: the expected output stays in the parent
# ---------------------------------------------------------------------------------------
# writes records to every descriptor the child holds past stderr (the report pipe is one of them)
FORGE = ("import os\nFAKE = b'{\"kind\": \"result\", \"value\": 3}\\n{\"kind\": \"passed\"}\\n'\n"
         "print(FAKE.decode())\nfor fd in range(3, 64):\n    try:\n        os.write(fd, FAKE)\n"
         "    except OSError:\n        pass\n")
CALL_ADD = [{"fn_name": "add", "args": [1, 2], "expected": 3}, {"fn_name": "add", "args": [5, 7], "expected": 12}]


def test_a_forged_passed_record_cannot_turn_a_failure_into_a_pass():
    """A program writes ``result 3`` (test 1's answer) and ``passed`` records to stdout and to the
    report pipe. Next to the harness's own result that is two results: the test fails. With the
    harness's record suppressed (``os._exit`` in the function) the forged claim is still compared,
    so it passes only where 3 is the right answer. In a stdin test the records are just output."""
    r = bad(FORGE + "def add(a, b):\n    return a - b\n", CALL_ADD)
    assert r.status == "wrong_answer" and "more than one result reported" in r.feedback
    r = run_tests(FORGE + "def add(a, b):\n    os._exit(0)\n", CALL_ADD, **FAST)
    assert [o.status for o in r.tests] == ["passed", "wrong_answer"] and r.score == 0.0
    assert "Output\n3\n\nExpected\n12" in r.feedback
    r = bad(FORGE, [{"input": "1 2\n", "output": "3"}])
    assert r.status == "wrong_answer" and '"kind": "passed"' in r.feedback


def test_junk_on_the_report_pipe_fails_the_program_not_the_run():
    """Records the parent cannot read (a JSON list, a result without a value, an error whose frames
    are a number) are dropped or cleaned: the program fails, the caller gets a result, no exception."""
    junk = ("import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'[1]\\n{\"kind\": \"result\"}\\n"
            "{\"kind\": \"error\", \"frames\": 5}\\nnot json\\n')\n    except OSError:\n        pass\n")
    r = bad(junk + "def add(a, b):\n    return a + b\n", CALL_ADD[:1])
    assert r.status == "runtime_error" and r.feedback.startswith("Runtime Error\nError")
    r = bad(junk.replace("error", "ready") + "def add(a, b):\n    return a - b\n", CALL_ADD[:1])
    assert r.status == "wrong_answer" and "limits" in r.isolation   # the child's own ready record


SPY = """import gc, os, sys
needle = "7f" + "3a"  # built at run time, so the source holds no copy of it
def strings(x):
    if isinstance(x, dict):
        return [*x, *x.values()]
    return list(x) if isinstance(x, (list, tuple, set, frozenset)) else []
reachable = [s for o in gc.get_objects() for s in strings(o)] + sys.argv + list(os.environ.values()) + os.listdir(".")
found = sorted({s for s in reachable if isinstance(s, (str, bytes)) and needle in str(s) and s != needle})
try:
    found += ["cmdline"] if needle.encode() in open("/proc/self/cmdline", "rb").read() else []
except OSError:  # Landlock keeps /proc out
    pass
"""


def test_the_child_never_sees_the_expected_output():
    """Every string the program can reach (the contents of every live container, argv, the
    environment, the files beside it, its command line, stdin) holds no trace of the expected
    output, in either test form. The control: where the needle is (the arguments), it is found."""
    probe = SPY + "def probe(x):\n    return found\n"
    r = bad(probe, [{"fn_name": "probe", "args": ["x"], "expected": "secret-7f3a"}])
    assert r.tests[0].output == "[]", r.feedback
    assert "secret-7f3a" in bad(probe, [{"fn_name": "probe", "args": ["secret-7f3a"], "expected": 0}]).tests[0].output
    r = bad(SPY + "found += ['stdin'] if needle in sys.stdin.read() else []\nprint(found)\n",
            [{"input": "x\n", "output": "secret-7f3a"}])
    assert r.tests[0].output == "[]", r.feedback


# ---------------------------------------------------------------------------------------
# passing programs, both test forms
# ---------------------------------------------------------------------------------------
def test_stdin_program_passes_with_lcb_comparison():
    r = run_tests(ADD_OK, ADD, **FAST)
    assert (r.status, r.passed, r.total, r.score, r.feedback) == ("passed", 2, 2, 1.0, "")
    assert r.isolation.get("limits"), "the child reports what it locked down"
    assert outputs_match("1.0 2\n\n", "1 2.00") and outputs_match(" a \nb", "a\nb ")
    assert not outputs_match("1 2\n3", "1 2") and not outputs_match("1.5", "1.50001")


def test_call_based_function_class_and_lcb_string_forms():
    tests = [{"fn_name": "add", "args": [1, 2], "expected": 3}, {"fn_name": "add", "args": {"a": 2, "b": 2},
                                                                     "expected": 4}]
    assert run_tests("def add(a, b):\n    return a + b\n", tests, **FAST).status == "passed"
    cls = "class Solution:\n    def pair(self, xs):\n        return (min(xs), max(xs))\n"
    lcb = [{"fn_name": "pair", "input": "[3, 1, 2]", "output": "[1, 3]"}]
    assert run_tests(cls, lcb, **FAST).status == "passed"
    r = run_tests("def add(a, b):\n    return a - b\n", tests, **FAST)
    assert r.status == "wrong_answer" and "Input\n1\n2\n\nOutput\n-1\n\nExpected\n3" in r.feedback
    r = run_tests("def add(a, b):\n    return {1, 2}\n", tests[:1], **FAST)
    assert r.status == "runtime_error" and "Non-serializable result type: set" in r.feedback


def test_parse_tests_reads_json_and_apps_forms_and_names_errors():
    assert parse_tests(json.dumps(ADD)) == ADD
    assert parse_tests({"inputs": ["1\n"], "outputs": ["2\n"]}) == [{"input": "1\n", "output": "2\n"}]
    for broken in ("not json", [], [{"x": 1}], [3]):
        with pytest.raises(ValueError):
            parse_tests(broken)


def test_extract_code_takes_the_last_python_block():
    text = "```python\nprint(1)\n```\nbetter:\n```py\nprint(2)\n```\n```text\nno\n```"
    assert extract_code(text) == "print(2)\n"
    assert extract_code("no code") is None and extract_code("") is None


# ---------------------------------------------------------------------------------------
# feedback format (lasgroup/SDPO format_test_feedback) and its cuts
# ---------------------------------------------------------------------------------------
def test_runtime_error_is_shown_alone_even_after_wrong_answers():
    tests = [{"input": "1\n", "output": "9"}, {"input": "0\n", "output": "9"}]
    r = run_tests("n = int(input())\nprint(10 // n)\n", tests, **FAST)
    assert r.status == "runtime_error" and r.passed == 0
    assert r.feedback.startswith("Runtime Error\nZeroDivisionError") and "Wrong Answer" not in r.feedback
    assert r.feedback.endswith("Last Executed Input\n0")


def test_wrong_answers_show_the_two_shortest_with_cuts():
    tests = [{"input": "x" * 40 + "\n", "output": "no"}, {"input": "a\n", "output": "no"},
             {"input": "\n".join(["y" * 400] * 20) + "\n", "output": "no"}, {"input": "bb\n", "output": "no"},
             {"input": "ok\n", "output": "ok"}]
    r = run_tests("import sys\nprint(sys.stdin.read().strip() or 'ok')\nprint('debug', file=sys.stderr)\n", tests,
                  **FAST)
    assert (r.passed, r.status) == (1, "wrong_answer")
    assert r.feedback.startswith("Test Case 2: Wrong Answer\n\nInput\na\n\nOutput\na\n\nExpected\nno\n\n"
                                 "Debug Output\ndebug\n\nTest Case 4: Wrong Answer")
    assert "Test Case 1" not in r.feedback and "Test Case 3" not in r.feedback
    long_input = [{"input": "y" * 400 + "\n" + "y\n" * 19, "output": "no"}]
    r = run_tests("import sys\nprint(sys.stdin.readline())\n", long_input, **FAST)
    assert "Input\n" + "y" * 250 + "...\ny\n" in r.feedback and "... (12 more lines)" in r.feedback
    assert "Output\n" + "y" * 250 + "...\n\nExpected\nno" in r.feedback


def test_feedback_is_cut_to_2000_characters():
    tests = [{"input": "1\n", "output": "2"}]
    code = "import sys\nfor i in range(50):\n    print('e' * 299, file=sys.stderr)\nprint(1)\n"
    long_input = [{"input": "\n".join(["z" * 300] * 8) + "\n", "output": "2"}]
    r = run_tests(code, tests + long_input, **FAST)
    assert len(r.feedback) == 2000 and r.feedback.startswith("Test Case 1: Wrong Answer")


# ---------------------------------------------------------------------------------------
# the pool, the split, the reward
# ---------------------------------------------------------------------------------------
def test_pool_keeps_input_order_and_a_loop_delays_nobody_past_its_limit():
    jobs = [("while True:\n    pass\n", ADD)] + [(f"input()\nprint({i})\n", [{"input": "0\n", "output": str(i)}])
                                                  for i in range(6)]
    t0 = time.monotonic()
    results = run_tests_many(jobs, workers=2, **FAST)
    elapsed = time.monotonic() - t0
    assert [r.status for r in results] == ["time_limit"] + ["passed"] * 6
    assert elapsed < FAST["timeout_s"] + STARTUP_S + 3.0, elapsed


def test_split_is_deterministic_half_and_evaluation_sees_all():
    tests = [{"input": f"{i}\n", "output": str(i)} for i in range(10)]
    reward, evaluation = split_tests(tests)
    assert len(reward) == 5 and evaluation == tests
    assert split_tests(json.dumps(tests))[0] == reward and split_tests(tests, seed=0)[0] == reward
    assert [t for t in tests if t in reward] == reward            # the original order is kept
    assert any(split_tests(tests, seed=s)[0] != reward for s in range(1, 5))
    assert len(split_tests(tests[:1])[0]) == 1 and split_tests(tests, 1.0)[0] == tests


def test_code_reward_scores_and_feedback_through_make_reward():
    tests = json.dumps(ADD + [{"input": "2 2\n", "output": "4"}, {"input": "0 0\n", "output": "0"}])
    (reward,) = make_reward({"type": "code", "test_fraction": 1.0, "timeout_s": 1.0})
    wrong = block("a, b = map(int, input().split())\nprint(a + b if a == b else 0)\n")
    completions = [block(ADD_OK), wrong, "no code", [{"role": "assistant", "content": block(ADD_OK)}]]
    out = reward(["p"] * 4, completions, tests=[tests, ADD, ADD, ADD])
    assert [o["score"] for o in out] == [1.0, 0.0, 0.0, 1.0]
    assert out[0]["feedback"] == "" and "Wrong Answer" in out[1]["feedback"] and out[2]["feedback"] == FORMAT_MESSAGE
    (partial,) = make_reward({"type": "code", "partial": True, "test_fraction": 1.0, "timeout_s": 1.0})
    assert partial(["p"], [wrong], tests=[tests])[0]["score"] == pytest.approx(0.5)
    (default,) = make_reward({"type": "code"})
    assert default.required_columns == ("tests",)
    with pytest.raises(ValueError, match="unknown option"):
        make_reward({"type": "code", "timeout": 1})
