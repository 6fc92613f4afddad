"""GPU check: every notebook top to bottom in smoke mode with CUDA visible, twice: on the tiny lab, and on the
real instruct model that installs offline (``SDPO_KIT_MODEL=smollm2-135m``) through the Colab path (16 bits,
LoRA, Unsloth's 4-bit base when it is installed, TRL's t4 preset), with its own profile's task and sizes
(``SDPO_KIT_PROFILE=smollm2-135m``; ``core.profiles``). No hub model can be fetched on a GPU machine without
network, so the T4 profile's own Qwen2.5-0.5B-Instruct cannot run there, and the 135M model gets no reward
at all on the T4 profile's task (3-digit sums of four terms: the first GPU run, 2026-11-26), so its
learning checks could not pass there. Its wheel comes from ``tools/gpu_wheels.py``
(``.gpu-wheels/models``, handed over as ``SDPO_KIT_SMOLLM2_WHEEL``).

Each runs as one script in a fresh interpreter (its code cells in order; the notebooks use no
magics), from ``notebooks/`` as nbmake runs them, with the exercises' solutions on (as ``make
notebooks``). Needs IPython (the notebooks import ``IPython.display``). Skipped without CUDA.
"""

from __future__ import annotations

import os

import pytest
from gpu_checks import GPU, ROOT, notebook_script, run_script, skip_unless

pytestmark = [*GPU, skip_unless("IPython")]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PROFILES = {"tiny-lab": {"SDPO_KIT_MODEL": "tiny-lab"},                  # test id -> what the notebook runs
            "real-model": {"SDPO_KIT_MODEL": "smollm2-135m", "SDPO_KIT_PROFILE": "smollm2-135m"}}


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_in_smoke_mode(path, profile, record_property):
    env = {"SDPO_KIT_SMOKE": "1", **PROFILES[profile], "SDPO_KIT_SOLUTIONS": "1", "MPLBACKEND": "Agg",
           "PYTHONUNBUFFERED": "1"}
    for key in ("SDPO_KIT_LLAMA_CPP", "SDPO_KIT_SMOLLM2_WHEEL", "SDPO_KIT_CACHE"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    _, peak = run_script(notebook_script(path), ROOT / "notebooks", env, timeout=900)
    if peak is not None:
        record_property("peak_gpu_mib", peak)
