"""The course's numbers: the first run (``bench_first_run.py``), quoted by the README, the docs home page
and notebook 00."""

from __future__ import annotations

import json
from pathlib import Path

from report_format import md_table, provenance

ROOT = Path(__file__).resolve().parents[1]


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


GPU_RESULTS = ROOT / "benchmarks" / "results" / "gpu"
# what changed after the latest GPU run's failures (edited with each run; the counts come from its reports)
GPU_FIXED_SINCE = ("the fixes since (16-bit TRL presets that follow the device, tensors that follow the model "
                   "in notebooks 05 and 07, Unsloth's max_seq_length on a model it did not load) have not run on "
                   "a GPU yet")
GPU_NOT_RUN = "a T4, the T4 profile's Qwen2.5-0.5B-Instruct (no hub on the lent machine) and vLLM"


def gpu_status_fields() -> dict:
    """``gpu.status``: the one sentence README.md, docs/index.md and docs/install.md give on what has run on a
    GPU, from the reports in ``benchmarks/results/gpu/<date>/`` (the latest date's runs counted)."""
    runs = {}
    for path in sorted(GPU_RESULTS.glob("*/*.json")):
        runs.setdefault(path.parent.name, []).append(json.loads(path.read_text()))
    if not runs:
        return {"status": "The GPU checks (`make gpu-check`) have not run on a GPU yet."}
    dates = sorted(runs)
    last = runs[dates[-1]]
    device = last[0]["device"]
    tiny = [c for r in last for c in r["checks"] if "real-model" not in c["check"] and c["outcome"] != "skipped"]
    real = [c for r in last for c in r["checks"] if "real-model" in c["check"]]
    failed = sorted({c["check"].split("[")[-1][:2] for c in real if c["outcome"] == "failed"})
    real_part = (f"{sum(c['outcome'] == 'passed' for c in real)} of {len(real)} notebooks on the real model passed"
                 + (f" (notebooks {', '.join(failed[:-1])} and {failed[-1]} failed; {GPU_FIXED_SINCE})" if failed else ""))
    return {"status": (
        f"On a GPU, the GPU checks (`make gpu-check`, run through `benchmarks/gpu_lease.sh`) ran on a lent {device} "
        f"on {', '.join(dates[:-1]) + ' and ' if len(dates) > 1 else ''}{dates[-1]}: in the latest run "
        f"{sum(c['outcome'] == 'passed' for c in tiny)} of {len(tiny)} checks on the tiny lab passed (Unsloth, 4-bit, "
        f"16-bit training, TRL on CUDA, the export merge, the notebooks) and {real_part}. Not run on a GPU: "
        f"{GPU_NOT_RUN}; the reports are in `benchmarks/results/gpu/`.")}


def lab_heldout_fields() -> dict:
    """``lab.*``: what the tiny lab's held-out set of ``configs/demo.yaml`` is made of, computed from the task:
    ``n`` problems, ``sets`` distinct sets of operands (each asked in every order), ``answers`` distinct answers."""
    import yaml

    from sdpo_kit.lab.tasks import make_task

    task = make_task(**yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())["task"])
    heldout = task.splits()[1]
    operands = [tuple(int(x) for x in r["prompt"][-1]["content"].rstrip("=").split("+")) for r in heldout]
    return {"n": str(len(heldout)), "sets": str(len({task.problem_key(o) for o in operands})),
            "answers": str(len({r["answer"] for r in heldout})), "share": f"{1 / len(heldout):.3f}"}
