"""The algorithms' own benchmarks on the tiny lab in the report: VAPOR (``bench_vapor.py``), SDPO
(``bench_sdpo.py``), teacher-student PPO (``bench_ppo.py``) and the export round trips (``bench_export.py``), each
a block and, for the prose of docs/concepts, fields."""

from __future__ import annotations

import statistics

from reports.format import discovery_table, fmt, md_table, provenance
from reports.sdpo_lab import discovery_fields


def vapor(res: dict) -> str:
    b, sp = res["summary"]["before"], res["summary"]["speed"]
    rows = []
    for variant in res["config"]["variants"]:
        mine = [r for r in res["runs"] if r["variant"] == variant]
        med = {k: statistics.median(r[k] for r in mine)
               for k in ("acc_after", "margin_after", "pref_acc_after", "wall_s")}
        rows.append([f"`{variant}`", med["acc_after"], ", ".join(f"{r['acc_after']:.3f}" for r in mine),
                     f"{med['margin_after']:.3f}", med["pref_acc_after"], f"{med['wall_s']:.0f}"])
    acc0 = res["runs"][0]["acc_before"]
    return "\n".join([
        md_table(["variant", "held-out acc (median)", "per seed", "held-out margin", "pairs preferred right",
                  "wall s"], rows), "",
        f"Before training: held-out accuracy {acc0:.3f}, margin {b['margin']:.3f}, pairs preferred right "
        f"{b['accuracy']:.3f} ({b['pairs']} held-out pairs). {res['config']['steps']} steps per run, seeds "
        f"{fmt(res['config']['seeds'])}. Per step on TRL: `VAPORTRLTrainer` {sp['VAPORTrainer']['median_s']:.3f} "
        f"s, `GRPOTrainer` {sp['GRPOTrainer']['median_s']:.3f} s: "
        f"**{res['summary']['vapor_over_grpo_s_per_step']:.2f}x**.",
        "", provenance(res)])


def sdpo(res: dict) -> str:
    sp, tt = res["summary"]["speed"], res["summary"]["test_time"]
    rows = []
    for method in dict.fromkeys(r["method"] for r in res["runs"]):   # in the benchmark's order
        mine = [r for r in res["runs"] if r["method"] == method]
        rows.append([f"`{method}`", statistics.median(r["acc_after"] for r in mine),
                     ", ".join(f"{r['acc_after']:.3f}" for r in mine),
                     ", ".join(str(r["steps_to_grpo_final"]) for r in mine),
                     f"{statistics.median(r['wall_s'] for r in mine):.0f}"])
    acc0 = res["runs"][0]["acc_before"]
    per_step = [["our `SDPOTRLTrainer(GRPOTrainer)`", sp["ours_SDPOTrainer"]["median_s"]],
                ["TRL's `trl.experimental.sdpo.SDPOTrainer`", sp["trl_SDPOTrainer"]["median_s"]],
                ["`GRPOTrainer`", sp["GRPOTrainer"]["median_s"]]]
    return "\n".join([
        md_table(["method", "held-out acc (median)", "per seed", "steps to GRPO's final acc (per seed)", "wall s"],
                 rows),
        "", f"Before training: held-out accuracy {acc0:.3f}; {res['config']['steps']} steps per run, seeds "
        f"{fmt(res['config']['seeds'])}; `None`: never reached GRPO's final accuracy.", "",
        md_table(["per step (TRL backend)", "median s"], per_step), "",
        f"Test time, on the {tt['greedy_failed']} of {tt['rows']} held-out problems the warm start gets wrong "
        f"greedily: multi-turn reprompting (no training: {tt['n']} sample a round, up to {tt['rounds']} rounds, the "
        f"checker's feedback in the reprompt) solves {tt['multi_turn_solved']:.3f} of them with "
        f"{tt['multi_turn_mean_samples']:.2f} samples on average (by round: "
        f"{fmt(tt['multi_turn_solved_after_round'])}); best-of-{tt['best_of_n_samples']} solves "
        f"{tt['best_of_n_solved']:.3f}.", "", discovery_table(res["summary"].get("discovery")), "", provenance(res)])


def ppo(res: dict) -> str:
    sm = res["summary"]
    rows = []
    for method in dict.fromkeys(r["method"] for r in res["runs"]):
        mine = [r for r in res["runs"] if r["method"] == method]
        rows.append([f"`{method}`", statistics.median(r["acc_after"] for r in mine),
                     ", ".join(f"{r['acc_after']:.3f}" for r in mine),
                     f"{statistics.median(r['gap_closed'] for r in mine):.2f}",
                     f"{statistics.median(r['wall_s'] for r in mine):.0f}",
                     f"{statistics.median(r['s_per_step'] for r in mine):.3f}"])
    agree, curve = sm["reward_model"], [c for c in sm["rm_curve"] if c["acc"] is not None]
    score_at = {c["step"]: c["score_raw"] for c in sm["rm_curve"] if c["score_raw"] is not None}
    first = next((c for c in curve if c["step"] in score_at), None)
    last = curve[-1]
    rm_line = (f"With the learned reward model instead of the checker (PPO alone, seed 0, "
               f"{res['config']['rm_steps']} steps): its raw score goes {first['score_raw']:+.2f} "
               f"(step {first['step']}) -> "
               f"{score_at.get(last['step'], float('nan')):+.2f} (step {last['step']}) while held-out accuracy goes "
               f"{curve[0]['acc']:.3f} -> {last['acc']:.3f}." if first else "")
    return "\n".join([
        md_table(["method", "held-out acc (median)", "per seed", "gap closed (median)", "wall s", "s/step"], rows), "",
        f"Student (the default warm start) {sm['student_acc']:.3f}, teacher (`teacher_lab: sft_steps 600`) "
        f"{sm['teacher_acc']:.3f}; *gap closed* = (after - student) / (teacher - student). {res['config']['steps']} "
        f"steps per run, seeds {fmt(res['config']['seeds'])}. Built from nothing: the teacher in "
        f"{sm['teacher_build_s']:.0f} s, the reward model in {sm['reward_model_build_s']:.0f} s; the reward model "
        f"agrees with exact match on {agree['agreement']:.3f} of the student's samples (true positives "
        f"{agree['true_positive']:.3f}, false positives {agree['false_positive']:.3f}).", "", rm_line, "",
        provenance(res)])


def export_table(res: dict) -> str:
    rows = [[r["run"], f"`{r['format']}`", f"{r['max_logit_diff']:.1e}", f"{r['greedy_agree']:.3f}",
             {True: "yes", False: "no", None: "-"}[r["vocab_equal"]], r["bytes"] // 1024, f"{r['export_s']:.1f}"]
            for r in res["runs"]]
    return "\n".join([
        md_table(["run", "format", "max logit diff", "same greedy answer", "GGUF vocabulary equal", "KB", "export s"],
                 rows), "",
        f"One `configs/demo.yaml` run of {res['config']['steps']} steps per row group (`full`: the whole model "
        f"trained, `lora`: a rank-4 adapter); each export loaded back (transformers; its GGUF loader for GGUF) and "
        f"compared with the run's model in fp32 on {res['config']['prompts']} held-out prompts.", "", provenance(res)])


def _seeds_where(res: dict, method: str, better) -> str:
    """"k of n": the seeds on which ``better(run of method, runs of that seed by method)`` holds."""
    mine = [r for r in res["runs"] if r["method"] == method]
    by_seed = {}
    for r in res["runs"]:
        by_seed.setdefault(r["seed"], {})[r["method"]] = r
    k = sum(bool(better(r, by_seed[r["seed"]])) for r in mine)
    return f"{k} of {len(mine)}"


def sdpo_fields(res: dict) -> dict:
    sp, t, tt = res["summary"]["speed"], res["summary"].get("teacher", {}), res["summary"]["test_time"]
    return {
        "tt_solved": fmt(tt["multi_turn_solved"]), "best_of_n_solved": fmt(tt["best_of_n_solved"]),
        "tt_fewer_or_more": "fewer" if tt["multi_turn_solved"] < tt["best_of_n_solved"] else "at least as many",
        "ours_over_trl": f"{sp['ours_SDPOTrainer']['median_s'] / sp['trl_SDPOTrainer']['median_s']:.2f}",
        "ours_s": f"{sp['ours_SDPOTrainer']['median_s']:.3f}", "trl_s": f"{sp['trl_SDPOTrainer']['median_s']:.3f}",
        "teacher_demo_acc": fmt(t.get("demo_acc")), "teacher_plain_acc": fmt(t.get("plain_acc")),
        "teacher_feedback_acc": fmt(t.get("feedback_acc")), "teacher_n_wrong": fmt(t.get("n_wrong")),
        "teacher_token_win_feedback": fmt(t.get("token_win_feedback")),
        "sdpo_below_start": _seeds_where(res, "sdpo", lambda r, s: r["acc_after"] < r["acc_before"]),
        "sdpo_below_grpo": _seeds_where(res, "sdpo", lambda r, s: r["acc_after"] < s["grpo"]["acc_after"]),
        "lr_1e4_above_sdpo": _seeds_where(res, "sdpo_lr_1e-4", lambda r, s: r["acc_after"] > s["sdpo"]["acc_after"]),
        "lr_1e4_below_grpo": _seeds_where(res, "sdpo_lr_1e-4", lambda r, s: r["acc_after"] < s["grpo"]["acc_after"]),
        "base_above_sdpo": _seeds_where(res, "sdpo_base_teacher", lambda r, s: r["acc_after"] > s["sdpo"]["acc_after"]),
        "base_below_grpo": _seeds_where(res, "sdpo_base_teacher",
                                        lambda r, s: r["acc_after"] < s["grpo"]["acc_after"]),
        "feedback_below_start": _seeds_where(res, "sdpo_feedback", lambda r, s: r["acc_after"] < r["acc_before"]),
        # the discovery curves of part 5 (``disc_best_of_k``, ``disc_multi_turn_ci``, ``disc_rows``, ...)
        **{f"disc_{k}": v for k, v in discovery_fields(res["summary"]["discovery"]).items()},
    }


def export_fields(res: dict) -> dict:
    """The fewest greedy answers (of the prompts checked) each precision keeps, over the full and LoRA runs."""
    def kept(*formats):
        return f"{min(r['greedy_agree'] for r in res['runs'] if r['format'] in formats):.3f}"
    return {"f16_min_agree": kept("merged fp16", "gguf f16"), "bf16_q8_min_agree": kept("merged bf16", "gguf q8_0"),
            "prompts": str(res["config"]["prompts"])}


def ppo_fields(res: dict) -> dict:
    def gap(method):
        return statistics.median(r["gap_closed"] for r in res["runs"] if r["method"] == method)
    ppo_up = sum(r["acc_after"] > res["summary"]["student_acc"] for r in res["runs"] if r["method"] == "ppo")
    n_ppo = sum(r["method"] == "ppo" for r in res["runs"])
    return {"kd_gap": f"{gap('kd'):.2f}", "teacher_ppo_gap": f"{gap('teacher_ppo'):.2f}",
            "ppo_gap": f"{gap('ppo'):.2f}", "ppo_seeds_up": f"{ppo_up} of {n_ppo}"}
