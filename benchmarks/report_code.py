"""The code reward's report (``bench_code_reward.py``'s results): test runs per second through the
sandbox, a pool of workers against one program at a time, and what one looping program costs.

    code_reward(results) -> str        the README / docs block ``<!-- report:code-reward -->``
"""

from __future__ import annotations

import statistics

from report_format import md_table, provenance

BATCHES = {"trivial": "trivial (add one)", "timeout": "loops until the time limit", "mixed": "trivial + one loop"}


def code_reward(res: dict) -> str:
    s, cfg = res["summary"], res["config"]
    rows = []
    for kind, label in BATCHES.items():
        runs = statistics.median(r["test_runs"] for r in res["runs"] if r["batch"] == kind and r["mode"] == "pool")
        rows.append([label, int(runs), f"{s[f'{kind}_runs_per_s_pool']:.1f}",
                     f"{s[f'{kind}_runs_per_s_one_at_a_time']:.1f}", f"{s[f'{kind}_seconds_pool']:.2f}",
                     f"{s[f'{kind}_seconds_one_at_a_time']:.2f}"])
    iso = cfg.get("isolation") or {}
    held = ", ".join(f"{k} {v}" for k, v in iso.items() if k in ("user", "network", "landlock_abi", "packages"))
    return "\n".join([
        md_table(["batch", "test runs", f"pool of {cfg['workers']}: runs/s", "one at a time: runs/s", "pool s",
                  "one at a time s"], rows), "",
        f"Each test run is a fresh sandboxed interpreter; trivial: {cfg['programs']} programs x {cfg['tests']} tests; "
        f"time limit {cfg['timeout_s']} s a test; median of {cfg['repeats']} repeats. The pool runs "
        f"**{s['trivial_runs_per_s_pool']:.1f}** trivial test runs a second, {s['trivial_speedup']:.2f}x one at a "
        f"time (issue 18's goal: 50 on 2 cores). One looping program delays the pool's trivial batch by "
        f"**{s['loop_delay_s_pool']:.2f} s**; its own wall-clock limit is {s['loop_wall_limit_s']:.1f} s (the time "
        f"limit plus the interpreter's start)." + (f" Isolation on the machine: {held}." if held else ""), "",
        provenance(res)])
