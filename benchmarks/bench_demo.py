"""What `make demo` promises: held-out greedy accuracy lift and wall time, over seeds.

    python benchmarks/bench_demo.py [--seeds 0 1 2] [--backend scratch] [--set model.lab.copy_steps=300]

Runs ``configs/demo.yaml`` once per RL seed (the warm start and the held-out split stay fixed,
so "before" is the same model each time) and prints accuracy before / after, the lift and the
time of the whole run (warm start from cache, training, evals, saving). Medians at the bottom.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import yaml
from _common import machine, median, run_config, table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--backend", default="scratch")
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra config override, e.g. model.lab.copy_steps=300 (repeatable)")
    args = ap.parse_args()
    extra = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.set)}

    rows = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            s = run_config(args.config, {**extra, "trainer.seed": seed, "backend": args.backend,
                                         "output_dir": out})
            wall = time.perf_counter() - t0
        rows.append([seed, s["before"], s["after"], s["after"] - s["before"], s["train_s"], wall])
    print(f"\nmachine: {machine()}")
    print(f"config: {args.config}, backend {args.backend}, overrides {extra or 'none'}\n")
    print(table(["seed", "acc before", "acc after", "lift", "train s", "wall s"], rows))
    print(f"\nmedian lift {median([r[3] for r in rows]):+.3f}, median wall {median([r[5] for r in rows]):.1f} s "
          f"(min lift {min(r[3] for r in rows):+.3f})")


if __name__ == "__main__":
    main()
