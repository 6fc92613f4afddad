"""``bench_real.py sdpo --resume``: the runs a cut-short results file holds are kept, stamped with
the commit that measured them, and only the missing (method, seed) pairs run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_real  # noqa: E402  (benchmarks/bench_real.py)


def test_resume_keeps_the_finished_runs_and_runs_only_the_missing_pairs(tmp_path, monkeypatch):
    old = {"commit": "old1234", "config": {"methods": {"grpo": [], "sdpo": []}, "seeds": [1, 2, 3], "n_teacher": 100},
           "summary": {"teacher": {"sums to 20": {"n": 100, "plain_acc": 0.3}}},
           "runs": [{"method": m, "seed": s, "final_acc": 0.5} for s in (1, 2) for m in ("grpo", "sdpo")]}
    path = tmp_path / "real_sdpo.json"
    path.write_text(json.dumps(old))
    monkeypatch.setattr(bench_real, "results_path", lambda name: path)
    args = argparse.Namespace(methods=["grpo", "sdpo"], n_teacher=100, seeds=[3])
    prior, teacher, seeds = bench_real.resumed(args)
    assert seeds == [1, 2, 3] and {r["commit"] for r in prior} == {"old1234"} and teacher["sums to 20"]["plain_acc"] == 0.3

    ran = []
    monkeypatch.setattr(bench_real, "git_commit", lambda: "new5678")
    monkeypatch.setattr(bench_real, "run_config", lambda path, over: ran.append((path, over["trainer.seed"])) or
                        {"before": 0.3, "after": 0.6, "history": []})
    runs = bench_real.bench_sdpo(["grpo", "sdpo"], seeds, 2, prior=prior)
    assert [seed for _, seed in ran] == [3, 3]   # seeds 1 and 2 were not run again
    assert [(r["seed"], r["commit"]) for r in runs] == [(1, "old1234")] * 2 + [(2, "old1234")] * 2 + [(3, "new5678")] * 2

    with pytest.raises(SystemExit, match="lacks the file's methods"):
        bench_real.resumed(argparse.Namespace(methods=["grpo"], n_teacher=100, seeds=[3]))


def test_resume_may_add_a_method_which_then_runs_on_every_seed(tmp_path, monkeypatch):
    specs = {m: list(bench_real.SDPO_METHODS[m]) for m in ("grpo", "sdpo")}
    old = {"commit": "old1234", "config": {"methods": specs, "seeds": [1, 2], "n_teacher": 100},
           "summary": {"teacher": {"sums to 20": {"n": 100, "plain_acc": 0.3}}},
           "runs": [{"method": m, "seed": s, "final_acc": 0.5} for s in (1, 2) for m in ("grpo", "sdpo")]}
    path = tmp_path / "real_sdpo.json"
    path.write_text(json.dumps(old))
    monkeypatch.setattr(bench_real, "results_path", lambda name: path)
    methods = ["grpo", "sdpo", "sdpo_rlhf_book"]
    prior, _, seeds = bench_real.resumed(argparse.Namespace(methods=methods, n_teacher=100, seeds=[1, 2]))
    ran = []
    monkeypatch.setattr(bench_real, "git_commit", lambda: "new5678")
    monkeypatch.setattr(bench_real, "run_config", lambda path, over: ran.append((path, over["trainer.seed"])) or
                        {"before": 0.3, "after": 0.6, "history": []})
    runs = bench_real.bench_sdpo(methods, seeds, 2, prior=prior)
    assert ran == [("configs/real_sdpo_rlhf_book.yaml", 1), ("configs/real_sdpo_rlhf_book.yaml", 2)]
    assert sorted((r["method"], r["seed"], r["commit"]) for r in runs if r["commit"] == "new5678") == [
        ("sdpo_rlhf_book", 1, "new5678"), ("sdpo_rlhf_book", 2, "new5678")]

    old["config"]["methods"]["sdpo"] = ["configs/real_sdpo.yaml", {}]   # ran with other overrides than now
    path.write_text(json.dumps(old))
    with pytest.raises(SystemExit, match="another config"):
        bench_real.resumed(argparse.Namespace(methods=methods, n_teacher=100, seeds=[1, 2]))
