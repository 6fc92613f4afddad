"""Fields for the prose of notebooks 04, 07, 08 and the concept pages: the numbers (and the words that
compare them) their sentences quote, each computed from one results file, so a sentence cannot say
"about 4 in 5" over a table that shows 0.968.

    DOC_FIELDS        field file name -> (results file, function of the results -> {field: text}),
                      merged into ``report.FIELDS``

    time_smoke, time_cold, time_full, time_smoke_real   a notebook's wall seconds (``nb04``, ...) in
                      ``bench_notebooks.py``'s smoke, cold-cache, full-size and real-model smoke runs
    nb04_read, nb07_read, nb08_read   comparisons over a notebook's full-size RESULTS
    ppo_read, vapor_read              comparisons over ``bench_ppo.py`` and ``bench_vapor.py``
    sdpo_lab_room_read                the speed comparison of ``sdpo_lab_room.json``, in words
    sdpo_lab_signal_read, sdpo_lab_signal_1000_read   GRPO's learning signal (``bench_sdpo_lab_signal.py``)
    lab_read                          the tiny lab's default warm start (``bench_lab.py``)

A word field (``above`` / ``below``, a variant's name) is what keeps a sentence true when the numbers
move; the sentence around it is written so that either word reads right.
"""

from __future__ import annotations

import re
import statistics

from reports.format import fmt
from reports.sdpo_room import sdpo_lab_room_fields


def _walls(res: dict) -> dict:
    """Each notebook's wall time, ``nb04`` -> "167 s"; a notebook the file lacks says so."""
    out = {f"nb{n:02d}": "(not in this results file)" for n in range(10)}
    out.update({f"nb{r['notebook'][:2]}": f"{r['wall_s']:.0f} s" for r in res["runs"]})
    return out


def lab_read(res: dict) -> dict:
    """``bench_lab.py``: the default warm start's held-out greedy accuracy (no copy steps), and per warm start
    how often it copies a random number hinted in its prompt (``copies_random_hint_<copy_steps>``)."""
    plain = next((r for r in res["runs"] if r["copy_steps"] == 0), None)
    return {"warm_start_acc": fmt(plain["heldout_acc"]) if plain else "n/a",
            **{f"copies_random_hint_{r['copy_steps']}": fmt(r["acc_random_hint"]) for r in res["runs"]}}


def _notebook(res: dict, nb: str) -> dict:
    run = next((r for r in res["runs"] if r["notebook"].startswith(nb)), None)
    return (run or {}).get("results") or {}


def _above(a: float, b: float) -> str:
    return "above" if a > b else "below" if a < b else "level with"


def _count(flags) -> str:
    flags = list(flags)
    return f"{sum(map(bool, flags))} of {len(flags)}"


def nb04_read(res: dict) -> dict:
    """Notebook 04's full-size run: per seed, is the additive variant's held-out margin the widest; where do
    the variants' median accuracies and margins stand against each other and the start."""
    r = _notebook(res, "04")
    if not r:
        return {}
    variants = ("grpo_span", "as_specified", "additive")
    margins = {v: r[f"{v}_margin_after"] for v in variants}
    widest = [m > max(margins[o][i] for o in variants if o != "additive") for i, m in enumerate(margins["additive"])]
    acc = {v: r[f"{v}_acc_after_median"] for v in variants}
    seed_spread = {v: max(r[f"{v}_acc_after"]) - min(r[f"{v}_acc_after"]) for v in variants}
    return {
        "additive_widest_seeds": _count(widest),
        "additive_acc_vs_others": "below" if acc["additive"] < min(acc["grpo_span"], acc["as_specified"]) else
        "not below",
        "as_specified_minus_grpo_span_acc": f"{acc['as_specified'] - acc['grpo_span']:+.3f}",
        "grpo_span_acc_seed_spread": f"{seed_spread['grpo_span']:.3f}",
        "as_specified_acc_seed_spread": f"{seed_spread['as_specified']:.3f}",
        "grpo_span_margin_vs_start": _above(r["grpo_span_margin_after_median"], r["margin_before"]),
        "additive_right_vs_start": _above(r["additive_preferred_right_median"], r["preferred_right_before"]),
    }


def _rm_curve(steps, scores, accs) -> dict:
    """The run on the learned reward model: accuracy from its start to its lowest and last evaluation, the raw
    score from its first logged value to its last, and which way each went."""
    scored = [(s, x) for s, x in zip(steps, scores) if x is not None]
    low = min(range(len(accs)), key=lambda i: (accs[i], steps[i]))
    lo_score, hi_score = min(x for _, x in scored), max(x for _, x in scored)
    return {"acc_start": fmt(accs[0]), "acc_low": fmt(accs[low]), "acc_low_step": str(steps[low]),
            "acc_last": fmt(accs[-1]), "last_step": str(steps[-1]),
            "acc_last_vs_start": _above(accs[-1], accs[0]),
            "score_first": f"{scored[0][1]:+.2f}", "score_first_step": str(scored[0][0]),
            "score_last": f"{scored[-1][1]:+.2f}", "score_last_vs_first": _above(scored[-1][1], scored[0][1]),
            "score_low": f"{lo_score:+.2f}", "score_high": f"{hi_score:+.2f}",
            "score_sign": "below zero" if hi_score < 0 else "above zero" if lo_score > 0 else "on both sides of zero"}


def nb07_read(res: dict) -> dict:
    """Notebook 07's full-size run: per seed, distillation alone against teacher-student PPO; the gap each
    seed of distillation closes; the run on the learned reward model (``rm_*``)."""
    r = _notebook(res, "07")
    if not r:
        return {}
    s, t = r["acc_student"], r["acc_teacher"]
    kd, tp, ppo = r["kd_acc_after"], r["teacher_ppo_acc_after"], r["ppo_acc_after"]
    gaps = [(a - s) / (t - s) for a in kd] if t > s else [float("nan")]
    return {"kd_gap_min": f"{min(gaps):.2f}", "kd_above_teacher_ppo": _count(a > b for a, b in zip(kd, tp)),
            "teacher_ppo_above_student": _count(a > s for a in tp), "ppo_above_student": _count(a > s for a in ppo),
            **{f"rm_{k}": v for k, v in _rm_curve(r["rm_run_steps"], r["rm_run_score_raw"], r["rm_run_acc"]).items()}}


def nb08_read(res: dict) -> dict:
    """Notebook 08's full-size run: each export's size over the fp32 merged model's."""
    r = _notebook(res, "08")
    if not r:
        return {}
    full = r["merged_fp32_kb"]
    return {f"{k[:-3]}_size": f"{r[k] / full:.2f}" for k in r if k.endswith("_kb") and k != "lora_adapter_kb"}


def ppo_read(res: dict) -> dict:
    """``bench_ppo.py``: the reward model's verdicts on the student's samples, the run on it (``rm_*``), and
    per seed distillation alone against teacher-student PPO."""
    sm = res["summary"]
    rm = sm["reward_model"]
    evals = [c for c in sm["rm_curve"] if c["acc"] is not None]
    curve = _rm_curve([c["step"] for c in evals], [c["score_raw"] for c in evals], [c["acc"] for c in evals])
    by = {m: {r["seed"]: r for r in res["runs"] if r["method"] == m} for m in ("kd", "teacher_ppo")}
    kd_wall = statistics.median(r["wall_s"] for r in by["kd"].values())
    return {"rm_agreement": fmt(rm["agreement"]), "rm_false_positive": fmt(rm["false_positive"]),
            "rm_true_positive": fmt(rm["true_positive"]), "rm_n": str(rm["n"]),
            "kd_above_teacher_ppo": _count(by["kd"][k]["acc_after"] > by["teacher_ppo"][k]["acc_after"]
                                           for k in by["kd"]),
            "kd_wall_s": f"{kd_wall:.0f}", "steps": str(res["config"]["steps"]),
            **{f"rm_{k}": v for k, v in curve.items()}}


def vapor_read(res: dict) -> dict:
    """``bench_vapor.py``: which variant ends with the smallest and the largest held-out margin; the spread of
    the variants' median accuracies against the widest spread between one variant's seeds."""
    variants = res["config"]["variants"]
    runs = {v: [r for r in res["runs"] if r["variant"] == v] for v in variants}
    margin = {v: statistics.median(r["margin_after"] for r in rs) for v, rs in runs.items()}
    acc = {v: statistics.median(r["acc_after"] for r in rs) for v, rs in runs.items()}
    between = max(acc.values()) - min(acc.values())
    within = max(max(r["acc_after"] for r in rs) - min(r["acc_after"] for r in rs) for rs in runs.values())
    return {"smallest_margin": f"`{min(margin, key=margin.get)}`", "largest_margin": f"`{max(margin, key=margin.get)}`",
            "acc_between_variants": f"{between:.3f}", "acc_within_variant": f"{within:.3f}",
            "between_vs_within": "smaller than" if between < within else "at least as large as",
            "grpo_span_margin_vs_start": _above(margin.get("grpo_span", float("nan")),
                                                res["summary"]["before"]["margin"])}


def sdpo_lab_room_read(res: dict) -> dict:
    """``sdpo_lab_room.json``: each SDPO method's steps to GRPO's final accuracy, against GRPO's budget and
    its own steps (``reach_<method>``), without the yes / no on "within half of GRPO's steps"."""
    reached = {k: v for k, v in sdpo_lab_room_fields(res).items() if k.startswith("reach_")}
    return {k: re.sub(r"\s*Within half of GRPO's steps: .*$", "", v) for k, v in reached.items()}


def signal_read(res: dict) -> dict:
    """``bench_sdpo_lab_signal.py``: the range of mixed groups and never-solved rows over the table, and GRPO's
    gains per dial and split (``greedy_gain_<dial>_<split>``, ``sampled_gain_...``, ``always_...``)."""
    rows = [dict(zip(("dial", "stage", "split", "greedy", "sampled", "never", "mixed_rows", "always", "mixed"), r))
            for r in res["summary"]["table"]]
    out = {"mixed_low": fmt(min(r["mixed"] for r in rows)), "mixed_high": fmt(max(r["mixed"] for r in rows)),
           "never_low": fmt(min(r["never"] for r in rows)), "never_high": fmt(max(r["never"] for r in rows)),
           "steps": str(res["config"]["steps"])}
    for d in {r["dial"] for r in rows}:
        for split in ("heldout", "train"):
            start, end = [r for r in rows if r["dial"] == d and r["split"] == split][:2]
            out |= {f"greedy_gain_{d}_{split}": f"{end['greedy'] - start['greedy']:+.3f}",
                    f"sampled_gain_{d}_{split}": f"{end['sampled'] - start['sampled']:+.3f}",
                    f"always_start_{d}_{split}": fmt(start["always"]), f"always_end_{d}_{split}": fmt(end["always"]),
                    f"mixed_start_{d}_{split}": fmt(start["mixed"]), f"mixed_end_{d}_{split}": fmt(end["mixed"])}
    return out


DOC_FIELDS = {
    "time_smoke": ("notebooks_smoke", _walls), "time_cold": ("notebooks_smoke_cold", _walls),
    "time_full": ("notebooks_full", _walls), "time_smoke_real": ("notebooks_smoke_real", _walls),
    "nb04_read": ("notebooks_full", nb04_read), "nb07_read": ("notebooks_full", nb07_read),
    "nb08_read": ("notebooks_full", nb08_read), "ppo_read": ("ppo", ppo_read), "vapor_read": ("vapor", vapor_read),
    "sdpo_lab_room_read": ("sdpo_lab_room", sdpo_lab_room_read),
    "sdpo_lab_signal_read": ("sdpo_lab_signal", signal_read),
    "sdpo_lab_signal_1000_read": ("sdpo_lab_signal_1000", signal_read), "lab_read": ("lab", lab_read),
}
