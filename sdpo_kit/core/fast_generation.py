"""Fast generation with vLLM on the two paths that have it, guarded so a machine without it falls back.

    TRL path      preset ``"t4_vllm"`` (``trl_base.PRESETS``): the T4 preset plus TRL's
                  ``use_vllm=True, vllm_mode="colocate"`` (vLLM inside the training process, on the
                  same GPU) with ``vllm_gpu_memory_utilization=VLLM_T4_MEMORY``
    Unsloth path  ``models.load_policy(name, fast_inference=True)``: Unsloth's ``FastLanguageModel``
                  with vLLM inside (``gpu_memory_utilization``); Unsloth's patched GRPOTrainer then
                  generates with it when the TRL preset asks for vLLM (``"t4_vllm"``)

The T4's memory split (15 GiB): vLLM takes the fraction it is given up front, for its copy of
the weights and its KV cache, and training gets the rest. 0.35 gives vLLM about 5.2 GiB (a 0.5B
model's fp16 weights are about 1 GiB, the rest is KV cache for G x (prompt + completion) tokens)
and leaves about 9.5 GiB for the 4-bit base, LoRA, AdamW and the fp32 logits that
``core.preflight`` estimates. A larger model wants a larger share: raise it until the preflight
estimate no longer fits, then shorten the completion budget instead.

The guards: asked for on a CPU, or where ``vllm`` is not importable, the option is dropped with a
``FastGenerationUnavailable`` warning that says why and what runs instead (transformers'
``generate``), so one config runs everywhere. ``make gpu-check`` exercises the real thing when
vLLM is installed.

Left out on purpose: vLLM's server mode (a second GPU), its sleep mode, and the scratch loops
(they sample with ``core.sampling``'s own decoding loop, the same draws as transformers' ``generate``,
LoRA folded into the base weights: one readable file).
"""

from __future__ import annotations

import importlib.util
import warnings

import torch

VLLM_T4_MEMORY = 0.35  # the GPU's share vLLM takes on a T4 (see the module docstring)
VLLM_ARGS = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": VLLM_T4_MEMORY}


class FastGenerationUnavailable(UserWarning):
    """vLLM generation was asked for where it cannot run; the run goes on with transformers' generate."""


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def vllm_unavailable_reason(cuda: bool | None = None, installed: bool | None = None) -> str | None:
    """Why vLLM cannot generate here (None when it can). ``cuda`` / ``installed``: stated, or read."""
    cuda = torch.cuda.is_available() if cuda is None else cuda
    installed = vllm_installed() if installed is None else installed
    if not cuda:
        return "vLLM generates on a CUDA GPU and there is none here"
    if not installed:
        return "vllm is not installed (pip install vllm, a build matching this torch)"
    return None


def guard_trl_vllm(args: dict, *, cuda: bool | None = None, installed: bool | None = None) -> dict:
    """TRL arguments with ``use_vllm`` dropped (and a warning) when vLLM cannot run here; unchanged
    otherwise. Every ``vllm_*`` key goes with it, so TRL sees a plain config."""
    if not args.get("use_vllm"):
        return args
    reason = vllm_unavailable_reason(cuda, installed)
    if reason is None:
        return args
    warnings.warn(f"use_vllm=True: {reason}; generating with transformers' generate instead",
                  FastGenerationUnavailable, stacklevel=3)
    return {k: v for k, v in args.items() if k != "use_vllm" and not k.startswith("vllm_")}


def guard_fast_inference(requested: bool, *, unsloth_path: bool, cuda: bool | None = None,
                         installed: bool | None = None) -> bool:
    """Whether ``load_policy`` passes ``fast_inference=True`` to Unsloth: only when asked, on the
    Unsloth path (CUDA and unsloth importable), with vllm importable; else False and a warning."""
    if not requested:
        return False
    reason = vllm_unavailable_reason(cuda, installed)
    if reason is None and not unsloth_path:
        reason = "fast_inference is an Unsloth option and this model loads without Unsloth"
    if reason is None:
        return True
    warnings.warn(f"fast_inference=True: {reason}; loading without vLLM (transformers' generate samples)",
                  FastGenerationUnavailable, stacklevel=3)
    return False
