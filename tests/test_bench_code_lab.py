"""The code lab's benchmark pieces without training: each method's and variant's run config, the
steps a method takes to reach GRPO's final accuracy, and the head-start points and their fit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
import bench_code_lab as code_lab  # noqa: E402  (benchmarks/bench_code_lab.py)
import bench_sdpo_head_start as head  # noqa: E402  (benchmarks/bench_sdpo_head_start.py)


def test_each_method_gets_its_signal_and_each_variant_its_warm_start(monkeypatch):
    monkeypatch.chdir(ROOT)
    grpo = code_lab.method_config("grpo", 1000)
    assert grpo["algorithm"] == "grpo" and "distillation_weight" not in grpo["trainer"]
    assert code_lab.method_config("sdpo", 1000)["trainer"]["include_environment_feedback"] is False
    blend = code_lab.method_config("blend", 1000)["trainer"]
    assert blend["include_environment_feedback"] is True and blend["distillation_weight"] == code_lab.BLEND_WEIGHT < 1
    top, starving = (code_lab.method_config("sdpo_feedback", d, v) for d, v in ((1000, "top"), (700, "starving")))
    assert top["model"]["lab"]["sft_steps"] > starving["model"]["lab"]["sft_steps"]
    assert starving["model"]["lab"]["context_steps"] == 700
    for k in ("max_steps", "eval_every"):   # the variant's trainer fields reach every method, GRPO too
        assert code_lab.method_config("grpo", 700, "starving")["trainer"][k] == \
            code_lab.VARIANTS["starving"]["trainer"][k]
    with pytest.raises(SystemExit, match="unknown method"):
        code_lab.method_config("ppo", 0)


def test_the_code_lab_block_reads_steps_seeds_above_start_and_reward_trends_from_the_runs():
    from reports import code as report_code

    def run(method, seed, curve, rewards=(0.1,) * 10 + (0.3,) * 10):
        return {"method": method, "dial": 7, "seed": seed, "start_acc": curve[0], "final_acc": curve[-1],
                "acc_by_step": [[10 * i, a] for i, a in enumerate(curve)],
                "reward_by_step": [[i + 1, x] for i, x in enumerate(rewards)]}
    q = {"plain_acc": 0.1, "demo_acc": 0.9, "feedback_acc": 0.6, "token_win_demo": 1.0, "token_win_feedback": 0.9}
    res = {"command": "python benchmarks/bench_code_lab.py", "date": "2026-11-25", "commit": "abc",
           "machine": {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"},
           "config": {"dials": [7], "run_dials": [7], "methods": ["grpo", "sdpo_feedback"], "steps": 30,
                      "seeds": [0, 1, 2], "lr_grid": [1e-5, 1e-4], "tune_seeds": [100]},
           "summary": {"teacher": {"7": q}, "lr": {"grpo": 1e-5, "sdpo_feedback": 1e-4}},
           "runs": [run("grpo", 0, [0.1, 0.1, 0.2, 0.3]), run("grpo", 1, [0.1, 0.2, 0.2, 0.2]),
                    run("grpo", 2, [0.1, 0.1, 0.2, 0.25]),
                    run("sdpo_feedback", 0, [0.1, 0.3, 0.4, 0.5]), run("sdpo_feedback", 1, [0.1, 0.2, 0.26, 0.3]),
                    run("sdpo_feedback", 2, [0.1, 0.1, 0.1, 0.1], rewards=(0.2,) * 10 + (0.0,) * 10)]}
    out = report_code.code_lab(res)
    assert "| 7 | sdpo_feedback | 0.0001 | 0.100 | 0.300 | 0.500, 0.300, 0.100 | 15 (2 of 3) | 2 of 3 | 0.100 -> 0.300 |" in out
    assert "GRPO climbs: its median final accuracy is 0.250, +0.150 from its start" in out
    assert "reaches it at a median of 15 steps (2 of 3 seeds): 0.50 of GRPO's 30-step budget" in out
    for r in res["runs"]:   # GRPO ending below its start: the report says reaching it means nothing
        if r["method"] == "grpo":
            r["final_acc"] = r["acc_by_step"][-1][1] = 0.05
    assert "**GRPO does not climb here**: its median final accuracy is 0.050, -0.050 from its start" in \
        report_code.code_lab(res)
    assert "training functions" not in report_code.code_lab(res)   # runs that did not keep the training split's
    for i, r in enumerate(res["runs"]):   # a run that fits its training functions and recalls them on held-out ones
        r.update(train_start_acc=0.7, train_final_acc=0.8 + 0.01 * i, heldout_as_training_fn_start=0.6,
                 heldout_as_training_fn_final=0.7 + 0.01 * i, teacher_coverage=None if r["method"] == "grpo" else 0.9)
    assert "| 0.700 -> 0.810; held-out answered with one: 0.600 -> 0.710 |" in report_code.code_lab(res)
    fields = report_code.code_lab_fields(res)
    assert (fields["train_start"], fields["grpo_train_final"], fields["sdpo_feedback_recall_final"]) == \
        ("0.700", "0.810", "0.740")
    assert "grpo_coverage" not in fields and fields["sdpo_feedback_coverage"] == "0.900"   # GRPO has no teacher
    assert (fields["sdpo_feedback_gain"], fields["sdpo_feedback_above_grpo"]) == ("+0.250", "3 of 3")   # GRPO set to 0.050 above


def test_head_start_points_pair_seeds_and_the_fit_finds_the_zero_crossing():
    def run(method, seed, acc, dial=5):
        return {"method": method, "seed": seed, "dial": dial, "final_acc": acc}
    q = {"plain_acc": 0.2, "demo_acc": 0.9, "feedback_acc": 0.4, "token_win_demo": 0.95, "token_win_feedback": 0.6}
    res = {"summary": {"teacher": {"5": q, "0": {**q, "demo_acc": 0.0}}},
           "runs": [run("grpo", 0, 0.30), run("grpo", 1, 0.50), run("sdpo", 0, 0.40), run("sdpo", 1, 0.70),
                    run("sdpo_feedback", 1, 0.45)]}
    pts = head.points_of(res, "lab", "dial {dial}", G=3)
    assert [(p["method"], p["setting"]) for p in pts] == [("sdpo", "dial 5"), ("sdpo_feedback", "dial 5")]
    sdpo, fb = pts
    assert sdpo["head_start"] == pytest.approx(0.7) and sdpo["token_win"] == 0.95 and sdpo["sibling_share"] == 1
    assert sdpo["gain"] == pytest.approx(0.55 - 0.40) and sdpo["gain_per_seed"] == [0.1, 0.2]
    s = 1 - 0.8 ** 2   # a row has a successful sibling among its G - 1 = 2 others
    assert fb["sibling_share"] == pytest.approx(s, abs=1e-4)
    assert fb["head_start"] == pytest.approx(s * 0.7 + (1 - s) * 0.2, abs=1e-4)
    assert fb["token_win"] == pytest.approx(s * 0.95 + (1 - s) * 0.6, abs=1e-4)
    assert fb["gain_per_seed"] == [-0.05] and fb["seeds"] == [1]
    line = head.fit([{"head_start": x, "gain": 0.5 * x - 0.1, "token_win": x} for x in (0.0, 0.4, 0.8)])
    assert line["slope"] == pytest.approx(0.5) and line["zero_crossing"] == pytest.approx(0.2)
    assert line["r"] == pytest.approx(1.0) and head.fit(pts) == {}   # under 3 points: no line


def test_the_head_start_block_renders_every_point_and_the_fit(tmp_path, monkeypatch):
    import json

    from reports import render as report

    pts = [{"lab": lab, "setting": f"s{i}", "method": "sdpo", "plain_acc": 0.2, "head_start": x, "token_win": w,
            "gain": 0.5 * x - 0.1, "gain_per_seed": [0.5 * x - 0.1], "seeds": [0]}
           for i, (lab, x, w) in enumerate([("skill lab", 0.0, 0.4), ("code lab", 0.4, 0.9), ("real model", 0.8, None),
                                            ("code lab", 0.6, 0.95)])]
    res = {"command": "python benchmarks/bench_sdpo_head_start.py", "date": "2026-11-25", "commit": "abc",
           "machine": {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"}, "config": {},
           "runs": pts, "summary": {"fit": {**head.fit(pts), "positive": head.fit(pts[1:]),
                                            "by_sign": {"head_start <= 0": {"n": 1, "median_gain": -0.1},
                                                        "head_start > 0": {"n": 3, "median_gain": 0.2}}},
                                    "sources": {"code_lab": "def"}, "missing": ["real_sdpo"]}}
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    (tmp_path / "sdpo_head_start.json").write_text(json.dumps(res))
    out = report.render_text("<!-- report:sdpo-head-start -->\n<!-- /report:sdpo-head-start -->")
    assert "| real model | s2 | sdpo | 0.200 | 0.800 | n/a | +0.300 | +0.300 |" in out
    assert "crosses zero at a head start of **0.20**" in out and "over 3" in out
    assert "the 1 points with no head start have a median gain of -0.100, the 3 with one +0.200" in out
    assert "a line through those 3 alone has slope +0.500" in out
    assert "`code_lab.json` at `def`" in out and "Not measured yet: `real_sdpo`" in out


def test_pooled_discovery_counts_every_seed_and_row_and_finds_the_attempts_to_match():
    def seed(bok, tts):
        return {"methods": {"best_of_k": {"first_success": bok}, "test_time_sdpo": {"first_success": tts}}}
    per_seed = {"0": seed([5, None, 100, None], [3, 20, None, None]),
                "1": seed([None, None, 120, 9], [2, 30, 40, None])}
    out = code_lab.pool_discovery(per_seed, [8, 16, 128], draws=200)
    assert out["target"] == 0.5                                   # 4 of 8 runs found within 128 attempts
    bok, tts = out["methods"]["best_of_k"], out["methods"]["test_time_sdpo"]
    assert bok["discovery"] == [0.125, 0.25, 0.5] and tts["discovery"] == [0.25, 0.25, 0.625]
    assert tts["attempts_to_match"] == 30 and tts["share_of_max"] == 30 / 128 and bok["attempts_to_match"] == 120
    lo, hi = tts["ci95"]
    assert all(a <= c <= b for a, b, c in zip(lo, hi, tts["discovery"]))


def test_test_time_sdpo_s_rate_is_picked_at_a_third_of_the_attempts(monkeypatch):
    import sdpo_kit.sdpo.at_test_time as ttt

    curves = {1e-4: [0.1, 0.2, 0.3, 0.9], 1e-3: [0.1, 0.4, 0.5, 0.5], 3e-3: [0.1, 0.4, 0.5, 0.6]}
    seen = []

    def fake(model, tok, task, rows, reward, *, budgets, batch_size, seed, methods, learning_rate, **kw):
        seen.append((seed, methods, learning_rate, kw))
        return {"methods": {"test_time_sdpo": {"discovery": curves[learning_rate]}}}

    monkeypatch.setattr(ttt, "discovery_curves", fake)
    out = code_lab.tune_tts_lr(None, None, None, None, [{}] * 7, [1e-4, 1e-3, 3e-3], [8, 16, 32, 128], temperature=1.0)
    assert out["picked_at_k"] == 32 and out["lr"] == 1e-3     # 0.5 at k = 32 beats 0.3; a tie goes to the smaller
    assert out["rows"] == 7 and all(s == 100 and m == ("test_time_sdpo",) for s, m, _, _ in seen)


def test_a_file_measured_in_parts_says_who_measured_which_methods():
    from reports import code as report_code

    cfg = {"methods": ["grpo", "sdpo_feedback", "sdpo"],
           "parts": [{"methods": ["grpo", "sdpo_feedback"], "commit": "aaa", "command": "bench aaa"},
                     {"methods": ["sdpo"], "commit": "bbb", "command": "bench bbb"}]}
    line = report_code.parts_lines(cfg)[0]
    assert "grpo, sdpo_feedback by `bench aaa` at commit `aaa`; sdpo by `bench bbb` at commit `bbb`" in line
    assert report_code.parts_lines({**cfg, "parts": cfg["parts"][:1]}) == [] == report_code.parts_lines({})


def test_the_report_says_which_rates_were_pinned_and_which_tuned():
    from reports import code as report_code

    cfg = {"methods": ["grpo", "sdpo"], "lr_grid": [1e-5, 1e-4], "tune_seeds": [100, 101], "pinned_lr": {}}
    assert report_code.rates(cfg) == "each method's learning rate the best of 1e-05, 0.0001 by median final " \
                                     "accuracy on seeds 100, 101"
    cfg["pinned_lr"] = {"grpo": 1e-5}
    assert report_code.rates(cfg).startswith("the learning rate of sdpo the best of")
    assert report_code.rates(cfg).endswith("; learning rates pinned, not tuned here: grpo 1e-05")
    cfg["pinned_lr"] = {"grpo": 1e-5, "sdpo": 3e-5}
    assert report_code.rates(cfg) == "learning rates pinned, not tuned here: grpo 1e-05, sdpo 3e-05"
    assert report_code.rates({"methods": ["grpo"]}).startswith("every method at the config's")


def test_the_heldout_fields_say_how_many_functions_the_accuracy_stands_on():
    from reports import code as report_code

    run = {"variant": "starving", "rows": 20, "functions": 4, "accuracy": 0.25, "functions_right": 2,
           "top_function_share": 0.8, "one_function": 0.25,
           "right_by_function": {"1*x+8": [4, 5], "3*x+6": [1, 5], "2*x+1": [0, 5], "4*x+4": [0, 5]}}
    f = report_code.code_lab_heldout_fields({"runs": [run]})
    assert (f["starving_right"], f["starving_best_right"], f["starving_functions_right"], f["functions"]) == \
        ("5", "4", "2", "4")
    assert f["starving_best_share"] == "0.800" and f["one_function"] == "0.250"


def test_a_run_without_grpo_writes_its_results(monkeypatch):
    """Some methods only (their rates pinned): without GRPO there is no GRPO final to reach, and the run must
    still write its results (it once died in its table, after an hour of training)."""
    monkeypatch.chdir(ROOT)
    q = {"plain_acc": 0.3, "demo_acc": 1.0, "feedback_acc": 0.8, "token_win_demo": 1.0, "token_win_feedback": 0.9}
    monkeypatch.setattr(code_lab, "teacher_part", lambda d, v="top": q)
    monkeypatch.setattr(sys.modules["_common"], "require_clean_tree", lambda: None)   # tested in test_write_results
    monkeypatch.setattr(code_lab, "journal_path", lambda name, resume: None)          # no journal: tested in test_runner
    monkeypatch.setattr(code_lab, "run_all", lambda specs, jobs, label="run", journal=None: [
        {"method": m, "dial": d, "seed": s, "lr": lr, "start_acc": 0.3, "final_acc": 0.4, "zero_std_groups": 0.1,
         "acc_by_step": [[0, 0.3], [10, 0.4]]} for m, d, s, _, lr, _ in specs])
    written = {}
    monkeypatch.setattr(code_lab, "write_results", lambda name, **kw: written.update(kw))
    monkeypatch.setattr(sys, "argv", ["bench_code_lab.py", "--methods", "sdpo", "blend", "--lr", "sdpo=1e-5",
                                      "blend=1e-5", "--seeds", "0", "1"])
    code_lab.main()
    assert [(r["method"], r["seed"]) for r in written["runs"]] == [("sdpo", 0), ("sdpo", 1), ("blend", 0), ("blend", 1)]
    assert written["summary"]["lr"] == {"sdpo": 1e-5, "blend": 1e-5}
