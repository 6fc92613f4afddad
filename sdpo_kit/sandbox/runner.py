"""Score model-written Python against test cases: the runner and its worker pool.

    extract_code(completion)      the last ```python block (``None``: a format failure)
    run_tests(code, tests)        one program, each test in a fresh sandboxed child (``process.py``)
                                  -> ``CodeResult`` (passed, total, status, feedback, per-test outcomes)
    run_tests_many(jobs)          many (code, tests) pairs on a pool of workers, results in input order
    score_completions(texts, tests_per_row)  ``run_tests_many`` from completions (no block: a format result)
    split_tests(tests)            the deterministic half the reward sees (evaluation sees all)

Tests come in LiveCodeBench's two forms. stdin: ``{"input": str, "output": str}``, graded as
LiveCodeBench does (lines stripped, line counts equal, each line equal as text or as a list of
decimals, so "1.0" matches "1"). Call-based: ``{"fn_name", "args", "expected"}``: the function
(or ``Solution().fn_name``) is called with ``args`` (a list, a dict of keyword arguments, or
LiveCodeBench's string of one JSON value a line, in which case ``expected`` is JSON text too);
its return value (tuples as lists) must equal ``expected``. Either way the child gets only the
input (stdin text, or the arguments) and never the expected output; the comparison happens here,
in the parent, on what the child reports (stdout, or the return value as JSON). A program that
writes its own records to the harness's report pipe can claim an output but not a pass: every
claim is compared, and two result records for one call fail the test. The APPS form
``{"inputs": [...], "outputs": [...], "fn_name"?}`` is read too.

Statuses: passed, wrong_answer, runtime_error, time_limit, memory, format. After a test times
out the program's remaining tests are skipped (they count as failed): a program that loops
costs one time limit, not one per test. Feedback: ``feedback.py``; the ``code`` reward built on
``score_completions``: ``sdpo_kit/rewards/code.py``.

Left out: languages other than Python, special judges (any valid answer), float tolerances
beyond LiveCodeBench's exact decimals.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from sdpo_kit.sandbox.feedback import format_feedback, render_feedback, short_trace
from sdpo_kit.sandbox.process import OUTPUT_LIMIT, ProgramRun, run_program

STATUSES = ("passed", "wrong_answer", "runtime_error", "time_limit", "memory", "format")
FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
OPEN_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n", re.IGNORECASE)
CRASHES = {signal.SIGSEGV: "Segmentation fault", signal.SIGBUS: "Bus error", signal.SIGABRT: "Aborted",
           signal.SIGFPE: "Floating point exception", signal.SIGILL: "Illegal instruction"}


@dataclass
class TestOutcome:
    """One test of one program. ``input`` as shown in feedback (stdin text, or the arguments)."""

    index: int
    status: str              # one of STATUSES but format, or "skipped" (after a time limit)
    input: object
    expected: str
    output: str = ""         # stdout stripped, or the returned value as JSON
    error: str = ""          # the trace (runtime error, memory), or a note for the header (wrong answer)
    debug: str = ""          # stderr
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class CodeResult:
    """One program against its tests. ``score``: 1.0 when every test passed (the SDPO authors'
    binary reward); ``fraction``: the share passed."""

    passed: int
    total: int
    status: str
    feedback: str
    tests: list = field(default_factory=list)
    isolation: dict = field(default_factory=dict)

    @property
    def score(self) -> float:
        return float(self.total > 0 and self.passed == self.total)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0


def extract_code(completion: str) -> str | None:
    """The last fenced block tagged python (or py, python3); None when there is none."""
    blocks = FENCE.findall(completion or "")
    return blocks[-1] if blocks else None


def format_result(completion: str, n_tests: int) -> CodeResult:
    """The result for a completion with no ```python block; an opened block that never closes
    (the completion hit the length limit) gets the truncation message instead."""
    truncated = OPEN_FENCE.search(completion or "") is not None
    return CodeResult(0, n_tests, "format", format_feedback(truncated))


def parse_tests(tests) -> list[dict]:
    """Tests as a list of ``{"input", "output"}`` or ``{"fn_name", "args", "expected"}`` dicts, from
    a list, a JSON string, or the APPS form; ValueError naming what is wrong otherwise."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as e:
            raise ValueError(f"tests are not valid JSON: {e}") from None
    if isinstance(tests, dict) and "inputs" in tests and "outputs" in tests:
        fn = tests.get("fn_name")
        tests = [{"fn_name": fn, "args": i, "expected": o} if fn else {"input": i, "output": o}
                 for i, o in zip(tests["inputs"], tests["outputs"])]
    if not isinstance(tests, list) or not tests:
        raise ValueError(f"tests must be a non-empty list of test dicts, got {type(tests).__name__}")
    out = []
    for i, t in enumerate(tests):
        if not isinstance(t, dict):
            raise ValueError(f"test {i} is a {type(t).__name__}, not a dict")
        if t.get("fn_name"):
            args = t.get("args", t.get("input"))
            expected = t.get("expected", t.get("output"))
            if isinstance(args, str):  # LiveCodeBench: one JSON value a line, expected as JSON text
                args = [json.loads(line) for line in args.split("\n") if line.strip()]
                expected = json.loads(expected) if isinstance(expected, str) else expected
            if not isinstance(args, (list, dict)):
                raise ValueError(f"test {i}: args must be a list, a dict or JSON lines, got {type(args).__name__}")
            out.append({"fn_name": str(t["fn_name"]), "args": args, "expected": as_json(expected)})
        elif "input" in t and "output" in t:
            out.append({"input": str(t["input"]), "output": str(t["output"])})
        else:
            raise ValueError(f"test {i} has neither input/output nor fn_name/args/expected: keys {sorted(t)}")
    return out


def as_json(value):
    """``value`` as JSON would give it back (tuples become lists), so equality means equal JSON."""
    return json.loads(json.dumps(value))


def outputs_match(actual: str, expected: str) -> bool:
    """LiveCodeBench's stdin check: same number of stripped lines, each equal as text or as decimals."""
    got = [line.strip() for line in actual.strip().split("\n")]
    want = [line.strip() for line in expected.strip().split("\n")]
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        if a == b:
            continue
        try:
            if [Decimal(x) for x in a.split()] != [Decimal(x) for x in b.split()]:
                return False
        except (InvalidOperation, ValueError):
            return False
    return True


def grade(index: int, test: dict, run: ProgramRun, cpu_limit: float) -> TestOutcome:
    """One run of one test -> its outcome (the order of checks is the order of blame)."""
    call = "fn_name" in test
    shown = test["args"] if call else test["input"]
    expected = json.dumps(test["expected"]) if call else test["output"]
    o = TestOutcome(index, "wrong_answer", shown, expected, debug=run.stderr.decode("utf-8", "replace"),
                    seconds=run.wall_s)
    error, sig = run.record("error"), -run.returncode if (run.returncode or 0) < 0 else 0
    error = clean_error(error) if error is not None else None
    if not run.records and not run.timed_out:
        raise RuntimeError(f"the sandbox failed to start (exit {run.returncode}): "
                           f"{run.stderr.decode('utf-8', 'replace')[-2000:]}")
    if run.timed_out or sig == signal.SIGXCPU or (sig == signal.SIGKILL and run.cpu_s >= cpu_limit):
        o.status = "time_limit"
    elif run.output_exceeded:  # we killed it for printing too much: a wrong answer that says so
        o.output = run.stdout.decode("utf-8", "replace").strip()
        o.error = f"output limit exceeded: more than {OUTPUT_LIMIT} bytes printed"
        return o
    elif error is not None:
        o.status = "memory" if error.get("type") == "MemoryError" else "runtime_error"
        o.error = short_trace(error)
    elif sig:
        o.status = "runtime_error"
        if sig == signal.SIGXFSZ:
            o.error = "File size limit exceeded: the program wrote a file over the limit"
        else:
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            o.error = f"{CRASHES.get(sig, 'Killed')} (signal {name})"
    elif run.returncode:
        o.status, o.error = "runtime_error", f"Exited with code {run.returncode}"
    if o.status != "wrong_answer":
        return o
    if call:  # the harness writes one result; more means the program wrote its own (see ProgramRun)
        results = [r for r in run.records if r["kind"] == "result" and "value" in r]
        o.output = json.dumps(results[-1]["value"]) if results else ""
        if len(results) > 1:
            o.error = "more than one result reported: the program wrote to the harness's report pipe"
        ok = len(results) == 1 and results[0]["value"] == test["expected"]
    else:
        o.output = run.stdout.decode("utf-8", "replace").strip()
        ok = outputs_match(run.stdout.decode("utf-8", "replace"), test["output"])
    o.status = "passed" if ok else "wrong_answer"
    return o


def clean_error(record: dict) -> dict:
    """An error record as ``short_trace`` reads it, whatever the program put on the pipe."""
    frames = record.get("frames") if isinstance(record.get("frames"), list) else []
    frames = [[f[0], str(f[1]), str(f[2])[:300]] for f in frames
              if isinstance(f, list) and len(f) == 3 and isinstance(f[0], int)]
    return {"type": str(record.get("type") or "Error")[:200], "message": str(record.get("message", ""))[:1000],
            "frames": frames[-3:]}


def run_tests(code: str | None, tests, *, timeout_s: float = 2.0, memory_mb: int = 1024,
              drop_root: bool = True) -> CodeResult:
    """Run ``code`` against every test, each in a fresh sandboxed child (``process.run_program``).
    ``code`` None (no ```python block) gives the format result. ``timeout_s`` is per test."""
    tests = parse_tests(tests)
    if code is None:
        return CodeResult(0, len(tests), "format", format_feedback(False))
    outcomes, isolation = [], {}
    for i, t in enumerate(tests):
        if outcomes and outcomes[-1].status in ("time_limit", "skipped"):
            outcomes.append(TestOutcome(i, "skipped", t.get("args", t.get("input")), ""))
            continue
        stdin = json.dumps(t["args"]) if "fn_name" in t else t["input"]
        run = run_program(code, stdin, fn_name=t.get("fn_name"), timeout_s=timeout_s, memory_mb=memory_mb,
                          drop_root=drop_root)
        isolation = isolation or run.isolation
        outcomes.append(grade(i, t, run, cpu_limit=timeout_s))
    passed = sum(o.passed for o in outcomes)
    # the status of the case the feedback leads with: a runtime error (first in test order), a time limit, else WA
    status = "passed" if passed == len(outcomes) else next(
        (o.status for o in outcomes if o.status in ("runtime_error", "memory")),
        "time_limit" if any(o.status == "time_limit" for o in outcomes) else "wrong_answer")
    return CodeResult(passed, len(outcomes), status, render_feedback(outcomes), outcomes, isolation)


def run_tests_many(jobs, *, workers: int | None = None, **kwargs) -> list[CodeResult]:
    """``run_tests`` for each ``(code, tests)`` pair on ``workers`` threads (default: the cores),
    each starting one sandboxed child at a time; results in input order. The work happens in the
    children, so threads suffice, and a program that times out holds one worker for its own
    time limit only."""
    jobs = list(jobs)
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    if workers == 1:
        return [run_tests(code, tests, **kwargs) for code, tests in jobs]
    with ThreadPoolExecutor(workers, thread_name_prefix="code-reward") as pool:
        return list(pool.map(lambda job: run_tests(job[0], job[1], **kwargs), jobs))


def score_completions(completions, tests_per_row, **kwargs) -> list[CodeResult]:
    """``run_tests_many`` from raw completions: code extracted, format failures not run."""
    jobs, results = [], {}
    for i, (c, tests) in enumerate(zip(completions, tests_per_row)):
        code = extract_code(c)
        if code is None:
            results[i] = format_result(c, len(parse_tests(tests)))
        else:
            jobs.append((i, code, tests))
    ran = run_tests_many([(code, tests) for _, code, tests in jobs], **kwargs)
    results.update({i: r for (i, _, _), r in zip(jobs, ran)})
    return [results[i] for i in range(len(results))]


def split_tests(tests, fraction: float = 0.5, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(reward tests, evaluation tests): ``max(1, int(n * fraction))`` tests picked by a generator
    seeded with ``seed`` and the tests' own content (the same problem splits the same way in any
    dataset order or process), kept in their order; evaluation gets all of them, as in the SDPO
    authors' ``data/split_tests.py``, so a policy cannot pass evaluation by fitting the feedback."""
    tests = parse_tests(tests)
    if fraction >= 1:
        return list(tests), list(tests)
    digest = hashlib.sha256(json.dumps(tests, sort_keys=True).encode()).hexdigest()
    keep = sorted(random.Random(f"{seed}:{digest}").sample(range(len(tests)), max(1, int(len(tests) * fraction))))
    return [tests[i] for i in keep], list(tests)
