"""Seconds per step: the scratch GRPO loop vs TRL's GRPOTrainer, same demo config.

    python benchmarks/bench_speed.py [--steps 40] [--warmup 5] [--repeats 3]

Both backends train the tiny lab on ``configs/demo.yaml`` (same prompts per step, group size,
completion length, mu) with evaluation off; s/step is the median of the per-step wall times
each trainer logs (``time/step_s``) after ``--warmup`` steps. The scratch loop runs twice: as
configured (``share_prompt``: each prompt's forward runs once for its G completions; every
row it times must log ``stats/share_prompt == 1``, or the script stops) and with
``trainer.share_prompt=false`` (one full forward per row, as TRL does), so the table shows where
the difference comes from. ``--repeats N`` runs the three N times in turn; the ratio is taken per
repeat and its median, min and max are the run-to-run spread. Writes
``benchmarks/results/speed.json``.
"""

from __future__ import annotations

import argparse
import tempfile

from _common import median, parse_args, run_config, write_results

# label -> (backend, share_prompt: True / False for scratch, None: a TRL run has no such key)
RUNS = {"scratch": ("scratch", True), "scratch, share_prompt off": ("scratch", False), "trl": ("trl", None)}


def timed_run(config: str, backend: str, share, steps: int, warmup: int) -> list[float]:
    with tempfile.TemporaryDirectory() as out:
        share_key = {} if share is None else {"trainer.share_prompt": share}  # a scratch-only key
        s = run_config(config, {"backend": backend, "trainer.max_steps": steps, "trainer.eval_every": 0,
                                "output_dir": out, **share_key})
    rows = [r for r in s["history"] if r.get("step", 0) > warmup and r.get("time/step_s") is not None]
    if share is not None:  # the label must be true of every row it times
        flags = {r["stats/share_prompt"] for r in rows}
        if flags != {float(share)}:
            raise SystemExit(f"share_prompt={share} run logged stats/share_prompt {sorted(flags)}: "
                             f"the row labelled {'shared' if share else 'not shared'} is not")
    return [r["time/step_s"] for r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--config", default="configs/demo.yaml")
    args = parse_args(ap)

    runs = []
    for rep in range(args.repeats):
        for label, (backend, share) in RUNS.items():
            times = timed_run(args.config, backend, share, args.steps, args.warmup)
            runs.append({"repeat": rep, "backend": label, "median_s": median(times), "times_s": times})
    med = {label: median([r["median_s"] for r in runs if r["backend"] == label]) for label in RUNS}

    def seconds(repeat: int, backend: str) -> float:   # one repeat's median step of one backend
        return next(r["median_s"] for r in runs if r["repeat"] == repeat and r["backend"] == backend)

    ratios = [seconds(k, "trl") / seconds(k, "scratch") for k in range(args.repeats)]
    ratios_off = [seconds(k, "trl") / seconds(k, "scratch, share_prompt off") for k in range(args.repeats)]
    write_results("speed", config={"config": args.config, "steps": args.steps, "warmup": args.warmup,
                                   "repeats": args.repeats},
                  runs=runs, summary={"median_s": med, "ratio_trl_over_scratch": ratios,
                                      "ratio_trl_over_scratch_median": median(ratios),
                                      "ratio_trl_over_scratch_no_share": ratios_off,
                                      "ratio_trl_over_scratch_no_share_median": median(ratios_off)})


if __name__ == "__main__":
    main()
