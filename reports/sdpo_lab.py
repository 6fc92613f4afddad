"""The skill lab's report (``bench_sdpo_lab.py``'s results): the dial's teacher quality, SDPO minus
GRPO per dial, and how soon each method reaches GRPO's final accuracy at the top of the dial.

    sdpo_lab(results) -> str           the docs block ``<!-- report:sdpo-lab -->``
    sdpo_lab_summary(results) -> str   the README's short block ``<!-- report:sdpo-lab-summary -->``
    sdpo_lab_fields(results) -> dict   numbers inside prose, ``<!--f:sdpo_lab.KEY-->``
    runs_of(results, method, dial), paired_diff(results, method, dial), reach(results, dial)
    sdpo_lab_signal / sdpo_lab_discovery / sdpo_lab_ablations(results) -> str
                                       the blocks ``sdpo-lab-signal*`` (bench_sdpo_lab_signal.py),
                                       ``sdpo-lab-discovery`` (discovery curves per dial) and ``sdpo-lab-ablations``
    sdpo_lab_stability(results) -> str  ``sdpo-lab-stability``: each teacher over a run three times the
                                       budget, median held-out accuracy by step

GRPO's room (``bench_sdpo_lab_headroom.py``, ``bench_sdpo_lab.py --sft-steps``) and the transfer file are reported by
``reports.sdpo_room``.
"""

from __future__ import annotations

import statistics

from reports.format import discovery_table, fmt, md_table, provenance, rate_ci


def steps_to(acc_by_step: list, target: float) -> int | None:
    """The first evaluated step whose held-out accuracy is at least ``target`` (None: never)."""
    return next((step for step, acc in acc_by_step if acc >= target - 1e-9), None)


def runs_of(res: dict, method: str, dial) -> list[dict]:
    return sorted((r for r in res["runs"] if r["method"] == method and str(r["dial"]) == str(dial)),
                  key=lambda r: r["seed"])


def paired_diff(res: dict, method: str, dial, baseline: str = "grpo") -> list[float]:
    """``method``'s final accuracy minus ``baseline``'s, seed by seed, at one dial setting."""
    base = {r["seed"]: r["final_acc"] for r in runs_of(res, baseline, dial)}
    return [r["final_acc"] - base[r["seed"]] for r in runs_of(res, method, dial) if r["seed"] in base]


def reach(res: dict, dial) -> dict:
    """At one dial: GRPO's median final accuracy (the target) and, per method, the steps each seed
    takes to reach it after step 0 (None: never within the run) and their median over the seeds that
    do. ``gain``: the target minus the median start; when it is not positive GRPO did not improve
    and "reaching" it means nothing (the report says so instead of a table)."""
    grpo = runs_of(res, "grpo", dial)
    target = statistics.median(r["final_acc"] for r in grpo)
    start = statistics.median(r["acc_by_step"][0][1] for r in grpo)
    out = {"target": target, "gain": target - start, "methods": {}}
    for m in res["config"]["methods"]:
        steps = [steps_to(r["acc_by_step"][1:], target) for r in runs_of(res, m, dial)]
        done = [s for s in steps if s is not None]
        out["methods"][m] = {"steps": steps, "reached": len(done),
                             "median": statistics.median(done) if done else None}
    return out


def steps_fmt(x) -> str:
    """A step count (or a median of them) without trailing zeros; "None" when never reached."""
    return "None" if x is None else f"{x:g}"


def steps_vs_grpo(r: dict, budget: int, method: str = "sdpo") -> str:
    """One sentence for ``method`` on one ``reach`` result: the median steps it takes to reach GRPO's final
    accuracy, as a share of GRPO's budget (the steps GRPO ran to get there) and of the steps GRPO itself first
    reached it in (what "sooner" means when GRPO gets there before the end), and whether each share is at most
    one half ("" for a method the run did not have)."""
    v, grpo = r["methods"].get(method), r["methods"].get("grpo", {}).get("median")
    if v is None:
        return ""
    if v["median"] is None:
        return f"`{method}` never reaches GRPO's final accuracy within {budget} steps. Within half of GRPO's steps: no."
    by_budget = v["median"] / budget
    by_grpo = None if not grpo else v["median"] / grpo
    within = {(True, True): "yes, both against the budget and against GRPO's own steps",
              (True, False): "yes against the budget, no against GRPO's own steps",
              (False, False): "no", (False, True): "yes against GRPO's own steps, no against the budget"}
    key = (by_budget <= 0.5, by_grpo is not None and by_grpo <= 0.5)
    grpo_part = "" if by_grpo is None else f", {by_grpo:.2f} of the {steps_fmt(grpo)} GRPO itself first reaches it in"
    return (f"`{method}` reaches it at a median of {steps_fmt(v['median'])} steps ({v['reached']} of "
            f"{len(v['steps'])} seeds): {by_budget:.2f} of GRPO's {budget}-step budget{grpo_part}. "
            f"Within half of GRPO's steps: {within[key]}.")


def sdpo_lab(res: dict) -> str:
    s, cfg = res["summary"], res["config"]
    dials, methods = [str(d) for d in cfg["dials"]], cfg["methods"]
    teacher = md_table(["dial (context steps)", "plain acc", "teacher acc, sibling's answer", "teacher acc, feedback",
                        "right-token share of wrong answers", "token win, sibling", "token win, feedback"],
                       [[d, q["plain_acc"], q["demo_acc"], q["feedback_acc"], q["right_token_frac"],
                         q["token_win_demo"], q["token_win_feedback"]] for d, q in s["teacher"].items()])
    rows = []
    for d in dials:
        for m in methods:
            mine = runs_of(res, m, d)
            if not mine:
                continue
            diff = paired_diff(res, m, d) if m != "grpo" else None
            rows.append([d, f"`{m}`", f"{s['lr'][m]:g}", statistics.median(r["final_acc"] for r in mine),
                         fmt([r["final_acc"] for r in mine]),
                         "" if diff is None else f"{statistics.median(diff):+.3f}"])
    finals = md_table(["dial", "method", "lr (tuned)", "final acc (median)", "per seed", "minus GRPO (median paired)"],
                      rows)
    top = dials[-1]
    r = reach(res, top)
    grpo_steps = r["methods"].get("grpo", {}).get("median")
    reach_rows = [[f"`{m}`", fmt(v["steps"]), f"{v['reached']} of {len(v['steps'])}", steps_fmt(v["median"]),
                   "" if not (grpo_steps and v["median"]) else f"{v['median'] / grpo_steps:.2f}"]
                  for m, v in r["methods"].items()]
    parts = [teacher, "",
             f"Held-out greedy accuracy after {cfg['steps']} steps, seeds {fmt(cfg['seeds'])}; learning rates picked "
             f"from {', '.join(f'{lr:g}' for lr in cfg['lr_grid'])} on seeds {fmt(cfg['tune_seeds'])} at the top "
             "dial:", "", finals, ""]
    if r["gain"] > 0:
        parts += [f"Steps to reach GRPO's median final accuracy ({r['target']:.3f}) at the top dial ({top}), evaluated "
                  f"every {_eval_every(res)} steps:", "",
                  md_table(["method", "steps per seed", "reached", "median steps", "over GRPO's"], reach_rows)]
        sentences = (steps_vs_grpo(r, cfg["steps"], m) for m in r["methods"] if m != "grpo")
        parts += ["", " ".join(g for g in sentences if g)]
    else:
        parts += [f"At the top dial ({top}) GRPO's median final accuracy ({r['target']:.3f}) is not above its start "
                  f"({r['target'] - r['gain']:.3f}): GRPO did not improve in {cfg['steps']} steps, so steps-to-GRPO "
                  "measures nothing here."]
    if s.get("tuning"):
        grid = cfg["lr_grid"]
        tune_rows = [[f"`{m}`", *[statistics.median([t["final_acc"] for t in s["tuning"]
                                                     if t["method"] == m and t["lr"] == lr] or [float("nan")])
                                  for lr in grid]] for m in dict.fromkeys(t["method"] for t in s["tuning"])]
        parts += ["", f"Tuning (top dial, seeds {fmt(cfg['tune_seeds'])}): median final accuracy by learning rate, "
                  f"from a start of {s['teacher'][top]['plain_acc']:.3f}:", "",
                  md_table(["method", *[f"lr {lr:g}" for lr in grid]], tune_rows)]
    if s.get("discovery"):
        for d, curves in s["discovery"].items():
            parts += ["", f"Dial {d}: " + discovery_table(curves)]
    return "\n".join(parts + ["", provenance(res)])


def sdpo_lab_summary(res: dict) -> str:
    """The README's short block ``<!-- report:sdpo-lab-summary -->``: per dial, the warm start's accuracy, its
    teacher's accuracy shown a sibling's right answer, GRPO's and SDPO's median final accuracy, and SDPO minus
    GRPO (the median of the per-seed differences, and on how many seeds SDPO ends above GRPO)."""
    s, cfg = res["summary"], res["config"]
    rows = []
    for d in map(str, cfg["dials"]):
        grpo, sdpo, diff = runs_of(res, "grpo", d), runs_of(res, "sdpo", d), paired_diff(res, "sdpo", d)
        if grpo and sdpo and diff:
            rows.append([d, s["teacher"][d]["plain_acc"], s["teacher"][d]["demo_acc"],
                         statistics.median(r["final_acc"] for r in grpo),
                         statistics.median(r["final_acc"] for r in sdpo),
                         f"{statistics.median(diff):+.3f} (above on {sum(x > 0 for x in diff)} of {len(diff)})"])
    return "\n".join([
        md_table(["dial (context steps)", "warm start", "teacher, shown a sibling's answer", "GRPO (median)",
                  "SDPO (median)", "SDPO minus GRPO (median paired)"], rows), "",
        f"Held-out greedy accuracy after {cfg['steps']} steps, seeds {fmt(cfg['seeds'])}; each method's learning rate "
        f"picked from {', '.join(f'{lr:g}' for lr in cfg['lr_grid'])} on seeds {fmt(cfg['tune_seeds'])}.", "",
        provenance(res)])


def _eval_every(res: dict) -> int:
    steps = [step for r in res["runs"][:1] for step, _ in r["acc_by_step"]]
    return steps[1] - steps[0] if len(steps) > 1 else res["config"]["steps"]


def sdpo_lab_fields(res: dict) -> dict:
    s, cfg = res["summary"], res["config"]
    dials = [str(d) for d in cfg["dials"]]
    lo, hi = dials[0], dials[-1]
    plain = [q["plain_acc"] for q in s["teacher"].values()]
    out = {"plain_spread": fmt(max(plain) - min(plain)), "dial_min": lo, "dial_max": hi,
           "top_demo_acc": fmt(s["teacher"][hi]["demo_acc"]), "top_feedback_acc": fmt(s["teacher"][hi]["feedback_acc"]),
           "top_token_win_demo": fmt(s["teacher"][hi]["token_win_demo"]),
           "top_token_win_feedback": fmt(s["teacher"][hi]["token_win_feedback"]),
           "min_token_win_demo": fmt(s["teacher"][lo]["token_win_demo"])}
    for m in cfg["methods"]:
        if m == "grpo":
            continue
        for name, d in (("min", lo), ("max", hi)):
            diff = paired_diff(res, m, d)
            out[f"{m}_minus_grpo_{name}"] = f"{statistics.median(diff):+.3f}" if diff else "n/a"
            out[f"{m}_above_grpo_{name}"] = f"{sum(x > 0 for x in diff)} of {len(diff)}"
    r = reach(res, hi)
    out["grpo_target"], out["grpo_gain"] = fmt(r["target"]), f"{r['gain']:+.3f}"
    grpo = r["methods"].get("grpo", {}).get("median")      # the steps GRPO itself first reaches its final in
    for m, v in r["methods"].items():
        out[f"{m}_steps_to_grpo"] = steps_fmt(v["median"])
        out[f"{m}_reached"] = f"{v['reached']} of {len(v['steps'])}"
        out[f"{m}_steps_over_budget"] = "n/a" if v["median"] is None else f"{v['median'] / cfg['steps']:.2f}"
        out[f"{m}_steps_over_grpo"] = "n/a" if v["median"] is None or not grpo else f"{v['median'] / grpo:.2f}"
    return out


# --- why GRPO stalls (bench_sdpo_lab_signal.py) and the test-time methods (bench_sdpo_lab.py --discovery) ---

SIGNAL_HEADERS = ["dial", "stage", "split", "greedy acc", "sampled acc", "p = 0", "0 < p < 1", "p = 1",
                  "mixed groups of G"]


def sdpo_lab_signal(res: dict) -> str:
    """The block ``<!-- report:sdpo-lab-signal* -->``: the learning signal GRPO's groups carry, medians over seeds."""
    c = res["config"]
    return "\n".join([
        f"p: a row's success rate over {c['samples']} samples at the training temperature; held-out split and "
        f"{c['train_rows']} training rows; GRPO {c['steps']} steps at lr {c['lr']:g}, medians over seeds "
        f"{', '.join(map(str, c['seeds']))}:", "",
        md_table(SIGNAL_HEADERS, res["summary"]["table"]), "", provenance(res)])


def attempts_to(d: dict, method: str, target: float) -> int | None:
    """The fewest attempts k (of the measured budgets) at which ``method`` discovers at least ``target``."""
    curve = d["methods"][method]["discovery"]
    return next((k for k, rate in zip(d["budgets"], curve) if rate >= target - 1e-9), None)


def attempts_vs_best_of_k(d: dict) -> str:
    """One sentence on one discovery table: the attempts test-time SDPO needs to reach the rate best-of-k
    discovers at the largest budget, and whether that is at most a third of that budget."""
    k_max = d["budgets"][-1]
    target = d["methods"]["best_of_k"]["discovery"][-1]
    if target <= 0:
        return f"Best-of-k discovers nothing within {k_max} attempts, so there is no rate to reach."
    k = attempts_to(d, "test_time_sdpo", target)
    reached = "never within the budget" if k is None else f"at k={k} ({k / k_max:.2f} of the attempts)"
    return (f"Best-of-k reaches {fmt(target)} at k={k_max}; test-time SDPO reaches it {reached}. "
            f"Within a third of the {k_max} attempts: {'yes' if k is not None and 3 * k <= k_max else 'no'}.")


def sdpo_lab_discovery(res: dict) -> str:
    """The block ``<!-- report:sdpo-lab-discovery -->``: discovery curves at the lowest and highest dial."""
    found = res["summary"].get("discovery") or {}
    if not found:
        return "Discovery curves: not measured in this results file."
    parts = []
    for dial, d in sorted(found.items(), key=lambda kv: int(kv[0])):
        hard, n = d.get("hard_of_heldout", [d["rows"], None])
        parts += [f"**Dial {dial}** ({hard} of {n} held-out problems are hard; the first {d['rows']} are used):", "",
                  discovery_table(d), "", attempts_vs_best_of_k(d), ""]
    return "\n".join(parts + [provenance(res)])


def discovery_fields(d: dict) -> dict:
    """One discovery table's numbers for prose: ``rows``, ``k_max``, ``batch``, each method's rate at the largest
    budget (``best_of_k``, ``multi_turn``, ``test_time_sdpo``) with its 95% Wilson interval over the questions
    (``<method>_ci``) and its rate after the first batch (``<method>_first_batch``), ``one_question`` (the step one
    question makes), and ``tts_reaches`` (the fewest attempts at which test-time SDPO reaches best-of-k's rate at
    the largest budget, "never" within it)."""
    n, k_max = d["rows"], d["budgets"][-1]
    out = {"rows": str(n), "k_max": str(k_max), "batch": str(d["batch_size"]), "one_question": fmt(1 / max(1, n))}
    for m, v in d["methods"].items():
        out[m], out[f"{m}_ci"] = fmt(v["discovery"][-1]), rate_ci(v["discovery"][-1], n)
        at_batch = [r for k, r in zip(d["budgets"], v["discovery"]) if k <= d["batch_size"]]
        out[f"{m}_first_batch"] = fmt(at_batch[-1]) if at_batch else "n/a"
    k = attempts_to(d, "test_time_sdpo", d["methods"]["best_of_k"]["discovery"][-1])
    out["tts_reaches"] = "never" if k is None else str(k)
    return out


def sdpo_lab_discovery_fields(res: dict) -> dict:
    """``<!--f:sdpo_lab_discovery.KEY_top-->`` and ``_bottom``: ``discovery_fields`` of the highest and the lowest
    dial setting measured (``best_of_k_top``, ``multi_turn_ci_bottom``, ``rows_top``, ...)."""
    found = sorted((res["summary"].get("discovery") or {}).items(), key=lambda kv: int(kv[0]))
    out = {}
    for end, (_, d) in (("bottom", found[0]), ("top", found[-1])) if found else ():
        out.update({f"{k}_{end}": v for k, v in discovery_fields(d).items()})
    return out


ABLATIONS = {"sdpo": "TRL's defaults: token-level (`sampled_token`), alpha 1, EMA teacher",
             "sdpo_loss_third": "the loss times 1/3, same learning rate",
             "sdpo_sequence": "sequence-level credit (one weight per completion)",
             "sdpo_topk": "logit-level: top-100 logits with a tail bucket",
             "sdpo_full_logits": "logit-level: full logits",
             "sdpo_paper": "the paper authors' repository's recipe (lasgroup/SDPO; `configs/sdpo_paper.yaml`)",
             "sdpo_frozen": "frozen teacher (the warm start)",
             "sdpo_live": "live teacher (the student itself)",
             "sdpo_feedback_only_without_solution": "feedback, only where no sibling succeeded"}


def mean_update_norm(run: dict) -> float | None:
    norms = [n for _, n in run.get("update_norm_by_step") or []]
    return sum(norms) / len(norms) if norms else None


def ablation_stats(res: dict) -> dict:
    """Per variant at the ablations' one dial: {method: {"runs", "final" (median), "minus_sdpo" (median paired
    difference, None for sdpo), "norm" (median of the runs' mean update norms, None when not logged)}}."""
    dial = res["config"]["dials"][0]
    out = {}
    for method in res["config"]["methods"]:
        mine = runs_of(res, method, dial)
        if not mine:
            continue
        diff = paired_diff(res, method, dial, baseline="sdpo")
        norms = [x for x in map(mean_update_norm, mine) if x is not None]
        out[method] = {"runs": mine, "final": statistics.median(r["final_acc"] for r in mine),
                       "minus_sdpo": None if method == "sdpo" or not diff else statistics.median(diff),
                       "norm": statistics.median(norms) if norms else None}
    return out


def sdpo_lab_ablations(res: dict) -> str:
    """The block ``<!-- report:sdpo-lab-ablations -->``: each variant's final accuracy at one dial, its
    paired difference from ``sdpo`` and its mean parameter-update norm per step."""
    c = res["config"]
    dial = c["dials"][0]
    rows = [[f"`{method}`", ABLATIONS.get(method, ""), f"{v['runs'][0]['lr']:g}", v["final"],
             ", ".join(fmt(r["final_acc"]) for r in v["runs"]),
             "" if v["minus_sdpo"] is None else f"{v['minus_sdpo']:+.3f}",
             "" if v["norm"] is None else f"{v['norm']:.4f}"]
            for method, v in ablation_stats(res).items()]
    start = res["summary"]["start_acc"]
    start = start.get(str(dial), start.get(dial))
    head = (f"Dial {dial}, from a start of {fmt(start)}; {c['steps']} steps, seeds {', '.join(map(str, c['seeds']))}; "
            f"every variant at SDPO's tuned learning rate (pinned, not tuned per variant):")
    return "\n".join([head, "", md_table(["method", "what changes", "lr", "final acc (median)", "per seed",
                                          "minus `sdpo` (median paired)", "update norm per step (median of run means)"],
                                         rows), "", provenance(res)])


def sdpo_lab_ablations_fields(res: dict) -> dict:
    """Fields ``<!--f:sdpo_lab_ablations.<method>_final-->`` (and ``_norm``, ``_minus_sdpo``) for the prose."""
    out = {}
    for method, v in ablation_stats(res).items():
        out[f"{method}_final"] = fmt(v["final"])
        if v["norm"] is not None:
            out[f"{method}_norm"] = f"{v['norm']:.4f}"
        if v["minus_sdpo"] is not None:
            out[f"{method}_minus_sdpo"] = f"{v['minus_sdpo']:+.3f}"
    return out


def median_curve(runs: list[dict]) -> dict:
    """{step: the median over ``runs`` of the held-out accuracy at that step} (the first run's steps)."""
    return {step: statistics.median(dict(map(tuple, r["acc_by_step"]))[step] for r in runs)
            for step, _ in runs[0]["acc_by_step"]}


TEACHERS = {"sdpo": "EMA (rate 0.05)", "sdpo_frozen": "frozen (the warm start)", "sdpo_live": "live (the policy)",
            "grpo": "none (GRPO)"}


def sdpo_lab_stability(res: dict) -> str:
    """The block ``<!-- report:sdpo-lab-stability -->``: per method, the median over seeds of the
    held-out accuracy at every hundredth step, the lowest point of that median curve and the step
    it is at, and the seeds' finals."""
    c = res["config"]
    dial = c["dials"][0]
    marks = sorted({step for r in res["runs"] for step, _ in r["acc_by_step"] if step % 100 == 0})
    rows = []
    for m in c["methods"]:
        runs = runs_of(res, m, dial)
        curve = median_curve(runs)
        low = min(curve, key=lambda step: (curve[step], step))
        rows.append([f"`{m}`", TEACHERS.get(m, ""), *[curve[k] for k in marks], f"{fmt(curve[low])} (step {low})",
                     ", ".join(fmt(r["final_acc"]) for r in runs)])
    head = (f"Dial {dial}, {c['steps']} steps, seeds "
            f"{', '.join(map(str, c['seeds']))}; median held-out accuracy over the seeds by step:")
    return "\n".join([head, "", md_table(["method", "teacher", *[f"step {k}" for k in marks],
                                          "lowest median (step)", "final per seed"], rows), "", provenance(res)])
