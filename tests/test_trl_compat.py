"""TRL 1.15 (Unsloth's pin, what Colab runs) and 1.16 (CI's pin): what sdpo_kit imports exists in
both, and a TRL that cannot run on this device is named before it crashes.

``make test-trl115`` runs this file, with the TRL-path tests, on trl 1.15.0 laid over ``.venv``.
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
    """GRPOConfig / GRPOTrainer (grpo/trl.py), the SDPO reference (the SDPO track) and the
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


def test_beside_a_gpu_the_cpu_preset_moves_there_on_a_trl_that_cannot_train_on_a_cpu(monkeypatch):
    """trl 1.15 (the colab extra) on a GPU machine running the tiny lab (TRL's 'cpu' preset): the first GPU run,
    on an H200, failed here; now the preset trains on the GPU in fp32, with a warning. Without a GPU, or on a
    TRL that runs on a CPU, the arguments stay as they are."""
    import torch

    from sdpo_kit.core.trl_base import cpu_args_on_gpu, resolve_preset

    cpu = resolve_preset("cpu")
    monkeypatch.delattr(trl_utils, "_use_triton", raising=False)
    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cpu_args_on_gpu(cpu) == cpu                        # no GPU: check_trl_runs_on names the problem
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.warns(UserWarning, match="cannot train on a CPU.*trains on the GPU instead, in fp32"):
        moved = cpu_args_on_gpu(cpu)
    assert moved == {**cpu, "use_cpu": False} and not moved["fp16"] and not moved["bf16"]
    assert cpu_args_on_gpu(resolve_preset("t4", (7, 5))) == resolve_preset("t4", (7, 5))    # not asked for the CPU
    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", type("StandIn", (), {}))
    assert cpu_args_on_gpu(cpu) == cpu                        # a TRL that runs on a CPU: stays there


def test_the_gpu_presets_train_in_the_16_bits_the_device_has():
    """A T4 (7.5) trains in fp16; from 8.0 (an A100, an H200) in bf16, the dtype load_policy and Unsloth load
    the model in there (Unsloth refuses fp16 training of a bf16 model); the cpu preset in fp32 everywhere."""
    from sdpo_kit.core.trl_base import resolve_preset

    assert {k: resolve_preset("t4", (7, 5))[k] for k in ("fp16", "bf16")} == {"fp16": True, "bf16": False}
    for cc in ((8, 0), (9, 0)):
        assert {k: resolve_preset(p, cc)[k] for p in ("t4", "t4_vllm") for k in ("fp16", "bf16")} == \
            {"fp16": False, "bf16": True}
    assert not resolve_preset("cpu", (9, 0))["fp16"] and not resolve_preset("cpu", (9, 0))["bf16"]
