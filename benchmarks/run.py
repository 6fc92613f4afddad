"""Make a results file as ``experiments.py`` declares it: the one command for every benchmark.

    python benchmarks/run.py NAME [--seeds S ...] [--steps N] [--jobs J] [--resume] [--out FILE]
    python benchmarks/run.py NAME NAME ...      # several, in the order given, each as declared
    python benchmarks/run.py --list

A declared sweep (``Experiment.sweep``: a config, its overrides, seeds) runs here: one training run per
seed through ``runner.run_all`` (``--jobs``, ``--resume``), and per run held-out greedy accuracy before and
after, the lift, the best evaluation of the run and its step, training and wall seconds; the medians at the
bottom. Any other experiment runs its declared script with the arguments given after NAME.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common
import runner
from _common import median, parse_args, results_path, run_config, write_results
from experiments import EXPERIMENTS, Sweep, script_path

ROOT = Path(__file__).resolve().parents[1]


def train_seed(spec: tuple) -> dict:
    """One run of a sweep: ``(config, overrides, seed, steps)`` -> its record."""
    config, overrides, seed, steps = spec
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = run_config(config, {**overrides, "trainer.seed": seed, **({"trainer.max_steps": steps} if steps else {}),
                                "output_dir": out})
        wall = time.perf_counter() - t0
    evals = [(r["step"], r["eval/accuracy"]) for r in s["history"] if r.get("eval/accuracy") is not None]
    peak_step, peak = max(evals, key=lambda e: (e[1], -e[0]))
    return {"seed": seed, "before": s["before"], "after": s["after"], "lift": s["after"] - s["before"],
            "peak": peak, "peak_step": peak_step, "evals": evals, "train_s": s["train_s"], "wall_s": wall}


def run_sweep(name: str, sweep: Sweep, argv: list[str]) -> Path:
    """``sweep`` over its seeds (or ``--seeds``), written as results file ``name``."""
    ap = argparse.ArgumentParser(prog=f"run.py {name}")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(sweep.seeds))
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the config's)")
    runner.add_runner_args(ap, name)
    args = parse_args(ap, argv)
    overrides = {**sweep.set, "backend": sweep.backend}
    specs = [(sweep.config, overrides, seed, args.steps) for seed in args.seeds]
    journal = runner.journal_path(results_path(name, args.out).stem, args.resume)
    runs = runner.run_all(train_seed, specs, jobs=args.jobs, journal=journal, show=lambda r: print(
        f"seed {r['seed']}: {r['before']:.3f} -> {r['after']:.3f} ({r['wall_s']:.1f} s)", flush=True))
    summary = {"median_lift": median([r["lift"] for r in runs]), "min_lift": min(r["lift"] for r in runs),
               "median_wall_s": median([r["wall_s"] for r in runs]), "median_after": median([r["after"] for r in runs]),
               "median_peak": median([r["peak"] for r in runs])}
    config = {"config": sweep.config, "backend": sweep.backend, "overrides": dict(sweep.set), "seeds": args.seeds,
              **({"steps": args.steps} if args.steps else {})}
    return write_results(name, config=config, runs=runs, summary=summary, out=args.out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print(__doc__.strip() + "\n\ndeclared:")
        for name, e in EXPERIMENTS.items():
            print(f"  {name:24s} {'sweep of ' + e.sweep.config if e.sweep else e.command}")
        return 0
    cut = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    names, rest = argv[:cut], argv[cut:]
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise SystemExit(f"{unknown} not declared in benchmarks/experiments.py (run.py --list)")
    if len(names) > 1 and rest:
        raise SystemExit("options go with one NAME at a time")
    dirty = ["--allow-dirty"] if _common.ALLOW_DIRTY else []   # _common took it out of sys.argv
    for name in names:   # in the order given; the first that fails stops the rest
        e = EXPERIMENTS[name]
        if e.sweep is not None:
            sys.argv = [sys.argv[0], name, *rest]   # the results file records the command that made it
            run_sweep(name, e.sweep, rest)
            continue
        _, *args = shlex.split(e.command)
        code = subprocess.call([sys.executable, str(ROOT / script_path(e.command)), *args, *rest, *dirty])
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
