"""Score many call-based programs cheaply: one sandboxed child per PROGRAM, and each distinct
program once per batch.

    run_program_tests(code, tests)   one child runs every call test of ``code`` -> ``CodeResult``
    run_programs_many(jobs)          many (code, tests) pairs, identical pairs run once, on a pool

``runner.run_tests`` starts one child per test (the isolation LiveCodeBench gets: a test
cannot see what an earlier one left behind). A lab step samples 128 completions with six tests
each (``bench_code_reward.py`` times one step all three ways), and the tiny model repeats itself.
Here the child gets the list of argument lists only (never the expected values); a harness
function appended to the program calls the model's function on each and returns, per test,
``{"value": ...}`` or ``{"error": ...}``. The parent compares each claimed value with the
expected one, as ``run_tests`` does, so a program that forges the report can claim outputs, not
passes. Containment is ``process.run_program``'s, unchanged.

What one child per program gives up: ``timeout_s`` bounds the whole program, not each test (a
program that loops fails every test with a time limit), and the tests share one interpreter
(a test could see state left by an earlier one: harmless for pure functions, the only kind the
lab writes). Left out on purpose: stdin tests (``run_tests`` handles them, one child per test).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

from sdpo_kit.sandbox.feedback import format_feedback, render_feedback
from sdpo_kit.sandbox.process import run_program
from sdpo_kit.sandbox.runner import CodeResult, TestOutcome, grade, parse_tests

HARNESS_FN = "sdpo_run_all_tests"
# appended to the program; the model's function is looked up by name, as the child itself does
HARNESS = '''

def {harness}(fn_name, cases):
    import json as _json
    fn = globals().get(fn_name)
    if isinstance(globals().get("Solution"), type):
        fn = getattr(globals()["Solution"](), fn_name, fn)
    out = []
    for args in cases:
        try:
            if not callable(fn):
                raise NameError("no function named %r in your code" % fn_name)
            value = fn(**args) if isinstance(args, dict) else fn(*args)
            out.append({{"value": _json.loads(_json.dumps(value))}})
        except Exception as e:  # one test's error, the others still run
            out.append({{"error": {{"type": type(e).__name__, "message": str(e)[:500]}}}})
    return out
'''


def whole_run_outcomes(tests: list[dict], run, timeout_s: float) -> list[TestOutcome] | None:
    """Outcomes when the run as a whole failed (time limit, crash, memory, a syntax error, too
    much output): the first test gets ``grade``'s verdict and the rest share it (after a time
    limit they are "skipped", as in ``run_tests``). None when the harness returned a result."""
    first = grade(0, tests[0], run, cpu_limit=timeout_s)  # its pass / wrong verdict means nothing here
    results = [r for r in run.records if r.get("kind") == "result" and "value" in r]   # as ``grade`` counts them
    if first.status in ("passed", "wrong_answer") and not run.output_exceeded and len(results) == 1:
        return None
    if first.status in ("passed", "wrong_answer"):  # too much output, no result or forged extra ones
        first.status = "wrong_answer"
        first.output = first.output if run.output_exceeded else ""
        first.error = first.error or "the program did not report one result for its tests"
    out = [first]
    for i, t in enumerate(tests[1:], start=1):
        status = "skipped" if first.status == "time_limit" else first.status
        out.append(TestOutcome(i, status, t["args"], json.dumps(t["expected"]), error=first.error))
    return out


def run_program_tests(code: str | None, tests, *, timeout_s: float = 2.0, memory_mb: int = 1024,
                      drop_root: bool = True) -> CodeResult:
    """Run ``code`` against every call test in ONE sandboxed child; the same ``CodeResult`` as
    ``run_tests`` (statuses, feedback). ``timeout_s`` is for the whole program. Every test must
    call the same ``fn_name``."""
    tests = parse_tests(tests)
    if code is None:
        return CodeResult(0, len(tests), "format", format_feedback(False))
    names = {t.get("fn_name") for t in tests}
    if len(names) != 1 or None in names:
        raise ValueError(f"run_program_tests takes call tests of one function, got fn_names {sorted(map(str, names))}")
    fn_name = names.pop()
    program = code + HARNESS.format(harness=HARNESS_FN)
    stdin = json.dumps([fn_name, [t["args"] for t in tests]])
    run = run_program(program, stdin, fn_name=HARNESS_FN, timeout_s=timeout_s, memory_mb=memory_mb,
                      drop_root=drop_root)
    outcomes = whole_run_outcomes(tests, run, timeout_s)
    if outcomes is None:
        claimed = next(r for r in run.records if r.get("kind") == "result")["value"]
        ok = isinstance(claimed, list) and len(claimed) == len(tests) and all(isinstance(c, dict) for c in claimed)
        outcomes = []
        for i, t in enumerate(tests):
            o = TestOutcome(i, "wrong_answer", t["args"], json.dumps(t["expected"]),
                            debug=run.stderr.decode("utf-8", "replace"), seconds=run.wall_s / len(tests))
            c = claimed[i] if ok else {}
            if "error" in c and isinstance(c["error"], dict):
                o.status = "runtime_error"
                o.error = f"{c['error'].get('type', 'Error')}: {c['error'].get('message', '')}".rstrip(": ")
            elif "value" in c:
                o.output = json.dumps(c["value"])
                o.status = "passed" if c["value"] == t["expected"] else "wrong_answer"
            else:
                o.error = "the program's report was malformed"
            outcomes.append(o)
    passed = sum(o.passed for o in outcomes)
    status = "passed" if passed == len(outcomes) else next(
        (o.status for o in outcomes if o.status in ("runtime_error", "memory")),
        "time_limit" if any(o.status == "time_limit" for o in outcomes) else "wrong_answer")
    return CodeResult(passed, len(outcomes), status, render_feedback(outcomes), outcomes, run.isolation)


def job_key(code: str | None, tests) -> str:
    """Two jobs with the same key have the same result: the code and the tests, as JSON."""
    return json.dumps([code, tests], sort_keys=True, default=str)


def run_programs_many(jobs, *, workers: int | None = None, stats: dict | None = None, **kwargs) -> list[CodeResult]:
    """``run_program_tests`` for each ``(code, tests)`` pair, results in input order. Identical
    pairs (the same program on the same tests) run once and share the result object; ``stats``,
    when given, gets ``{"jobs", "distinct"}``. Threads suffice: the work is in the children."""
    jobs = list(jobs)
    keys = [job_key(code, tests) for code, tests in jobs]
    distinct = {}
    for k, job in zip(keys, jobs):
        distinct.setdefault(k, job)
    if stats is not None:
        stats.update(jobs=len(jobs), distinct=len(distinct))
    todo = list(distinct.items())
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    run = lambda item: run_program_tests(item[1][0], item[1][1], **kwargs)  # noqa: E731
    if workers == 1:
        done = [run(item) for item in todo]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="code-batch") as pool:
            done = list(pool.map(run, todo))
    by_key = {k: r for (k, _), r in zip(todo, done)}
    return [by_key[k] for k in keys]
