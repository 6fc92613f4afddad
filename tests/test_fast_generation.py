"""The vLLM option (``core.fast_generation``): the T4 preset that turns it on, and the fallback with a
clear warning where it cannot run (no CUDA, no vllm, not the Unsloth path)."""

from __future__ import annotations

import warnings

import pytest
import torch

from sdpo_kit.core.fast_generation import (
    VLLM_ARGS,
    FastGenerationUnavailable,
    guard_fast_inference,
    guard_trl_vllm,
)
from sdpo_kit.core.trl_base import PRESETS
from sdpo_kit.models import load_policy

ASKED = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.35, "fp16": True}


def test_the_t4_vllm_preset_is_the_t4_preset_with_vllm_colocated():
    assert PRESETS["t4_vllm"] == {**PRESETS["t4"], **VLLM_ARGS}
    assert VLLM_ARGS["vllm_mode"] == "colocate" and 0 < VLLM_ARGS["vllm_gpu_memory_utilization"] < 0.5


@pytest.mark.parametrize("cuda, installed, why", [(False, True, "CUDA GPU"), (True, False, "not installed")])
def test_trl_vllm_falls_back_with_a_warning(cuda, installed, why):
    """No CUDA, or no vllm: use_vllm and every vllm_* key dropped, the rest kept, a warning that says why."""
    with pytest.warns(FastGenerationUnavailable, match=why):
        args = guard_trl_vllm(ASKED, cuda=cuda, installed=installed)
    assert args == {"fp16": True}


def test_trl_vllm_stays_where_it_can_run_and_nothing_is_said_when_not_asked():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert guard_trl_vllm(ASKED, cuda=True, installed=True) == ASKED
        assert guard_trl_vllm({"fp16": True}, cuda=False, installed=False) == {"fp16": True}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback")
def test_the_preset_on_this_cpu_trains_without_vllm():
    """grpo_args with preset t4_vllm on a CPU: the warning, and TRL gets no vLLM arguments."""
    from sdpo_kit.grpo.trl import grpo_args

    with pytest.warns(FastGenerationUnavailable, match="CUDA"):
        args = grpo_args("t4_vllm", "runs/x", max_steps=1)
    assert "use_vllm" not in args and not any(k.startswith("vllm_") for k in args)


def test_unsloth_fast_inference_is_guarded():
    assert guard_fast_inference(False, unsloth_path=True, cuda=True, installed=True) is False
    assert guard_fast_inference(True, unsloth_path=True, cuda=True, installed=True) is True
    with pytest.warns(FastGenerationUnavailable, match="Unsloth option"):
        assert guard_fast_inference(True, unsloth_path=False, cuda=True, installed=True) is False
    with pytest.warns(FastGenerationUnavailable, match="CUDA GPU"):
        assert guard_fast_inference(True, unsloth_path=True, cuda=False, installed=True) is False


def test_load_policy_falls_back_on_the_tiny_lab():
    """fast_inference=True on the tiny lab: a warning, and the model loads as usual."""
    with pytest.warns(FastGenerationUnavailable):
        model, tok = load_policy("tiny-lab", fast_inference=True)
    assert model is not None and tok.padding_side == "left"
