"""Throughput of the code reward's sandbox: test runs per second, pool against one at a time.

    python benchmarks/bench_code_reward.py [--programs 50] [--tests 4] [--timeout 1.0] [--workers N]
                                           [--repeats 3] [--quick]

Three batches, each scored with ``run_tests_many`` on ``--workers`` workers (default: the cores)
and with one worker (one program at a time), ``--repeats`` times (the median is kept):

    trivial    ``--programs`` programs that add one to their input, ``--tests`` tests each: every
               test run is a fresh sandboxed interpreter, so this is the sandbox's own cost
    timeout    ``--workers`` programs that loop forever (one test each, ``--timeout`` s): each costs
               its time limit plus the interpreter start, never a time limit per test
    mixed      the trivial batch with one looping program first: the delay it adds to the batch
               (mixed minus trivial wall time) against its own wall-clock limit, the time limit
               plus ``sandbox.process.STARTUP_S`` for the interpreter's start (the property it checks: no
               timing-out program delays the others by more than its own timeout)

And one lab training step's scoring (``lab_code``, ``sdpo_kit/tasks/code.py``): 128 completions,
16 training functions x 8, each group drawn from five expressions (right, off by one in the slope or
the intercept, a syntax slip, right again), six call tests each, scored three ways: one child per
test (``run_tests_many``), one child per program (``sandbox.batch.run_program_tests`` on the pool) and
one child per distinct program (``run_programs_many``, what the task does).

Writes ``benchmarks/results/code_reward.json`` (``--quick``: a few programs, one repeat, printed
only). The isolation the sandbox achieved on the machine goes into the results' config.
"""

from __future__ import annotations

import argparse
import os
import time

from _common import machine, median, parse_args, table, write_results

LOOP = "while True:\n    pass\n"
ADD_ONE = "print(int(input()) + 1)\n"


def batch(kind: str, programs: int, tests: int, workers: int) -> list:
    trivial = [(ADD_ONE, [{"input": f"{i + k}\n", "output": str(i + k + 1)} for k in range(tests)])
               for i in range(programs)]
    loops = [(LOOP, [{"input": "0\n", "output": "1"}]) for _ in range(workers)]
    return {"trivial": trivial, "timeout": loops, "mixed": loops[:1] + trivial}[kind]


def measure(jobs: list, workers: int, timeout_s: float) -> dict:
    from sdpo_kit.sandbox.runner import run_tests_many

    t0 = time.perf_counter()
    results = run_tests_many(jobs, workers=workers, timeout_s=timeout_s)
    seconds = time.perf_counter() - t0
    runs = sum(sum(o.status != "skipped" for o in r.tests) for r in results)
    return {"seconds": seconds, "test_runs": runs, "runs_per_s": runs / seconds,
            "statuses": sorted({r.status for r in results})}


def lab_step_jobs(seed: int = 0) -> list:
    """The (program, tests) pairs of one lab_code step's 128 completions (see the module docstring)."""
    import random

    from sdpo_kit.tasks.code import CodeTask, expression, hidden_tests, program

    rng = random.Random(seed)
    rows = rng.sample(CodeTask().splits()[0], 16)
    jobs = []
    for r in rows:
        a, b = map(int, r["answer"].replace("x+", "").split("*"))
        variants = [r["answer"], f"{a}*x+{b + 1}", f"{a + 1}*x+{b}", f"{a}*x+", r["answer"]]
        jobs += [(program(expression(rng.choice(variants))), hidden_tests(r["answer"])) for _ in range(8)]
    return jobs


def measure_lab_step(workers: int) -> dict:
    """Seconds to score one lab step's jobs three ways; the verdicts must agree."""
    from concurrent.futures import ThreadPoolExecutor

    from sdpo_kit.sandbox.batch import run_program_tests, run_programs_many
    from sdpo_kit.sandbox.runner import run_tests_many

    jobs = lab_step_jobs()
    out, scores = {"jobs": len(jobs)}, {}
    t0 = time.perf_counter()
    scores["per_test"] = [r.score for r in run_tests_many(jobs, workers=workers)]
    out["child_per_test_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        scores["per_program"] = [r.score for r in pool.map(lambda j: run_program_tests(*j), jobs)]
    out["child_per_program_s"] = time.perf_counter() - t0
    stats = {}
    t0 = time.perf_counter()
    scores["distinct"] = [r.score for r in run_programs_many(jobs, workers=workers, stats=stats)]
    out["child_per_distinct_program_s"] = time.perf_counter() - t0
    if not scores["per_test"] == scores["per_program"] == scores["distinct"]:
        raise SystemExit("the three ways of scoring the lab step disagree")
    return {**out, "distinct": stats["distinct"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=50)
    ap.add_argument("--tests", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=1.0, help="time limit per test, seconds")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a few programs, one repeat, nothing written")
    args = parse_args(ap)
    if args.quick:
        args.programs, args.tests, args.repeats = 4, 2, 1
    from sdpo_kit.sandbox.process import STARTUP_S, isolation_report

    runs = []
    for kind in ("trivial", "timeout", "mixed"):
        for workers, mode in ((args.workers, "pool"), (1, "one at a time")):
            jobs = batch(kind, args.programs, args.tests, args.workers)
            for repeat in range(args.repeats):
                m = measure(jobs, workers, args.timeout)
                runs.append({"batch": kind, "mode": mode, "workers": workers, "repeat": repeat, **m})
                print(f"{kind:8s} {mode:14s} {m['test_runs']:4d} runs {m['seconds']:7.2f} s "
                      f"{m['runs_per_s']:7.1f} runs/s  {m['statuses']}", flush=True)

    for repeat in range(args.repeats):
        m = measure_lab_step(args.workers)
        runs.append({"batch": "lab_step", "mode": "pool", "workers": args.workers, "repeat": repeat, **m})
        print(f"lab step ({m['jobs']} completions, {m['distinct']} distinct): per test {m['child_per_test_s']:.2f} s, "
              f"per program {m['child_per_program_s']:.2f} s, per distinct program "
              f"{m['child_per_distinct_program_s']:.2f} s", flush=True)

    def med(kind, mode, key):
        return median([r[key] for r in runs if r["batch"] == kind and r["mode"] == mode])

    summary = {f"{kind}_{key}_{mode.replace(' ', '_')}": med(kind, mode, key)
               for kind in ("trivial", "timeout", "mixed") for mode in ("pool", "one at a time")
               for key in ("runs_per_s", "seconds")}
    summary["trivial_speedup"] = summary["trivial_runs_per_s_pool"] / summary["trivial_runs_per_s_one_at_a_time"]
    summary["loop_delay_s_pool"] = summary["mixed_seconds_pool"] - summary["trivial_seconds_pool"]
    for key in ("child_per_test_s", "child_per_program_s", "child_per_distinct_program_s", "distinct", "jobs"):
        summary[f"lab_step_{key}"] = med("lab_step", "pool", key)
    summary["timeout_s"] = args.timeout
    summary["loop_wall_limit_s"] = args.timeout + STARTUP_S
    print(f"\nmachine: {machine()}\n")
    print(table(["batch", "pool runs/s", "one at a time runs/s", "pool s", "one at a time s"],
                [[k, summary[f"{k}_runs_per_s_pool"], summary[f"{k}_runs_per_s_one_at_a_time"],
                  summary[f"{k}_seconds_pool"], summary[f"{k}_seconds_one_at_a_time"]]
                 for k in ("trivial", "timeout", "mixed")]))
    print(f"\none looping program delays the pool's batch by {summary['loop_delay_s_pool']:.2f} s "
          f"(its wall-clock limit: {args.timeout} s + {STARTUP_S} s start = {args.timeout + STARTUP_S} s)")
    if args.quick:
        return
    config = {"programs": args.programs, "tests": args.tests, "timeout_s": args.timeout, "workers": args.workers,
              "repeats": args.repeats, "isolation": isolation_report()}
    write_results("code_reward", config=config, runs=runs, summary=summary)


if __name__ == "__main__":
    main()
