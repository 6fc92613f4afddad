"""Notebook 06's plumbing (test-time discovery), checked here so the notebook keeps the checks of its ideas.

Its profiles (``sdpo_kit/course/profiles/nb06.py``) agree with the skill lab's config and fit the methods'
rules; the screening rates are counts over samples; running ``discovery_curves`` one method at a time (the
notebook does, to time each) gives the curves of one joint run; and the discovery plot counts attempts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.course import profile_table
from sdpo_kit.models import load_policy
from sdpo_kit.registry import load_config
from sdpo_kit.rewards import feedback_reward
from sdpo_kit.sdpo.at_test_time import METHODS, discovery_curves, success_rates
from sdpo_kit.tasks import ArithmeticTask

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "06_test_time_self_distillation.ipynb"
PROFILES = profile_table("06")


def sizes(profile: dict) -> list[dict]:
    """The profile at full size and with its smoke sizes applied."""
    full = {k: v for k, v in profile.items() if k != "smoke"}
    return [full, {**full, **profile.get("smoke", {})}]


@pytest.fixture(scope="module")
def lab():
    model, tok = load_policy("tiny-lab")          # the arithmetic warm start (notebook 00's), cached on disk
    task = ArithmeticTask()
    return model, tok, task, task.splits()[1]


def test_the_skill_lab_profile_is_configs_sdpo_lab_yaml():
    """The tiny lab's task, teacher templates, completion length, temperature and top of the dial are
    configs/sdpo_lab.yaml's, so its warm starts read the reprompt in the form they were trained on."""
    cfg = load_config(PROFILES[TINY_LAB]["config"])   # a preset's name
    P = PROFILES[TINY_LAB]
    assert P["task"] == dict(cfg.task)
    assert P["templates"] == {k: getattr(cfg.trainer, k) for k in P["templates"]}
    assert len(P["templates"]) == 3
    assert (P["max_new_tokens"], P["temperature"]) == (cfg.trainer.max_completion_length, cfg.trainer.temperature)
    assert P["dial"] == (0, cfg.model.lab["context_steps"])


@pytest.mark.parametrize("key", [TINY_LAB, REAL_CPU_MODEL, T4_MODEL])
def test_every_profile_fits_the_methods(key):
    """Every profile, at full and smoke size, names the same settings; its budgets are increasing and K is a
    multiple of the batch (multi-turn's rounds spend exactly K attempts); the inline loops run on no more
    questions than are used; smoke is no larger than full; a real model loads a 16-bit base, since
    test-time SDPO cannot copy and train a 4-bit one; only a model with a dial is checked for its effect."""
    names = set(PROFILES[TINY_LAB])
    assert set(PROFILES[key]) == names, set(PROFILES[key]) ^ names
    full, smoke = sizes(PROFILES[key])
    for P in (full, smoke):
        budgets = list(P["budgets"])
        assert budgets == sorted(set(budgets)) and all(isinstance(k, int) and k > 0 for k in budgets)
        assert budgets[-1] % P["batch"] == 0
        assert 1 <= P["n_check"] <= P["max_hard"] and P["screen_samples"] >= 1
    for k in ("batch", "screen_rows", "screen_samples", "max_hard", "n_check"):
        assert smoke[k] <= full[k], k
    assert max(smoke["budgets"]) <= max(full["budgets"])
    assert smoke["check_dial"] is None
    if full["dial"] is None:
        assert full["load"].get("load_in_4bit") is False and full["config"] is None and full["check_dial"] is None
    else:
        assert len(full["dial"]) == len(smoke["dial"]) == 2 and full["dial"][0] == smoke["dial"][0] == 0


def test_screening_rates_are_counts_over_samples(lab):
    """success_rates gives each question's share of right plain samples: a whole number over samples, in [0, 1]."""
    model, tok, task, heldout = lab
    samples = 8
    rates = success_rates(model, tok, task, heldout[:6], feedback_reward(), samples=samples, max_new_tokens=4)
    assert len(rates) == 6
    assert all(0.0 <= p <= 1.0 and abs(p * samples - round(p * samples)) < 1e-9 for p in rates), rates


def test_one_method_at_a_time_gives_the_joint_curves(lab):
    """The notebook runs discovery_curves one method at a time (to time each): each question is seeded by
    its index alone, so the first successes and rates equal those of one joint run, and each method's entry
    holds one rate per budget and one first success per question."""
    model, tok, task, heldout = lab
    rows, kw = heldout[:3], dict(budgets=[2, 4], batch_size=2, seed=0, max_new_tokens=4, learning_rate=1e-4)
    joint = discovery_curves(model, tok, task, rows, feedback_reward(), **kw)
    for method in METHODS:
        alone = discovery_curves(model, tok, task, rows, feedback_reward(), methods=(method,), **kw)
        assert list(alone["methods"]) == [method]
        res = alone["methods"][method]
        assert len(res["discovery"]) == 2 and len(res["first_success"]) == 3
        assert res["first_success"] == joint["methods"][method]["first_success"], method
        assert res["discovery"] == joint["methods"][method]["discovery"], method
    assert torch.is_grad_enabled()


def test_the_discovery_plot_counts_attempts():
    """The discovery curves' x axis is the attempts (answers sampled), not training steps: the notebook draws
    it itself, not with LivePlot, whose axis always reads "step"."""
    code = "\n".join("".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code")
    assert 'xlabel="attempts' in code
    assert "LivePlot" not in code and '"step"' not in code
