"""The code reward's report (``bench_code_reward.py``'s results): test runs per second through the
sandbox, a pool of workers against one program at a time, and what one looping program costs.

    code_reward(results) -> str        the README / docs block ``<!-- report:code-reward -->``
    code_lab(results) -> str           ``<!-- report:code-lab -->``: what the tiny model learns from code
                                       feedback (``bench_code_lab.py``: teacher per dial, GRPO vs SDPO)
"""

from __future__ import annotations

import statistics

from reports.format import fmt, md_table, provenance
from reports.sdpo_lab import reach, steps_fmt, steps_vs_grpo

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
        f"time (the target: at least 50 a second on 2 cores). One looping program delays the pool's trivial batch by "
        f"**{s['loop_delay_s_pool']:.2f} s**; its own wall-clock limit is {s['loop_wall_limit_s']:.1f} s (the time "
        f"limit plus the interpreter's start)." + (f" Isolation on the machine: {held}." if held else ""), "",
        *lab_step(s), provenance(res)])


def lab_step(s: dict) -> list[str]:
    """The lab_code training step's scoring, three ways (absent from older results files)."""
    if "lab_step_child_per_test_s" not in s:
        return []
    return [f"One lab_code training step ({int(s['lab_step_jobs'])} completions, {int(s['lab_step_distinct'])} "
            f"distinct programs, six tests each): **{s['lab_step_child_per_distinct_program_s']:.2f} s** with one "
            f"child per distinct program, {s['lab_step_child_per_program_s']:.2f} s with one child per program, "
            f"{s['lab_step_child_per_test_s']:.2f} s with one child per test.", ""]


def code_lab(res: dict) -> str:
    s, cfg = res["summary"], res["config"]
    teacher = md_table(
        ["dial (context steps)", "plain", "teacher + sibling's answer", "teacher + tests' feedback",
         "token win, sibling", "token win, feedback"],
        [[d, q["plain_acc"], q["demo_acc"], q["feedback_acc"], q["token_win_demo"], q["token_win_feedback"]]
         for d, q in s["teacher"].items()])
    lrs = s.get("lr") or {}
    rows, verdict = [], []
    fitted = any(r.get("train_final_acc") is not None for r in res["runs"])   # runs that kept the training split's
    for d in cfg["run_dials"]:
        has_grpo = any(r["method"] == "grpo" and r["dial"] == d for r in res["runs"])
        got = reach(res, d) if has_grpo else {"methods": {}}
        for m in cfg["methods"]:
            mine = [r for r in res["runs"] if r["dial"] == d and r["method"] == m]
            fails = [r["zero_std_groups"] for r in mine if r.get("zero_std_groups") is not None]
            c = got["methods"].get(m)
            rewards = [trend(r.get("reward_by_step") or []) for r in mine]
            rows.append([d, m, f"{lrs[m]:g}" if m in lrs else "config's",
                         statistics.median(r["start_acc"] for r in mine),
                         statistics.median(r["final_acc"] for r in mine), fmt([r["final_acc"] for r in mine]),
                         "" if c is None else f"{steps_fmt(c['median'])} ({c['reached']} of {len(c['steps'])})",
                         f"{sum(r['final_acc'] > r['start_acc'] for r in mine)} of {len(mine)}",
                         "" if None in rewards or not rewards else
                         f"{statistics.median(a for a, _ in rewards):.3f} -> "
                         f"{statistics.median(b for _, b in rewards):.3f}",
                         fmt(statistics.median(fails)) if fails else "",
                         *([fit_fmt(mine)] if fitted else [])])
        if has_grpo:
            verdict += [("GRPO climbs: " if got["gain"] > 0 else "**GRPO does not climb here**: ")
                        + f"its median final accuracy is {fmt(got['target'])}, {got['gain']:+.3f} from its start"
                        + (". " + " ".join(steps_vs_grpo(got, cfg["steps"], m) for m in cfg["methods"] if m != "grpo")
                           if got["gain"] > 0 else
                           ", so reaching it says nothing of learning; the column that does is the seeds above their "
                           "start."), ""]
    runs = md_table(["dial", "method", "lr", "start (median)", f"after {cfg['steps']} steps (median)", "per seed",
                     "steps to GRPO's final (median, seeds that reach it)", "seeds above their start",
                     "training reward, first -> last 10 steps (median)", "groups of one reward (no GRPO signal)",
                     *(["accuracy on training functions, start -> end (median)"] if fitted else [])], rows)
    top = str(max(cfg["dials"]))
    ex = s["teacher"][top].get("example")
    example = [] if ex is None else [
        f"A wrong attempt at dial {top} (`f(x)={ex['attempt']}` on `{ex['prompt']}`), the feedback the sandbox "
        "returns, and the teacher prompt SDPO builds from it:", "", "```text", ex["teacher_prompt"], "```", ""]
    return "\n".join([
        "Held-out greedy accuracy (functions never trained on) of the warm start, and its teacher reprompted:", "",
        teacher, "", *example,
        f"Training from the top dial's warm start, seeds {', '.join(map(str, cfg['seeds']))}, {rates(cfg)}:", "", runs,
        "", *verdict, *discovery_lines(s.get("discovery") or {}), *parts_lines(cfg), provenance(res)])


def rates(cfg: dict) -> str:
    """How the runs' learning rates were chosen: tuned on other seeds, pinned (``--lr``), or the config's."""
    if "lr_grid" not in cfg:
        return "every method at the config's learning rate (none tuned here)"
    pinned_lr = cfg.get("pinned_lr") or {}
    pinned = {m: pinned_lr[m] for m in cfg["methods"] if m in pinned_lr}   # in the table's order
    tuned = [m for m in cfg["methods"] if m not in pinned]
    whose = "each method's learning rate" if not pinned else "the learning rate of " + ", ".join(tuned)
    said = ([f"{whose} the best of "
             f"{', '.join(f'{x:g}' for x in cfg['lr_grid'])} by median final accuracy on seeds "
             f"{', '.join(map(str, cfg['tune_seeds']))}"] if tuned else [])
    if pinned:
        said.append("learning rates pinned, not tuned here: " + ", ".join(f"{m} {lr:g}" for m, lr in pinned.items()))
    return "; ".join(said)


def parts_lines(cfg: dict) -> list[str]:
    """Who measured which methods, for a file merged from parts (``config["parts"]``: the commit and the command
    of each). A run of ``bench_code_lab.py`` that takes more than one sitting is one invocation now, continued
    with ``--resume``."""
    parts = cfg.get("parts") or []
    if len(parts) < 2:
        return []
    return ["Measured in parts, merged into one file: " + "; ".join(
        f"{', '.join(p['methods'])} by `{p['command']}` at commit `{p['commit']}`" for p in parts) + ".", ""]


def fit_fmt(runs: list[dict]) -> str:
    """Greedy accuracy on the training functions before and after (median), where the runs kept it."""
    kept = [r for r in runs if r.get("train_final_acc") is not None]
    if not kept:
        return ""
    med = {k: statistics.median(r[k] for r in kept) for k in
           ("train_start_acc", "train_final_acc", "heldout_as_training_fn_start", "heldout_as_training_fn_final")}
    return (f"{med['train_start_acc']:.3f} -> {med['train_final_acc']:.3f}; held-out answered with one: "
            f"{med['heldout_as_training_fn_start']:.3f} -> {med['heldout_as_training_fn_final']:.3f}")


def trend(by_step: list, window: int = 10) -> tuple[float, float] | None:
    """The mean of the first and of the last ``window`` values of ``[[step, value], ...]`` (None: empty)."""
    if not by_step:
        return None
    first, last = [v for _, v in by_step[:window]], [v for _, v in by_step[-window:]]
    return sum(first) / len(first), sum(last) / len(last)


def discovery_lines(found: dict) -> list[str]:
    """The code lab's discovery table (``--discovery``): rate by k with 95% intervals, attempts to match."""
    if not found:
        return []
    pooled, ks = found["pooled"], found["budgets"]
    rows = [[m, *[f"{x:.3f} [{lo:.2f}, {hi:.2f}]" for x, lo, hi in zip(v["discovery"], *v["ci95"])],
             "never" if v["attempts_to_match"] is None else f"{v['attempts_to_match']} ({v['share_of_max']:.2f})"]
            for m, v in pooled["methods"].items()]
    hard, held = found["hard_of_heldout"]
    t = found.get("tts_tuning") or {}
    rate = ("Test-time SDPO at its library default rate (untuned)." if not t else
            f"Test-time SDPO at rate {t['lr']:g}, the best of {', '.join(t['by_lr'])} by discovery within "
            f"{t['picked_at_k']} attempts on {t['rows']} hard training functions (none of them held out), seed 100.")
    return [f"Test-time discovery on the {found['rows']} hard held-out functions ({hard} of {held} solved in under 10% "
            f"of 32 samples), seeds {', '.join(found['per_seed'])}, every (seed, function) run pooled, 95% intervals "
            "from resampling the functions:", "",
            md_table(["method", *[f"k = {k}" for k in ks], f"attempts to reach best-of-k at {max(ks)} (share)"], rows),
            "", rate, ""]


def sdpo_head_start(res: dict) -> str:
    """``<!-- report:sdpo-head-start -->``: every setting's teacher head start against SDPO's gain over GRPO."""
    s = res["summary"]
    rows = [[p["lab"], p["setting"], p["method"], fmt(p["plain_acc"]), fmt(p["head_start"]),
             "n/a" if p["token_win"] is None else fmt(p["token_win"]),
             f"{p['gain']:+.3f}", ", ".join(f"{g:+.3f}" for g in p["gain_per_seed"])] for p in res["runs"]]
    f = s.get("fit") or {}
    line = ("" if not f else
            f"Over the {f['n']} points, gain = {f['intercept']:+.3f} {f['slope']:+.3f} x head start (Pearson r = "
            f"{f['r']:.2f}" + ("" if f.get("r_token_win") is None else
                                   f"; against the token win, r = {f['r_token_win']:.2f} over {f['n_token_win']}")
            + f"); the line crosses zero at a head start "
            f"of **{f['zero_crossing']:.2f}**.")
    pos, sides = f.get("positive") or {}, f.get("by_sign") or {}
    if sides:
        lo, hi = sides["head_start <= 0"], sides["head_start > 0"]
        line += (f" Split at zero: the {lo['n']} points with no head start have a median gain of "
                 f"{lo['median_gain']:+.3f}, the {hi['n']} with one {hi['median_gain']:+.3f}")
        line += ("." if not pos else f"; a line through those {pos['n']} alone has slope {pos['slope']:+.3f} "
                 f"(r = {pos['r']:.2f}).")
    missing = ("" if not s.get("missing") else
               f" Not measured yet: {', '.join(f'`{m}`' for m in s['missing'])}.")
    sources = ", ".join(f"`{name}.json` at `{commit}`" for name, commit in s["sources"].items())
    return "\n".join([
        md_table(["lab", "setting", "method", "plain", "head start", "token win",
                  "gain over GRPO (median final minus GRPO's)", "per seed (same seed's GRPO)"], rows), "",
        line + missing, "", f"Points from {sources}.", "", provenance(res)])


def sdpo_head_start_fields(res: dict) -> dict:
    """Prose numbers of ``sdpo_head_start.json``: the fit, and the median gain on each side of zero."""
    f = res["summary"]["fit"]
    lo, hi = f["by_sign"]["head_start <= 0"], f["by_sign"]["head_start > 0"]
    return {"n": str(f["n"]), "labs": str(len(res["summary"]["labs"])), "r": f"{f['r']:.2f}",
            "slope": f"{f['slope']:+.2f}", "zero_crossing": f"{f['zero_crossing']:.2f}",
            "n_none": str(lo["n"]), "gain_none": f"{lo['median_gain']:+.3f}", "n_some": str(hi["n"]),
            "gain_some": f"{hi['median_gain']:+.3f}"}   # gains carry their sign


def code_lab_fields(res: dict) -> dict:
    """Prose numbers of a code lab results file (``code_lab.json``, ``code_lab_starving.json``): the top
    dial's teacher, and per method its median final accuracy and seeds above their start; where the runs
    kept them, the accuracy on training functions and the share of held-out prompts answered with one."""
    s, cfg = res["summary"], res["config"]
    d = max(cfg["run_dials"])
    q = s["teacher"][str(d)]
    out = {"plain": fmt(q["plain_acc"]), "feedback_acc": fmt(q["feedback_acc"]), "demo_acc": fmt(q["demo_acc"]),
           "token_win_feedback": fmt(q["token_win_feedback"]),
           "steps": str(cfg["steps"]), "seeds": str(len(cfg["seeds"]))}
    for m in cfg["methods"]:
        mine = [r for r in res["runs"] if r["dial"] == d and r["method"] == m]
        out[f"{m}_final"] = fmt(statistics.median(r["final_acc"] for r in mine))
        out[f"{m}_above_start"] = f"{sum(r['final_acc'] > r['start_acc'] for r in mine)} of {len(mine)}"
        if mine and all(r.get("teacher_coverage") is not None for r in mine):   # an SDPO method: rows with a teacher
            out[f"{m}_coverage"] = fmt(statistics.median(r["teacher_coverage"] for r in mine))
        if mine and all(r.get("train_final_acc") is not None for r in mine):   # the runs kept the training split's
            out[f"{m}_train_final"] = fmt(statistics.median(r["train_final_acc"] for r in mine))
            out[f"{m}_recall_final"] = fmt(statistics.median(r["heldout_as_training_fn_final"] for r in mine))
            out["train_start"] = fmt(statistics.median(r["train_start_acc"] for r in mine))
            out["recall_start"] = fmt(statistics.median(r["heldout_as_training_fn_start"] for r in mine))
    grpo = {r["seed"]: r["final_acc"] for r in res["runs"] if r["dial"] == d and r["method"] == "grpo"}
    for m in cfg["methods"] if grpo else []:   # against GRPO: the difference of medians, and seed by seed
        mine = {r["seed"]: r["final_acc"] for r in res["runs"] if r["dial"] == d and r["method"] == m}
        if m != "grpo" and mine:
            paired = sorted(set(mine) & set(grpo))
            out[f"{m}_gain"] = f"{statistics.median(mine.values()) - statistics.median(grpo.values()):+.3f}"
            out[f"{m}_above_grpo"] = f"{sum(mine[s] > grpo[s] for s in paired)} of {len(paired)}"
    out["start"] = fmt(statistics.median(r["start_acc"] for r in res["runs"]))
    if "lr" in s and s["lr"]:
        out["lrs"] = ", ".join(f"{m} {lr:g}" for m, lr in s["lr"].items())
    return out


def code_lab_discovery(res: dict) -> str:
    """``<!-- report:code-lab-discovery -->``: the code lab's test-time discovery (``--discovery``)."""
    found = res["summary"]["discovery"]
    q = res["summary"]["teacher"][str(max(res["config"]["dials"]))]
    return "\n".join([
        f"The warm start (the top dial): plain held-out accuracy {fmt(q['plain_acc'])}; its teacher, shown the tests' "
        f"feedback on its own wrong attempt, {fmt(q['feedback_acc'])}.", "",
        *discovery_lines(found), provenance(res)])


def code_lab_discovery_fields(res: dict) -> dict:
    """Prose numbers of ``code_lab_discovery.json``: rates at max k, attempts to match best-of-k."""
    found = res["summary"]["discovery"]
    pooled, K = found["pooled"], max(found["budgets"])
    t = found.get("tts_tuning") or {}
    out = {"rows": str(found["rows"]), "k_max": str(K), "seeds": str(len(found["per_seed"])),
           "tts_lr": f"{t['lr']:g}" if t else "its default", "tts_grid": ", ".join(t.get("by_lr", [])),
           "tts_tune_rows": str(t.get("rows", 0))}
    for m, v in pooled["methods"].items():
        out[f"{m}_max"] = fmt(v["discovery"][-1])
        out[f"{m}_ci"] = f"[{v['ci95'][0][-1]:.2f}, {v['ci95'][1][-1]:.2f}]"
        out[f"{m}_match"] = "never" if v["attempts_to_match"] is None else str(v["attempts_to_match"])
    return out


def code_lab_heldout_fields(res: dict) -> dict:
    """Prose numbers of ``code_lab_heldout.json``: per variant, the functions its held-out accuracy stands on."""
    out = {}
    for r in res["runs"]:
        v = r["variant"]
        right = sum(x for x, _ in r["right_by_function"].values())
        best = max(x for x, _ in r["right_by_function"].values())
        out.update({f"{v}_acc": fmt(r["accuracy"]), f"{v}_right": str(right),
                    f"{v}_functions_right": str(r["functions_right"]), f"{v}_best_right": str(best),
                    f"{v}_best_share": fmt(r["top_function_share"]),
                    "functions": str(r["functions"]), "rows": str(r["rows"]), "one_function": fmt(r["one_function"])})
    return out
