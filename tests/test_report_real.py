"""``reports.real``: the real model's SDPO table says which commit measured which methods and seeds when a
results file was measured in parts (``bench_real.py sdpo --resume``), and its prose fields name the RLHF
book's recipe only when it ran."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
from reports import real as report_real  # noqa: E402  (reports/real.py)


def results(runs: list[tuple[str, int, float, str]]) -> dict:
    methods = sorted({m for m, *_ in runs}, key=["grpo", "sdpo", "sdpo_rlhf_book", "sdpo_rlhf_book_t07"].index)
    return {"commit": "last999", "command": "python benchmarks/bench_real.py sdpo", "date": "2026-11-26",
            "machine": {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"},
            "config": {"methods": {m: [f"configs/{m}.yaml", {}] for m in methods}, "seeds": [1, 2, 3], "threads": 2,
                       "n_teacher": 100},
            "summary": {"teacher": {"sums to 20": {"n": 100, "plain_acc": 0.3, "demo_acc": 0.6, "feedback_acc": 0.1}}},
            "runs": [{"method": m, "seed": s, "final_acc": f, "start_acc": 0.3, "wall_s": 60.0, "commit": c}
                     for m, s, f, c in runs]}


def test_parts_name_the_methods_and_seeds_each_commit_measured():
    res = results([("grpo", 1, 0.6, "a"), ("sdpo", 1, 0.5, "a"), ("grpo", 2, 0.7, "b"), ("sdpo", 2, 0.4, "b"),
                   ("sdpo_rlhf_book", 1, 0.55, "c"), ("sdpo_rlhf_book", 2, 0.65, "c")])
    line = report_real.parts_line(res, ["grpo", "sdpo", "sdpo_rlhf_book"], [1, 2])
    assert line == ("grpo and sdpo seed 1 at commit `a`; grpo and sdpo seed 2 at commit `b`; "
                    "sdpo_rlhf_book seeds 1, 2 at commit `c`")
    assert "sdpo_rlhf_book seeds 1, 2 at commit `c`" in report_real.real_sdpo(res)


def test_fields_give_the_book_recipe_against_grpo_and_sdpo_per_seed_pair():
    two = [("grpo", 1, 0.6, "a"), ("sdpo", 1, 0.5, "a"), ("grpo", 2, 0.7, "a"), ("sdpo", 2, 0.4, "a")]
    assert "book" not in report_real.real_sdpo_fields(results(two))
    f = report_real.real_sdpo_fields(results(two + [("sdpo_rlhf_book", 1, 0.55, "c"), ("sdpo_rlhf_book", 2, 0.6, "c")]))
    # per seed pair: book - grpo = -0.05, -0.10 (median -0.075); book - sdpo = +0.05, +0.20 (median +0.125)
    assert (f["book"], f["book_gain"], f["book_vs_sdpo"], f["gain"]) == ("0.575", "-0.075", "+0.125", "-0.200")
    assert "book_t07" not in f
    f = report_real.real_sdpo_fields(results(two + [("sdpo_rlhf_book_t07", 1, 0.7, "d"), ("sdpo_rlhf_book_t07", 2, 0.7, "d")]))
    assert (f["book_t07"], f["book_t07_gain"], f["book_t07_vs_sdpo"]) == ("0.700", "+0.050", "+0.250")


def test_the_configs_line_names_each_methods_overrides():
    res = results([("grpo", 1, 0.6, "a"), ("sdpo", 1, 0.5, "a")])
    res["config"]["methods"]["sdpo"] = ["configs/real_sdpo.yaml", {"trainer.include_environment_feedback": False}]
    assert ("`grpo`: `configs/grpo.yaml`, `sdpo`: `configs/real_sdpo.yaml` (trainer.include_environment_feedback=False)"
            in report_real.real_sdpo(res))
