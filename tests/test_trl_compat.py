"""TRL 1.15 (Unsloth's pin, what Colab runs) and 1.16 (CI's pin): what sdpo_kit imports exists in
both, and a TRL that cannot run on this device is named before it crashes.

``make test-trl115`` runs this file, with the TRL-path tests, in a second venv on trl 1.15.0.
"""

from __future__ import annotations

import importlib.metadata as md

import pytest
import trl.trainer.utils as trl_utils
from packaging.version import Version

from sdpo_kit.core.trl_base import check_trl_runs_on


def test_installed_trl_is_one_we_support():
    """sdpo_kit's TRL path is tested on 1.15 and 1.16."""
    assert Version("1.15") <= Version(md.version("trl")) < Version("1.17")


def test_the_names_we_import_from_trl_exist():
    """GRPOConfig / GRPOTrainer (trl_grpo), the SDPO reference (the SDPO track) and the
    TrainerCallback base (metrics, plots), from the same places in 1.15 and 1.16."""
    from transformers import TrainerCallback  # noqa: F401
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401
    from trl.experimental.sdpo import SDPOConfig, SDPOTrainer  # noqa: F401

    from sdpo_kit.grpo.trl import _trl_fields

    assert {"num_generations", "epsilon_high", "loss_type", "beta", "scale_rewards", "save_steps"} <= _trl_fields()


def test_a_trl_without_a_cpu_log_prob_path_is_named(monkeypatch):
    """trl 1.15 without triton (the fused log-prob kernel is None) and without 1.16's torch
    fallback raises a RuntimeError that says what to do; a GPU or a torch stand-in passes."""
    monkeypatch.delattr(trl_utils, "_use_triton", raising=False)  # what 1.15 looks like
    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", None)
    with pytest.raises(RuntimeError, match=r"Triton kernel that needs a GPU.*trl==1.16.0.*backend: scratch"):
        check_trl_runs_on("cpu")
    check_trl_runs_on("cuda")  # the kernel's home: no complaint

    class StandIn:
        pass

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", StandIn)
    check_trl_runs_on("cpu")
