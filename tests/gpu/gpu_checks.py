"""What the GPU checks share: the ``gpu`` marks, a skip for a missing package, a notebook runner.

Left out on purpose: fixtures (``conftest.py`` has them) and anything a CPU test needs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

CUDA = torch.cuda.is_available()
ROOT = Path(__file__).resolve().parents[2]
GPU = [pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason="no CUDA")]
PEAK = "SDPO_KIT_PEAK_GPU_MIB"  # the line a subprocess check prints its peak memory on


def skip_unless(module: str):
    """Skip a check that needs ``module`` when it is not installed (tools/gpu_wheels.py fetches it)."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} is not installed (tools/gpu_wheels.py fetches it)")


def notebook_script(path: Path) -> str:
    """A notebook's code cells as one script (it has no magics; ``display`` comes from IPython), each followed by
    the lines nbmake runs after it (``nbmake.post_cell_execute``: an exercise's reference answer imported from
    ``notebooks/solutions``), and a last line that prints the peak GPU memory."""
    cells = json.loads(path.read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) + "".join(
        "\n" + line for line in c.get("metadata", {}).get("nbmake", {}).get("post_cell_execute", []))
        for c in cells if c["cell_type"] == "code")
    return (code + "\n\nimport torch\nif torch.cuda.is_available():\n"
            f"    print('{PEAK}', torch.cuda.max_memory_allocated() / 2**20)\n")


def run_script(code: str, cwd: Path, env: dict, timeout: int) -> tuple[str, float | None]:
    """Run ``code`` in a fresh interpreter; (its output, the peak GPU MiB it printed or None).
    A non-zero exit raises with the output's tail."""
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **env}
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    out = proc.stdout + proc.stderr
    if proc.returncode:
        raise AssertionError(f"exit {proc.returncode}:\n{out[-3000:]}")
    peaks = [float(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith(PEAK)]
    return out, (peaks[-1] if peaks else None)
