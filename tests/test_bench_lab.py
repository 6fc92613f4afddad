"""``benchmarks/lab.py``, the SDPO skill lab's shared pieces: every method is a config the trainer takes, and
each is the change to ``configs/sdpo_lab.yaml`` its table entry names (no training: the runs are what the
benchmarks are for)."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import lab  # noqa: E402  (benchmarks/lab.py)

from sdpo_kit.core.config import read_config_file  # noqa: E402
from sdpo_kit.registry import config_from_dict  # noqa: E402
from sdpo_kit.sdpo.config import SDPOFields  # noqa: E402


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)   # the table names its config files from the repository's root


@pytest.mark.parametrize("method", lab.METHODS)
def test_every_method_is_a_config_the_trainer_takes_at_every_dial(method):
    base = read_config_file(lab.BASE_CONFIG)
    for dial in lab.DIALS:
        data = lab.lab_data(method, dial, {"sft_steps": 1500})
        cfg = config_from_dict(data)   # an unknown trainer key (a typo in the table) is refused here
        assert cfg.model.lab["context_steps"] == dial and cfg.model.lab["sft_steps"] == 1500
        assert data["task"] == base["task"] and data["model"]["name"] == base["model"]["name"]
    change = lab.VARIANTS[method]
    if change is lab.GRPO_RUN:
        assert data["algorithm"] == "grpo" and not set(data["trainer"]) & {f.name for f in fields(SDPOFields)}
        assert data["trainer"] == {k: v for k, v in base["trainer"].items() if k not in lab.SDPO_ONLY}
    elif isinstance(change, str):
        assert data["trainer"] == read_config_file(change)["trainer"]
    else:
        assert data["algorithm"] == "sdpo" and data["trainer"] == {**base["trainer"], **change}


def test_an_unknown_method_names_the_known_ones():
    with pytest.raises(SystemExit, match="unknown method 'nope'; choose from .*sdpo_feedback"):
        lab.method_config("nope")


def test_pick_lrs_takes_the_best_median_and_the_smaller_rate_on_a_tie():
    runs = [{"method": "a", "lr": lr, "final_acc": acc} for lr, accs in ((1e-5, (0.2, 0.4, 0.9)), (3e-5, (0.5, 0.4, 0.1)),
                                                                         (1e-4, (0.4, 0.4, 0.4))) for acc in accs]
    assert lab.pick_lrs(runs, ["a"], [1e-5, 3e-5, 1e-4]) == {"a": 1e-5}   # medians 0.4, 0.4, 0.4: the smallest
    runs += [{"method": "a", "lr": 1e-4, "final_acc": 0.9}] * 3   # its median 0.65
    assert lab.pick_lrs(runs, ["a"], [1e-5, 3e-5, 1e-4]) == {"a": 1e-4}


def run_main(monkeypatch, argv: list[str]) -> tuple[list, dict]:
    """bench_sdpo_lab.py's main with ``argv``, its warm starts and runs stood in for: (the training specs, in
    order, tuning first; what it would write)."""
    import bench_sdpo_lab

    specs, written = [], {}
    q = {k: 0.5 for k in ("plain_acc", "demo_acc", "feedback_acc", "right_token_frac", "token_win_demo",
                          "token_win_feedback")}
    monkeypatch.setattr(bench_sdpo_lab, "teacher_table", lambda dials, lab=None: {str(d): q for d in dials})
    monkeypatch.setattr(bench_sdpo_lab, "journal_path", lambda name, resume: None)   # runner: tests/test_runner.py
    monkeypatch.setattr(sys.modules["_common"], "require_clean_tree", lambda: None)   # tests/test_write_results.py
    monkeypatch.setattr(bench_sdpo_lab, "run_all", lambda s, jobs, label, journal=None: specs.extend(s) or [
        {"method": m, "dial": d, "seed": seed, "lr": lr, "final_acc": 0.5} for m, d, seed, _, lr, _ in s])
    monkeypatch.setattr(bench_sdpo_lab, "write_results", lambda name, **kw: written.update(kw))
    monkeypatch.setattr(sys, "argv", ["bench_sdpo_lab.py", *argv])
    bench_sdpo_lab.main()
    return specs, written


def test_a_smaller_plain_budget_trains_at_its_top_dial_only(monkeypatch):
    """``--sft-steps 1500 --runs-at top`` (sdpo_lab_room.json): every warm start and run has 1500 plain steps,
    tuning and runs at the highest dial only; the teacher table covers every dial; the config records both."""
    specs, written = run_main(monkeypatch, ["--sft-steps", "1500", "--dial", "1000", "1500", "--runs-at", "top",
                                            "--methods", "grpo", "sdpo", "--seeds", "0", "1", "--tune-seeds", "100",
                                            "--lr-grid", "1e-5"])
    assert all(d == 1500 and lab_ == {"sft_steps": 1500} for _, d, _, _, _, lab_ in specs)
    assert len(specs) == 2 * 1 + 2 * 2    # tuning: 2 methods x 1 rate x 1 seed; runs: 2 methods x 2 seeds
    c = written["config"]
    assert (c["sft_steps"], c["runs_at"], c["dials"]) == (1500, "top", [1000, 1500])
    assert list(written["summary"]["teacher"]) == ["1000", "1500"]


def test_the_lab_at_every_dial_keeps_its_config(monkeypatch):
    """Without them: runs at every dial, the config's warm start (no lab fields), no new config keys."""
    specs, written = run_main(monkeypatch, ["--dial", "0", "1000", "--methods", "grpo", "--seeds", "0",
                                            "--tune-seeds", "100", "--lr-grid", "1e-5"])
    assert [(d, lab_) for _, d, _, _, _, lab_ in specs] == [(1000, None), (0, None), (1000, None)]
    assert not {"sft_steps", "runs_at"} & set(written["config"])


def test_a_dial_past_the_plain_budget_fails_before_any_warm_start(monkeypatch):
    with pytest.raises(SystemExit, match="from 0 to --sft-steps"):
        run_main(monkeypatch, ["--sft-steps", "1500", "--dial", "2000"])
