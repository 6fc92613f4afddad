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
