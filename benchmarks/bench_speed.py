"""Seconds per optimizer step: the scratch GRPO loop vs TRL's GRPOTrainer, same demo config.

    python benchmarks/bench_speed.py [--steps 40] [--warmup 5] [--repeats 1]

Both backends train the tiny lab on ``configs/demo.yaml`` (same prompts per step, group size,
completion length, mu) with evaluation off; s/step is the median of the per-step wall times
each trainer logs (``time/step_s``) after ``--warmup`` steps. The scratch loop runs twice: as
configured (``share_prompt``: each prompt's forward runs once for its G completions) and with
``trainer.share_prompt=false`` (one full forward per row, as TRL does), so the table shows
where the difference comes from. Prints a markdown table and the ratios TRL / scratch.
"""

from __future__ import annotations

import argparse
import tempfile

from _common import machine, median, run_config, table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--config", default="configs/demo.yaml")
    args = ap.parse_args()

    rows, med = [], {}
    runs = {"scratch": ("scratch", True), "scratch, share_prompt off": ("scratch", False), "trl": ("trl", None)}
    for name, (backend, share) in runs.items():
        with tempfile.TemporaryDirectory() as out:
            share_key = {} if share is None else {"trainer.share_prompt": share}  # a scratch-only key
            s = run_config(args.config, {
                "backend": backend, "trainer.max_steps": args.steps, "trainer.eval_every": 0, "output_dir": out,
                **share_key,
            })
        times = [r["time/step_s"] for r in s["history"]
                 if r.get("step", 0) > args.warmup and r.get("time/step_s") is not None]
        med[name] = median(times)
        rows.append([name, len(times), med[name], min(times), max(times)])
    print(f"\nmachine: {machine()}")
    print(f"config: {args.config}, {args.steps} steps, first {args.warmup} dropped, eval off\n")
    print(table(["backend", "steps timed", "median s/step", "min", "max"], rows))
    print(f"\nratio TRL / scratch (median s/step): {med['trl'] / med['scratch']:.2f}x")
    print(f"ratio TRL / scratch with share_prompt off: {med['trl'] / med['scratch, share_prompt off']:.2f}x")


if __name__ == "__main__":
    main()
