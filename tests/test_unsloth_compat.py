"""Unsloth's fast path: SDPOTRLTrainer / VAPORTRLTrainer must derive from the
GRPOTrainer Unsloth patches. Needs a CUDA GPU and unsloth installed: skipped otherwise (CI has
neither; see docs/concepts/sdpo.md). Each test runs in a fresh interpreter, since the import
order is the point."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or importlib.util.find_spec("unsloth") is None,
                                reason="Unsloth's patched trainers need a CUDA GPU and the unsloth package")


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_import_order_correct_gives_the_patched_class():
    """unsloth first, then our trainers: their base class is Unsloth's GRPOTrainer."""
    out = run("import unsloth, trl\n"
              "from sdpo_kit.sdpo.trl import SDPOTRLTrainer\n"
              "from sdpo_kit.vapor.trl import VAPORTRLTrainer\n"
              "print(SDPOTRLTrainer.__mro__[1] is trl.GRPOTrainer, VAPORTRLTrainer.__mro__[1] is trl.GRPOTrainer,\n"
              "      'Unsloth' in trl.GRPOTrainer.__name__)")
    assert out.split() == ["True", "True", "True"]


def test_import_order_wrong_misses_the_patch():
    """Our trainers imported before unsloth keep TRL's unpatched GRPOTrainer as their base: the
    reason models.load_policy (which imports unsloth) must come first."""
    out = run("from sdpo_kit.sdpo.trl import SDPOTRLTrainer\n"
              "import unsloth, trl\n"
              "print(SDPOTRLTrainer.__mro__[1] is trl.GRPOTrainer)")
    assert out.strip() == "False"


def test_generation_uses_unsloth_optimization():
    """The class the trainer builds on is the one Unsloth patched (its fast generate lives there)."""
    out = run("import unsloth, trl\n"
              "from sdpo_kit.sdpo.trl import SDPOTRLTrainer\n"
              "print(any('Unsloth' in c.__name__ for c in SDPOTRLTrainer.__mro__))")
    assert out.strip() == "True"
