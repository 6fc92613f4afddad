"""The tiny lab's demo in the report: ``make demo``'s seeds and its variants (``run.py demo ...``), the step
times of both backends (``speed``), the warm start's copy steps (``lab``), and the plateau
(``bench_demo_plateau.py``): why every seed ends on the same held-out problems."""

from __future__ import annotations

from reports.format import fmt, md_table, provenance


def demo_plateau(res: dict) -> str:
    s = res["summary"]
    rows = [[name, g["n"], fmt(g.get("sampled_success_before")), fmt(g.get("sampled_success_after")),
             fmt(g.get("unwritten_digit_share"))] for name, g in s["groups"].items() if g["n"]]
    digits = ", ".join(s["unwritten_digits"]) or "none"
    rate = s.get("unwritten_digit_rate", {})
    return "\n".join([
        md_table(["held-out problems", "n", f"right in {s['samples']} samples at T={s['temperature']}, warm start",
                  "after GRPO (first seed)", "answer holds a digit the warm start never writes"], rows), "",
        f"Right after training, by seed: {', '.join(str(k) for k in s['right_after_by_seed'])} of {s['n']}; the "
        f"greedy answers are identical across seeds on {s['identical_greedy_answer_across_seeds']} of {s['n']} "
        f"problems. Digits the warm start never writes in its greedy answers to 1000 training problems: {digits}; "
        f"sampled answers holding one of them: {fmt(rate.get('before'))} before training, "
        f"{fmt(rate.get('after'))} after.", "", provenance(res)])


def demo_plateau_fields(res: dict) -> dict:
    s, g = res["summary"], res["summary"]["groups"]
    never, learned = g["never right"], g["learned (every seed)"]
    rate = s.get("unwritten_digit_rate", {})
    return {"never_n": str(never["n"]), "learned_n": str(learned["n"]), "n": str(s["n"]),
            "digits": ", ".join(s["unwritten_digits"]) or "none",
            "never_before": fmt(never.get("sampled_success_before")),
            "never_after": fmt(never.get("sampled_success_after")),
            "learned_before": fmt(learned.get("sampled_success_before")),
            "learned_after": fmt(learned.get("sampled_success_after")),
            "never_unwritten": fmt(never.get("unwritten_digit_share")),
            "rate_before": fmt(rate.get("before")), "rate_after": fmt(rate.get("after")),
            "identical": str(s["identical_greedy_answer_across_seeds"])}


def speed(res: dict) -> str:
    s, cfg = res["summary"], res["config"]
    rows = []
    for label, med in s["median_s"].items():
        times = [t for r in res["runs"] if r["backend"] == label for t in r["times_s"]]
        rows.append([f"`{label}`" if label != "trl" else "TRL `GRPOTrainer`", med, min(times), max(times)])
    return "\n".join([
        md_table(["backend", "median s/step", "min", "max"], rows), "",
        f"TRL / scratch: **{s['ratio_trl_over_scratch_median']:.2f}x** (median of {cfg['repeats']} repeats; "
        f"per repeat {', '.join(f'{x:.2f}x' for x in s['ratio_trl_over_scratch'])}); with `share_prompt` off "
        f"{s['ratio_trl_over_scratch_no_share_median']:.2f}x. {cfg['steps']} steps per run, first "
        f"{cfg['warmup']} dropped, evaluation off.", "", provenance(res)])


def demo(res: dict) -> str:
    s = res["summary"]
    rows = [[r["seed"], r["before"], r["after"], f"{r['lift']:+.3f}", f"{r['peak']:.3f} (step {r['peak_step']})",
             f"{r['wall_s']:.1f}"] for r in res["runs"]]
    return "\n".join([
        md_table(["seed", "before", "after", "lift", "peak", "wall s"], rows), "",
        f"Median lift **{s['median_lift']:+.3f}** (min {s['min_lift']:+.3f}), median wall "
        f"**{s['median_wall_s']:.1f} s**; the peak is the best of the run's evaluations (accuracy swings "
        f"between them; the run keeps its last weights).", "", provenance(res)])


def demo_variant(res: dict) -> str:
    s = res["summary"]
    lifts = ", ".join(f"{r['lift']:+.3f}" for r in res["runs"])
    return (f"Median lift {s['median_lift']:+.3f}, min {s['min_lift']:+.3f} (seeds {fmt(res['config']['seeds'])}: "
            f"{lifts}); median peak {s['median_peak']:.3f}. {provenance(res)}")


def lab(res: dict) -> str:
    rows = [[r["copy_steps"], f"{r['warm_start_s']:.1f}", r["heldout_acc"], r["acc_right_hint"], r["acc_random_hint"]]
            for r in res["runs"]]
    return "\n".join([md_table(["`copy_steps`", "warm start s", "held-out acc", "acc, right hint",
                                "copies a random hint"], rows), "", provenance(res)])
