"""The notebooks' first cells (read, not run): the install cell says when Colab needs a restart; the
config cell takes the model from ``$SDPO_KIT_MODEL`` (the tiny lab on a CPU, the T4 profile's model on
CUDA when unset), never from SMOKE, and prints the preflight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def model_name(config_cell: str, env: dict, cuda: bool) -> str:
    """MODEL_NAME as the config cell's two lines compute it, with ``env`` and CUDA stated."""
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
    assert "SDPO_KIT_MODEL" in config and "not SMOKE" not in config and "print(preflight(MODEL_NAME" in config
    assert model_name(config, {}, cuda=False) == "tiny-lab"
    assert model_name(config, {}, cuda=True) == "Qwen/Qwen2.5-0.5B-Instruct"
    assert model_name(config, {"SDPO_KIT_SMOKE": "1"}, cuda=True) == "Qwen/Qwen2.5-0.5B-Instruct"  # sizes only
    assert model_name(config, {"SDPO_KIT_MODEL": "tiny-lab"}, cuda=True) == "tiny-lab"
    assert model_name(config, {"SDPO_KIT_MODEL": "org/other"}, cuda=False) == "org/other"
    assert "PROFILES.get(MODEL_NAME, PROFILES[T4_MODEL])" in config  # another hub id: the T4 profile
