"""What `make demo` promises: held-out greedy accuracy lift and wall time, over seeds.

    python benchmarks/bench_demo.py [--seeds 0 1 2 3 4] [--backend scratch] [--set KEY=VALUE ...] [--name demo]

Runs ``configs/demo.yaml`` once per RL seed (the warm start and the held-out split stay fixed,
so "before" is the same model each time) and prints, per seed, accuracy before / after, the
lift, the peak accuracy of the run and its step (accuracy swings between evaluations: the
peak and the end differ), and the time of the whole run (warm start from cache, training,
evals, saving). Medians and the minimum lift at the bottom. Writes
``benchmarks/results/<name>.json`` (``--name``; e.g. ``--set trainer.lr_scheduler_type=constant
--name demo_constant_lr``).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import yaml
from _common import machine, median, run_config, table, write_results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--backend", default="scratch")
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra config override, e.g. trainer.lr_scheduler_type=constant (repeatable)")
    ap.add_argument("--name", default="demo", help="results file: benchmarks/results/<name>.json")
    args = ap.parse_args()
    extra = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.set)}

    runs = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            s = run_config(args.config, {**extra, "trainer.seed": seed, "backend": args.backend, "output_dir": out})
            wall = time.perf_counter() - t0
        evals = [(r["step"], r["eval/accuracy"]) for r in s["history"] if r.get("eval/accuracy") is not None]
        peak_step, peak = max(evals, key=lambda e: (e[1], -e[0]))
        runs.append({"seed": seed, "before": s["before"], "after": s["after"], "lift": s["after"] - s["before"],
                     "peak": peak, "peak_step": peak_step, "evals": evals, "train_s": s["train_s"], "wall_s": wall})
    print(f"\nmachine: {machine()}")
    print(f"config: {args.config}, backend {args.backend}, overrides {extra or 'none'}\n")
    print(table(["seed", "acc before", "acc after", "lift", "peak (step)", "train s", "wall s"],
                [[r["seed"], r["before"], r["after"], r["lift"], f"{r['peak']:.3f} ({r['peak_step']})",
                  r["train_s"], r["wall_s"]] for r in runs]))
    summary = {"median_lift": median([r["lift"] for r in runs]), "min_lift": min(r["lift"] for r in runs),
               "median_wall_s": median([r["wall_s"] for r in runs]), "median_after": median([r["after"] for r in runs]),
               "median_peak": median([r["peak"] for r in runs])}
    print(f"\nmedian lift {summary['median_lift']:+.3f} (min {summary['min_lift']:+.3f}), "
          f"median wall {summary['median_wall_s']:.1f} s, median peak {summary['median_peak']:.3f}")
    write_results(args.name, config={"config": args.config, "backend": args.backend, "overrides": extra,
                                     "seeds": args.seeds}, runs=runs, summary=summary)


if __name__ == "__main__":
    main()
