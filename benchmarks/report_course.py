"""The course's numbers: the first run (``bench_first_run.py``), quoted by the README, the docs home page
and notebook 00."""

from __future__ import annotations

from report_format import md_table, provenance


def first_run(res: dict) -> str:
    s = res["summary"]
    rows = [[r["seed"], f"{r['before']:.2f}", f"{r['after']:.2f}", f"{r['lift']:+.2f}", f"{r['lift_over_se']:.1f}",
             f"{r['s_per_step']:.1f}", f"{r['wall_s']:.0f}"] for r in res["runs"]]
    return "\n".join([
        md_table(["training seed", "held-out before", "after", "lift", "lift / SE", "s/step", "wall s"], rows), "",
        f"Median lift **{s['median_lift']:+.2f}** (smallest {s['min_lift']:+.2f}) on {s['n_eval']} held-out questions; "
        f"median wall time **{s['median_wall_s']:.0f} s** (slowest {s['max_wall_s']:.0f} s), one `sdpo-kit train` "
        f"process per seed on {res['config']['threads']} threads: imports, model load, both evaluations and saving "
        "included; the model's one-off unpacking from its wheel is not. SE: the standard error of the difference "
        "of two proportions.", "", provenance(res)])


def first_run_fields(res: dict) -> dict:
    s, runs = res["summary"], res["runs"]
    afters = sorted(r["after"] for r in runs)
    return {"before": f"{s['median_before']:.2f}", "after": f"{s['median_after']:.2f}",
            "after_low": f"{afters[0]:.2f}", "after_high": f"{afters[-1]:.2f}", "lift": f"{s['median_lift']:+.2f}",
            "min_lift": f"{s['min_lift']:+.2f}", "wall_s": f"{s['median_wall_s']:.0f}",
            "wall_min": f"{-(-s['max_wall_s'] // 60):.0f}", "s_per_step": f"{s['median_s_per_step']:.1f}",
            "n_eval": str(s["n_eval"]), "seeds": str(len(runs))}
