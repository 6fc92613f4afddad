"""GPU check: every notebook top to bottom in smoke mode with CUDA visible, on the tiny lab
(``SDPO_KIT_MODEL=tiny-lab``: no hub model can be fetched on a GPU machine without network).

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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_in_smoke_mode(path, record_property):
    env = {"SDPO_KIT_SMOKE": "1", "SDPO_KIT_MODEL": "tiny-lab", "SDPO_KIT_SOLUTIONS": "1", "MPLBACKEND": "Agg",
           "PYTHONUNBUFFERED": "1"}
    if os.environ.get("SDPO_KIT_LLAMA_CPP"):
        env["SDPO_KIT_LLAMA_CPP"] = os.environ["SDPO_KIT_LLAMA_CPP"]
    _, peak = run_script(notebook_script(path), ROOT / "notebooks", env, timeout=900)
    if peak is not None:
        record_property("peak_gpu_mib", peak)
