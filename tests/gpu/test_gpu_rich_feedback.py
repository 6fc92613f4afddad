"""GPU check, ``examples/sdpo_rich_feedback.py``'s CUDA path: a small coder model, the shipped code
problems, the ``code`` reward's feedback in our SDPOTRLTrainer's teacher prompts, two steps with the
T4 preset, the pass rate on every test before and after.

Skipped without CUDA, without trl, and without a coder model on this machine: the one named by
``$SDPO_KIT_CODER_MODEL`` (a hub id or a local folder), else Qwen/Qwen2.5-Coder-0.5B-Instruct when
it is in the local hub cache (a GPU machine without network cannot download it).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

import pytest
from gpu_checks import GPU, ROOT, skip_unless

pytestmark = GPU
SCRIPT = ROOT / "examples" / "sdpo_rich_feedback.py"


def load_example():
    spec = importlib.util.spec_from_file_location("sdpo_rich_feedback", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def local_coder_model(default: str) -> str | None:
    """``$SDPO_KIT_CODER_MODEL``, else ``default`` when its config is in the local hub cache, else None."""
    name = os.environ.get("SDPO_KIT_CODER_MODEL")
    if name:
        return name
    from huggingface_hub import try_to_load_from_cache

    return default if isinstance(try_to_load_from_cache(default, "config.json"), str) else None


@skip_unless("trl")
def test_cuda_path_two_steps(tmp_path, record_property):
    """Two SDPO steps on a coder model: finite losses, the tests' feedback reached some teacher prompt
    (``sdpo/feedback_frac`` > 0: a 0.5B model fails some of 8 attempts), pass rates in [0, 1] at
    step 0 and at the end, metrics.jsonl written."""
    example = load_example()
    model = local_coder_model(example.DEFAULT_MODEL)
    if model is None:
        pytest.skip(f"no coder model here: set SDPO_KIT_CODER_MODEL, or put {example.DEFAULT_MODEL} in the hub cache")
    out = tmp_path / "run"
    summary = example.main(["--device", "cuda", "--model", model, "--steps", "2", "--output-dir", str(out),
                            "--set", "trainer.max_completion_length=256"])
    record_property("pass_rate", [summary["before"], summary["after"]])
    steps = [r for r in summary["history"] if "loss" in r]
    assert len(steps) == 2 and all(math.isfinite(r["loss"]) for r in steps)
    assert max(r.get("sdpo/feedback_frac", 0.0) for r in steps) > 0
    assert 0.0 <= summary["before"] <= 1.0 and 0.0 <= summary["after"] <= 1.0
    rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    assert sum(r.get("eval/accuracy") is not None for r in rows) >= 2
