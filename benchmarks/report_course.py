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
        "of two proportions.", *position_note(s), "", provenance(res)])


def position_note(summary: dict) -> list[str]:
    """The sentence on a run that might have learned a position instead of the task (``bench_first_run.by_position``):
    accuracy after training on the questions whose answer is their first number and on those whose answer is
    their last. Empty when the results have no such split (sums)."""
    p = summary.get("position")
    if not p:
        return []
    return ["", f"Split by where the answer stands in the question (median over seeds): {p['share_first']:.2f} of "
            f"the held-out answers are the question's first number and {p['share_last']:.2f} its last, so always "
            f"naming one position would score {p['share_first']:.2f} or {p['share_last']:.2f}; after training the "
            f"runs answer {p['acc_first']:.2f} of the first kind and {p['acc_last']:.2f} of the second right."]


def first_run_fields(res: dict) -> dict:
    s, runs = res["summary"], res["runs"]
    afters = sorted(r["after"] for r in runs)
    return {"before": f"{s['median_before']:.2f}", "after": f"{s['median_after']:.2f}",
            "after_low": f"{afters[0]:.2f}", "after_high": f"{afters[-1]:.2f}", "lift": f"{s['median_lift']:+.2f}",
            "min_lift": f"{s['min_lift']:+.2f}", "wall_s": f"{s['median_wall_s']:.0f}",
            "wall_min": f"{-(-s['max_wall_s'] // 60):.0f}", "s_per_step": f"{s['median_s_per_step']:.1f}",
            "n_eval": str(s["n_eval"]), "seeds": str(len(runs)),
            **{k: f"{v:.2f}" for k, v in s.get("position", {}).items()}}


GPU_RESULTS = ROOT / "benchmarks" / "results" / "gpu"
GPU_NOT_RUN = "a T4, the T4 profile's Qwen2.5-0.5B-Instruct (no hub on the lent machine) and vLLM"


def _nb00_steps(log: Path) -> tuple[int, int] | None:
    """(steps run, steps planned) of a notebook-00 run on the GPU path, from its log."""
    import re

    found = re.findall(r"^step\s+(\d+)/(\d+)", log.read_text(), re.M) if log.exists() else []
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def gpu_status_fields() -> dict:
    """``gpu.status``: the one sentence README.md, docs/index.md and docs/install.md give on what has run on a
    GPU, from ``benchmarks/results/gpu/``: the full runs' reports in the folders named by their date (the
    latest counted), and the fixes' partial re-run in ``<date>-partial/`` (a subset of checks, and notebook 00
    through the GPU path, ``gpu_lease.sh nb00``)."""
    full = sorted(p for p in GPU_RESULTS.iterdir() if p.is_dir() and len(p.name) == 10) if GPU_RESULTS.exists() else []
    if not full:
        return {"status": "The GPU checks (`make gpu-check`) have not run on a GPU yet."}
    last = [json.loads(p.read_text()) for p in sorted(full[-1].glob("*.json"))]
    device = last[0]["device"]
    tiny = [c for r in last for c in r["checks"] if "real-model" not in c["check"] and c["outcome"] != "skipped"]
    real = [c for r in last for c in r["checks"] if "real-model" in c["check"]]
    failed = sorted({c["check"].split("[")[-1][:2] for c in real if c["outcome"] == "failed"})
    text = (f"On a GPU, `make gpu-check` (through `benchmarks/gpu_lease.sh`) ran on a lent {device} on "
            f"{' and '.join(p.name for p in full)}: in the latest full run {sum(c['outcome'] == 'passed' for c in tiny)} "
            f"of {len(tiny)} checks on the tiny lab passed (Unsloth, 4-bit, 16-bit training, TRL on CUDA, the export "
            f"merge, the notebooks) and {sum(c['outcome'] == 'passed' for c in real)} of {len(real)} notebooks on the "
            "real model")
    if failed:
        text += (f"; the failures (notebooks {', '.join(failed[:-1])} and {failed[-1]}) led to fixes that have not run "
                 "on a GPU")
    partial = GPU_RESULTS / f"{full[-1].name}-partial"
    steps = _nb00_steps(partial / "nb00_gpu.log")
    if steps:
        text += (f", and notebook 00 at full size on the real model through the GPU path (Unsloth's 4-bit base, bf16) "
                 f"ran {steps[0]} of its {steps[1]} GRPO steps before the session's GPU time ran out")
    return {"status": f"{text}. Not run on a GPU: {GPU_NOT_RUN}; the reports are in `benchmarks/results/gpu/`."}


def lab_heldout_fields() -> dict:
    """``lab.*``: what the tiny lab's held-out set of ``configs/demo.yaml`` is made of, computed from the task:
    ``n`` problems, ``sets`` distinct sets of operands (each asked in every order), ``answers`` distinct answers."""
    import yaml

    from sdpo_kit.registry import make_task

    task = make_task(**yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())["task"])
    heldout = task.splits()[1]
    operands = [tuple(int(x) for x in r["prompt"][-1]["content"].rstrip("=").split("+")) for r in heldout]
    return {"n": str(len(heldout)), "sets": str(len({task.problem_key(o) for o in operands})),
            "answers": str(len({r["answer"] for r in heldout})), "share": f"{1 / len(heldout):.3f}"}
