"""The demo's plateau (``bench_demo_plateau.py``): why every seed of ``make demo`` ends on the same
held-out problems, as a block and as fields for ``report.py``."""

from __future__ import annotations

from report_format import fmt, md_table, provenance


def demo_plateau(res: dict) -> str:
    s = res["summary"]
    rows = [[name, g["n"], fmt(g.get("sampled_success_before")), fmt(g.get("sampled_success_after")),
             fmt(g.get("unwritten_digit_share"))] for name, g in s["groups"].items() if g["n"]]
    digits = ", ".join(s["unwritten_digits"]) or "none"
    rate = s.get("unwritten_digit_rate", {})
    return "\n".join([
        md_table(["held-out problems", "n", f"right in {s['samples']} samples at T={s['temperature']}, warm start",
                  "after GRPO (first seed)", "answer holds a digit the warm start never writes"], rows), "",
        f"Right after training, by seed: {', '.join(str(k) for k in s['right_after_by_seed'])} of {s['n']}; the greedy "
        f"answers are identical across seeds on {s['identical_greedy_answer_across_seeds']} of {s['n']} problems. Digits "
        f"the warm start never writes in its greedy answers to 1000 training problems: {digits}; sampled answers holding "
        f"one of them: {fmt(rate.get('before'))} before training, {fmt(rate.get('after'))} after.", "", provenance(res)])


def demo_plateau_fields(res: dict) -> dict:
    s, g = res["summary"], res["summary"]["groups"]
    never, learned = g["never right"], g["learned (every seed)"]
    rate = s.get("unwritten_digit_rate", {})
    return {"never_n": str(never["n"]), "learned_n": str(learned["n"]), "n": str(s["n"]),
            "digits": ", ".join(s["unwritten_digits"]) or "none",
            "never_before": fmt(never.get("sampled_success_before")), "never_after": fmt(never.get("sampled_success_after")),
            "learned_before": fmt(learned.get("sampled_success_before")),
            "learned_after": fmt(learned.get("sampled_success_after")),
            "never_unwritten": fmt(never.get("unwritten_digit_share")),
            "rate_before": fmt(rate.get("before")), "rate_after": fmt(rate.get("after")),
            "identical": str(s["identical_greedy_answer_across_seeds"])}
