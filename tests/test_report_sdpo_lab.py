"""The skill lab's report: steps-to-GRPO, paired differences and the fields, on a made-up results file."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
import reports.sdpo_lab as lab  # noqa: E402  (reports/sdpo_lab.py)
import reports.sdpo_room as room  # noqa: E402  (reports/sdpo_room.py)


def results() -> dict:
    def run(method, dial, seed, curve):
        return {"method": method, "dial": dial, "seed": seed, "final_acc": curve[-1],
                "acc_by_step": [[25 * i, a] for i, a in enumerate(curve)]}
    runs = [run("grpo", 0, 0, [0.8, 0.82, 0.84]), run("grpo", 0, 1, [0.8, 0.83, 0.86]),
            run("sdpo", 0, 0, [0.8, 0.6, 0.5]), run("sdpo", 0, 1, [0.8, 0.7, 0.7]),
            run("grpo", 9, 0, [0.8, 0.82, 0.84]), run("grpo", 9, 1, [0.8, 0.84, 0.88]),
            run("sdpo", 9, 0, [0.8, 0.87, 0.9]), run("sdpo", 9, 1, [0.8, 0.8, 0.83])]
    q = {"plain_acc": 0.8, "demo_acc": 0.0, "feedback_acc": 0.0, "right_token_frac": 0.6, "token_win_demo": 0.4,
         "token_win_feedback": 0.4}
    return {"runs": runs, "config": {"dials": [0, 9], "methods": ["grpo", "sdpo"], "steps": 50, "seeds": [0, 1],
                                     "tune_seeds": [100], "lr_grid": [1e-4, 3e-4]},
            "summary": {"teacher": {"0": q, "9": {**q, "plain_acc": 0.78, "demo_acc": 0.97}},
                        "lr": {"grpo": 3e-4, "sdpo": 1e-4}},
            "command": "python benchmarks/bench_sdpo_lab.py", "date": "2026-11-24", "commit": "abc",
            "machine": {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"}}


def test_steps_to_is_the_first_evaluated_step_at_the_target():
    assert lab.steps_to([[0, 0.5], [25, 0.7], [50, 0.9]], 0.7) == 25
    assert lab.steps_to([[0, 0.5], [25, 0.6]], 0.7) is None


def test_reach_measures_against_grpos_median_final():
    r = lab.reach(results(), 9)
    assert r["target"] == 0.86 and abs(r["gain"] - 0.06) < 1e-9     # median of 0.84 and 0.88, from 0.8
    assert r["methods"]["sdpo"] == {"steps": [25, None], "reached": 1, "median": 25}
    assert r["methods"]["grpo"] == {"steps": [None, 50], "reached": 1, "median": 50}


def test_fields_and_block_hold_the_paired_differences():
    f = lab.sdpo_lab_fields(results())
    assert f["sdpo_minus_grpo_min"] == "-0.250"                   # median of -0.34 and -0.16
    assert f["sdpo_minus_grpo_max"] == "+0.005"                   # median of +0.06 and -0.05
    assert f["plain_spread"] == "0.020" and f["sdpo_steps_to_grpo"] == "25"
    assert f["sdpo_steps_over_budget"] == "0.50" and f["sdpo_steps_over_grpo"] == "0.50"   # 25 of 50; GRPO's 50
    assert f["grpo_steps_to_grpo"] == "50"
    block = lab.sdpo_lab(results())
    assert "| 9 | `sdpo` | 0.0001 | 0.865 | 0.900, 0.830 | +0.005 |" in block
    assert "| `sdpo` | 25, None | 1 of 2 | 25 | 0.50 |" in block
    assert "Within half of GRPO's steps: yes, both against the budget and against GRPO's own steps." in block


def test_summary_block_holds_each_dials_medians_and_paired_difference():
    """The README's short block: per dial the warm start, the teacher shown a sibling's answer, GRPO's and SDPO's
    median finals and SDPO minus GRPO as the median of the per-seed differences, with the seeds SDPO ends above."""
    block = lab.sdpo_lab_summary(results())
    assert "| 0 | 0.800 | 0.000 | 0.850 | 0.600 | -0.250 (above on 0 of 2) |" in block   # -0.34, -0.16
    assert "| 9 | 0.780 | 0.970 | 0.860 | 0.865 | +0.005 (above on 1 of 2) |" in block   # +0.06, -0.05
    assert "after 50 steps, seeds 0, 1" in block and "commit `abc`" in block


def test_steps_vs_grpo_is_read_against_the_budget_and_against_grpos_own_steps():
    r = {"methods": {"grpo": {"steps": [100, 100], "reached": 2, "median": 100},
                     "sdpo": {"steps": [25, 75], "reached": 2, "median": 50.0}}}
    line = lab.steps_vs_grpo(r, 200)
    assert "median of 50 steps (2 of 2 seeds): 0.25 of GRPO's 200-step budget, 0.50 of the 100" in line
    assert line.endswith("Within half of GRPO's steps: yes, both against the budget and against GRPO's own steps.")
    r["methods"]["grpo"]["median"] = 50                                   # GRPO got there as soon as SDPO
    assert lab.steps_vs_grpo(r, 200).endswith("yes against the budget, no against GRPO's own steps.")
    r["methods"]["sdpo"]["median"] = 150
    assert lab.steps_vs_grpo(r, 200).endswith("Within half of GRPO's steps: no.")
    r["methods"]["sdpo"] = {"steps": [None, None], "reached": 0, "median": None}
    line = lab.steps_vs_grpo(r, 200)
    assert "never reaches" in line and line.endswith("Within half of GRPO's steps: no.")
    assert lab.steps_vs_grpo(r, 200, "sdpo_feedback") == ""                # a method the run did not have


def test_no_steps_to_grpo_when_grpo_did_not_improve():
    res = results()
    for r in res["runs"]:
        if r["method"] == "grpo":
            r["acc_by_step"][-1][1] = r["final_acc"] = 0.79                # below its 0.8 start
    assert lab.reach(res, 9)["gain"] < 0
    assert "GRPO did not improve in 50 steps" in lab.sdpo_lab(res)
    assert lab.reach(res, 9)["methods"]["sdpo"]["steps"] == [25, 25]     # step 0's 0.8 does not count


def discovery(best, tts) -> dict:
    return {"budgets": [8, 16, 32, 64], "rows": 10, "batch_size": 8, "max_attempts": 64, "hard_of_heldout": [12, 200],
            "methods": {"best_of_k": {"discovery": best}, "multi_turn": {"discovery": [0.1] * 4},
                        "test_time_sdpo": {"discovery": tts}}}


def test_attempts_vs_best_of_k_compares_attempts_at_best_of_ks_final_rate():
    assert lab.attempts_to(discovery([0.1, 0.2, 0.3, 0.5], [0.2, 0.5, 0.6, 0.7]), "test_time_sdpo", 0.5) == 16
    yes = lab.attempts_vs_best_of_k(discovery([0.1, 0.2, 0.3, 0.5], [0.2, 0.5, 0.6, 0.7]))
    assert "k=16 (0.25 of the attempts)" in yes and yes.endswith("Within a third of the 64 attempts: yes.")
    half = lab.attempts_vs_best_of_k(discovery([0.1, 0.2, 0.3, 0.5], [0.1, 0.2, 0.5, 0.6]))   # k=32: a half
    assert half.endswith("Within a third of the 64 attempts: no.")
    assert "never within the budget" in lab.attempts_vs_best_of_k(discovery([0.1, 0.2, 0.3, 0.5], [0.1, 0.1, 0.2, 0.3]))
    assert "discovers nothing" in lab.attempts_vs_best_of_k(discovery([0.0] * 4, [0.0] * 4))


def test_discovery_and_signal_blocks_render():
    res = {**results(), "summary": {"discovery": {"9": discovery([0.1, 0.2, 0.3, 0.5], [0.2, 0.5, 0.6, 0.7]),
                                                  "0": discovery([0.1, 0.2, 0.3, 0.5], [0.0] * 4)}}}
    text = lab.sdpo_lab_discovery(res)
    assert text.index("**Dial 0**") < text.index("**Dial 9**") and "12 of 200" in text and "Made by" in text
    signal = {**results(), "config": {"samples": 32, "train_rows": 200, "steps": 200, "lr": 1e-4, "seeds": [0, 1]},
              "summary": {"table": [[9, "warm start", "heldout", 0.8, 0.72, 0.09, 0.83, 0.08, 0.517]]}}
    text = lab.sdpo_lab_signal(signal)
    assert "| 9 | warm start | heldout | 0.800 | 0.720 |" in text and "lr 0.0001" in text


def ablation_results() -> dict:
    def run(method, seed, final, norms):
        return {"method": method, "dial": 9, "seed": seed, "lr": 1e-4, "final_acc": final,
                "acc_by_step": [[0, 0.8], [50, final]], "update_norm_by_step": [[i, n] for i, n in enumerate(norms)]}
    res = {**results(), "runs": [run("sdpo", 0, 0.80, [0.2, 0.4]), run("sdpo", 1, 0.82, [0.3, 0.3]),
                                 run("sdpo_loss_third", 0, 0.78, [0.3, 0.3]), run("sdpo_loss_third", 1, 0.86, [0.3, 0.5])],
           "config": {"dials": [9], "methods": ["sdpo", "sdpo_loss_third"], "steps": 50, "seeds": [0, 1]},
           "summary": {"start_acc": {"9": 0.8}}}
    return res


def test_ablations_block_pairs_each_variant_with_sdpo_and_reports_update_norms():
    text = lab.sdpo_lab_ablations(ablation_results())
    assert "| `sdpo_loss_third` | the loss times 1/3, same learning rate | 0.0001 | 0.820 | 0.780, 0.860 | +0.010 | 0.3500 |" in text
    assert "| `sdpo` | TRL's defaults" in text and "from a start of 0.800" in text


def test_ablation_fields_match_the_block():
    f = lab.sdpo_lab_ablations_fields(ablation_results())
    assert f["sdpo_final"] == "0.810" and f["sdpo_loss_third_final"] == "0.820"
    assert f["sdpo_norm"] == "0.3000" and f["sdpo_loss_third_norm"] == "0.3500"
    assert f["sdpo_loss_third_minus_sdpo"] == "+0.010" and "sdpo_minus_sdpo" not in f


def headroom_results() -> dict:
    def run(sft, lr, seed, curve, avg):
        return {"sft_steps": sft, "width": 64, "lr": lr, "seed": seed, "start_acc": curve[0], "final_acc": curve[-1],
                "final_avg_at_k": avg, "acc_by_step": [[100 * i, a] for i, a in enumerate(curve)]}
    runs = [run(500, 1e-4, 0, [0.10, 0.20, 0.30], 0.10), run(500, 1e-4, 1, [0.10, 0.10, 0.20], 0.08),
            run(2000, 1e-4, 0, [0.80, 0.78, 0.79], 0.80), run(2000, 1e-4, 1, [0.80, 0.82, 0.77], 0.70)]
    start = {"500/64": {"greedy": 0.1, "avg_at_k": 0.05, "context_steps": 250},
             "2000/64": {"greedy": 0.8, "avg_at_k": 0.72, "context_steps": 1000,
                         "teacher": {"demo_acc": 0.98, "token_win_demo": 0.97}}}
    return {**results(), "runs": runs, "config": {"steps": 200, "seeds": [0, 1], "avg_k": 16, "start": start}}


def test_headroom_block_shows_every_cell_with_its_median_curve():
    text = room.sdpo_lab_headroom(headroom_results())
    assert "| 500 | 64 | 0.0001 | 0.100 | 0.150 | 0.250 | +0.150 | 0.300, 0.200 | 0.050 | 0.090 |" in text
    assert "| 2000 | 64 | 0.0001 | 0.800 | 0.800 | 0.780 | -0.020 | 0.790, 0.770 | 0.720 | 0.750 |" in text
    assert "step 0 | step 100 | step 200" in text and "avg@16 start" in text and "Made by" in text
    assert "| 2000 | 64 | 1000 | 0.800 | 0.720 | 0.980 | 0.970 |" in text and "| 500 | 64 | 250 |" not in text


def test_headroom_fields_name_the_largest_gain():
    f = room.sdpo_lab_headroom_fields(headroom_results())
    assert f["best_gain"] == "+0.150" and f["best_at"] == "500 plain steps, lr 0.0001"
    assert f["climbing_cells"] == "1 of 2" and f["start_500"] == "0.100" and f["start_2000"] == "0.800"
    assert f["best_avg_gain"] == "+0.040" and f["best_avg_at"] == "500 plain steps, lr 0.0001"
    assert f["gain_2000_1em4"] == "-0.020" and f["final_500_1em4"] == "0.250" and f["avg_gain_2000_1em4"] == "+0.030"
    assert f["teacher_demo_2000"] == "0.980" and "teacher_demo_500" not in f
    assert f["avg_start_500"] == "0.050" and room.lr_tag(3e-5) == "3em5" and room.lr_tag(3e-4) == "3em4"


def room_results() -> dict:
    res = results()
    res["runs"] = [r for r in res["runs"] if r["dial"] == 9]        # training runs at the highest dial only
    res["config"] = {**res["config"], "sft_steps": 1500}
    return res


def test_room_block_names_its_warm_starts_and_grpos_curve_then_the_lab_tables():
    text = room.sdpo_lab_room(room_results())
    assert text.startswith("Warm starts with 1500 plain SFT steps") and "training runs at 1500 + 9" in text
    assert "| `grpo` | 0.800 | 0.830 | 0.860 |" in text and "| method | step 0 | step 25 | step 50 |" in text
    assert "| `sdpo` | 0.800 | 0.835 | 0.865 |" in text
    assert "| 9 | `sdpo` | 0.0001 | 0.865 | 0.900, 0.830 | +0.005 |" in text and "| 0 | `sdpo`" not in text
    assert "| 0 | 0.800 | 0.000 |" in text                        # the teacher at every dial, trained or not


def test_room_fields_hold_each_dials_teacher_and_steps_to_grpo():
    f = room.sdpo_lab_room_fields(room_results())
    assert f["plain_9"] == "0.780" and f["demo_9"] == "0.970" and f["demo_0"] == "0.000"
    assert f["reach_sdpo"].endswith("Within half of GRPO's steps: yes, both against the budget and against GRPO's own steps.")
    assert f["sdpo_minus_grpo_max"] == "+0.005"


def transfer_results() -> dict:
    after = {"0.0001": {"0": 0.02, "1": 0.02, "15": 0.05}, "0.001": {"0": 0.02, "1": 0.03, "15": 0.25}}
    return {**results(), "runs": [], "config": {"dial": 9, "checkpoints": [1, 15], "samples": 32, "batch_size": 8,
                                               "chains": 2},
            "summary": {"rows": 3, "hard_of_heldout": [3, 200], "plain_rate": 0.02, "reprompt_rate": 0.3,
                        "plain_found": 1, "reprompt_found": 2, "after": after,
                        "after_found": {lr: {k: 1 for k in c} for lr, c in after.items()},
                        "chain_by_round": [0.01, 0.03, 0.05, 0.07, 0.1]}}


def test_transfer_block_sets_each_learning_rates_curve_beside_the_reprompt_rate():
    text = room.sdpo_lab_transfer(transfer_results())
    assert "second round): 0.300 (2 of 3)" in text and "From the plain prompt: 0.020 (1 of 3)" in text
    assert "| `plain`, then test-time SDPO at lr 0.001 | 0.020 (1) | 0.030 (1) | 0.250 (1) |" in text
    assert "| n=0 | n=1 | n=15 |" in text
    f = room.sdpo_lab_transfer_fields(transfer_results())
    assert f["after_1em3_15"] == "0.250" and f["after_1em4_0"] == "0.020" and f["reprompt_rate"] == "0.300"
    assert f["found_1em3_15"] == "1" and f["reprompt_found"] == "2"
    assert "| multi-turn reprompting | 0.010 | 0.030 | 0.060 | 0.100 |" in text      # spans cut at the last round
    assert "|  | round 1 | round 2 | rounds 3-4 | round 5 |" in text
    assert f["chain_round_1"] == "0.010" and f["chain_later"] == "0.062" and f["chain_last"] == "0.100"
    runs = [{"plain_rate": 0.0, "after": {"0.0001": {"15": 0.01}}, "chain_by_round": [0.0, 0.0, 0.0]},
            {"plain_rate": 0.09, "after": {"0.0001": {"15": 0.8}}, "chain_by_round": [0.1, 0.5, 0.5]},
            {"plain_rate": 0.0, "after": {"0.0001": {"15": 0.03}}, "chain_by_round": [0.0, 0.02, 0.04]}]
    f = room.sdpo_lab_transfer_fields({**transfer_results(), "runs": runs})
    assert f["top_plain"] == "0.090" and f["top_after"] == "0.800" and f["after_without_top"] == "0.020"
    assert f["chain_later_without_top"] == "0.015" and f["chain_found"] == "2"   # (0 + 0.03) / 2; rows 2 and 3


def test_wilson_intervals_are_the_textbook_ones():
    """95% Wilson score intervals, against the values every table of them gives (0 of 10: [0, 0.2775];
    5 of 10: [0.2366, 0.7634]; 10 of 10: [0.7225, 1]), within 1e-4; n = 0 says nothing: [0, 1]."""
    from reports.format import rate_ci, wilson

    for (k, n), (lo, hi) in (((0, 10), (0.0, 0.2775)), ((5, 10), (0.2366, 0.7634)), ((10, 10), (0.7225, 1.0))):
        got = wilson(k, n)
        assert abs(got[0] - lo) < 1e-4 and abs(got[1] - hi) < 1e-4, (k, n, got)
    assert wilson(0, 0) == (0.0, 1.0) and rate_ci(0.5, 10) == "[0.24, 0.76]"


def test_discovery_fields_name_each_method_at_the_largest_budget_with_its_interval():
    """Each end's rate at k = K with its Wilson interval over the questions, after the first batch, the step one
    question makes, and where test-time SDPO first reaches best-of-k's final rate."""
    res = {**results(), "summary": {"discovery": {"9": discovery([0.1, 0.2, 0.3, 0.5], [0.2, 0.5, 0.6, 0.7]),
                                                  "0": discovery([0.1, 0.2, 0.3, 0.5], [0.0] * 4)}}}
    f = lab.sdpo_lab_discovery_fields(res)
    assert (f["best_of_k_top"], f["test_time_sdpo_top"], f["multi_turn_bottom"]) == ("0.500", "0.700", "0.100")
    assert f["best_of_k_ci_top"] == "[0.24, 0.76]" and f["rows_top"] == "10" and f["k_max_top"] == "64"
    assert f["test_time_sdpo_first_batch_top"] == "0.200" and f["one_question_top"] == "0.100"
    assert (f["tts_reaches_top"], f["tts_reaches_bottom"]) == ("16", "never")
