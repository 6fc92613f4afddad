"""The notebooks' first cells (read, not run): the install cell says when Colab needs a restart; the
config cell chooses the model with ``core.profiles`` (``$SDPO_KIT_MODEL``, else the tiny lab on a CPU
and the T4 profile's model on CUDA), keeps a profile for the tiny lab, the real CPU model and the T4,
never branches on SMOKE outside the profiles' sizes, and prints the preflight. ``core.profiles`` itself:
which profile a model runs, which it borrows, and the smoke sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB, choose_model, pick_profile, profile_key

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def model_name(config_cell: str, env: dict, cuda: bool) -> str:
    """MODEL_NAME as an old-style config cell's two lines compute it, with ``env`` and CUDA stated."""
    import types

    lines = [ln for ln in config_cell.splitlines() if ln.startswith(("T4_MODEL =", "MODEL_NAME ="))]
    scope = {"os": types.SimpleNamespace(environ=env),
             "torch": types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: cuda))}
    exec("\n".join(lines), scope)
    return scope["MODEL_NAME"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_config_and_install_cells(path):
    install, config = code_cells(path)[0], code_cells(path)[1]
    assert "Restart session" in install and "sdpo_kit[colab]" in install
    assert "not SMOKE" not in config and "print(preflight(MODEL_NAME" in config
    if "pick_profile" in config:
        assert "MODEL_NAME = choose_model()" in config
        # P, or PROFILE where P is taken (notebook 04: the preference term)
        assert any(f"{name} = pick_profile(PROFILES, MODEL_NAME, SMOKE)" in config for name in ("P", "PROFILE"))
        for key in ('"tiny-lab": dict(', "REAL_CPU_MODEL: dict(", "T4_MODEL: dict("):
            assert key in config, key
        assert 'os.environ["SDPO_KIT_MODEL"]' in config, "the config cell shows how to choose the model"
        return
    assert "SDPO_KIT_MODEL" in config   # not yet on core.profiles: the two lines of its own
    assert model_name(config, {}, cuda=False) == "tiny-lab"
    assert model_name(config, {}, cuda=True) == "Qwen/Qwen2.5-0.5B-Instruct"
    assert model_name(config, {"SDPO_KIT_MODEL": "tiny-lab"}, cuda=True) == "tiny-lab"


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
