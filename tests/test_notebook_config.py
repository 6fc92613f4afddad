"""The notebooks' config cell (read, not run; the install cell before it: ``test_install_cell.py``): it
calls ``course.setup("NN")``, which chooses the model (``$SDPO_KIT_MODEL``, else the notebook's default for
the device), its profile from ``sdpo_kit/course/profiles/nbNN.py`` and the smoke sizes, and prints them
and the preflight. ``core.profiles`` itself: which profile a model runs, which it borrows, the smoke sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB, choose_model, pick_profile, profile_key
from sdpo_kit.course import profile_table as course_profiles
from sdpo_kit.course import setup

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_config_cell(path):
    """The config cell after the install cell: ``P = setup("NN")`` (the profiles live in
    ``sdpo_kit/course/profiles/nbNN.py``, one per model, each with its smoke sizes), with the line that shows
    how to choose the model."""
    config = code_cells(path)[1]
    number = path.name[:2]
    assert f'P = setup("{number}")' in config and "SDPO_KIT_MODEL" in config
    assert len(config.splitlines()) <= 8, "the config cell shows the choice in a few lines"
    table = course_profiles(number)
    assert {TINY_LAB, REAL_CPU_MODEL, T4_MODEL} <= set(table), f"nb{number}: a profile per model"
    for model, cuda in ((TINY_LAB, False), (REAL_CPU_MODEL, False), (T4_MODEL, True)):
        for smoke in ("0", "1"):
            P = setup(number, env={"SDPO_KIT_MODEL": model, "SDPO_KIT_SMOKE": smoke}, cuda=cuda, verbose=False)
            assert P.model == model and P.smoke == (smoke == "1")


def test_setup_picks_model_profile_and_sizes(capsys):
    """``course.setup``: notebook 00 opens on the real model on a CPU and on the T4 model on a GPU, the
    others on the tiny lab on a CPU; ``SDPO_KIT_MODEL`` chooses; SMOKE swaps in the smoke sizes and
    nothing else; the choice and the preflight are printed."""
    assert setup("00", env={}, cuda=False, verbose=False).model == REAL_CPU_MODEL
    assert setup("00", env={}, cuda=True, verbose=False).model == T4_MODEL
    assert setup("00", env={"SDPO_KIT_MODEL": TINY_LAB}, cuda=False, verbose=False).model == TINY_LAB
    full = setup("00", env={}, cuda=False, verbose=False)
    smoke = setup("00", env={"SDPO_KIT_SMOKE": "1"}, cuda=False, verbose=False)
    assert smoke.smoke and not full.smoke and smoke.config == full.config
    assert smoke.overrides["trainer.max_steps"] < 20 and full.overrides == {}
    capsys.readouterr()
    P = setup("00", env={}, cuda=False)
    out = capsys.readouterr().out
    assert "model: smollm2-135m" in out and "preflight: CPU" in out and "config='first_run'" in out
    assert P.n_show == full["n_show"] and P.seed == 0
    with pytest.raises(ValueError, match="no notebook '42'"):
        setup("42", env={}, cuda=False, verbose=False)
    with pytest.raises(AttributeError, match="no setting 'nope'"):
        getattr(P, "nope")  # noqa: B009


def test_choose_model_and_the_profile_each_model_runs(capsys):
    """The default model follows the device; the profile follows the device too: on CUDA every model but
    the tiny lab runs the T4 profile, on a CPU every real model the real CPU model's, and a model without a
    profile of its own is told which it borrows. SMOKE swaps in the profile's smoke sizes, nothing else."""
    assert choose_model({}, cuda=False) == TINY_LAB and choose_model({}, cuda=True) == T4_MODEL
    assert choose_model({"SDPO_KIT_MODEL": REAL_CPU_MODEL, "SDPO_KIT_SMOKE": "1"}, cuda=True) == REAL_CPU_MODEL
    assert [profile_key(m, cuda=False) for m in (TINY_LAB, REAL_CPU_MODEL, T4_MODEL, "org/x")] == \
        [TINY_LAB, REAL_CPU_MODEL, REAL_CPU_MODEL, REAL_CPU_MODEL]
    assert [profile_key(m, cuda=True) for m in (TINY_LAB, REAL_CPU_MODEL, T4_MODEL)] == [TINY_LAB, T4_MODEL, T4_MODEL]
    profiles = {TINY_LAB: dict(steps=500, lr=3e-4, smoke=dict(steps=12)),
                REAL_CPU_MODEL: dict(steps=30, lr=1e-4, smoke=dict(steps=2)), T4_MODEL: dict(steps=200, lr=2e-5)}
    assert pick_profile(profiles, TINY_LAB, smoke=True, cuda=False) == dict(steps=12, lr=3e-4)
    assert pick_profile(profiles, TINY_LAB, smoke=False, cuda=False) == dict(steps=500, lr=3e-4)
    capsys.readouterr()
    assert pick_profile(profiles, "org/x", cuda=False) == dict(steps=30, lr=1e-4)
    assert "borrowed: 'org/x' has no profile of its own" in capsys.readouterr().out
    pick_profile(profiles, REAL_CPU_MODEL, cuda=False)
    assert "borrowed" not in capsys.readouterr().out
    with pytest.raises(KeyError, match="no 'smollm2-135m' profile"):
        pick_profile({TINY_LAB: {}}, REAL_CPU_MODEL, cuda=False)


def test_sdpo_kit_profile_names_the_profile_on_any_device():
    """$SDPO_KIT_PROFILE overrides the device's rule (make gpu-check runs the real CPU model's own profile on a
    GPU: it cannot learn the T4 profile's task); unset, the rule stands."""
    env = {"SDPO_KIT_PROFILE": REAL_CPU_MODEL}
    assert profile_key(REAL_CPU_MODEL, cuda=True, env=env) == REAL_CPU_MODEL
    assert profile_key(REAL_CPU_MODEL, cuda=True, env={}) == T4_MODEL
    profiles = {REAL_CPU_MODEL: {"steps": 20, "smoke": {"steps": 1}}, T4_MODEL: {"steps": 200}}
    import os
    from unittest import mock

    with mock.patch.dict(os.environ, env):
        assert pick_profile(profiles, REAL_CPU_MODEL, smoke=True, cuda=True, verbose=False) == {"steps": 1}
