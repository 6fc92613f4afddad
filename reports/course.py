"""The course's numbers: the first run (``bench_first_run.py``), quoted by the README, the docs home page
and notebook 00."""

from __future__ import annotations

from pathlib import Path

from reports.format import md_table, provenance

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
    paces = sorted(r["s_per_step"] for r in runs)
    return {"before": f"{s['median_before']:.2f}", "after": f"{s['median_after']:.2f}",
            "after_low": f"{afters[0]:.2f}", "after_high": f"{afters[-1]:.2f}", "lift": f"{s['median_lift']:+.2f}",
            "min_lift": f"{s['min_lift']:+.2f}", "wall_s": f"{s['median_wall_s']:.0f}",
            "wall_min": f"{-(-s['max_wall_s'] // 60):.0f}", "s_per_step": f"{s['median_s_per_step']:.1f}",
            "s_per_step_low": f"{paces[0]:.0f}", "s_per_step_high": f"{-(-paces[-1] // 1):.0f}",
            "n_eval": str(s["n_eval"]), "seeds": str(len(runs)), "steps": str(runs[0]["steps"]),
            **{k: f"{v:.2f}" for k, v in s.get("position", {}).items()}}


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
