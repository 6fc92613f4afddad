"""Mixed precision for the scratch loops, chosen from the device the way transformers' Trainer does it.

    choose_precision(device_type, capability, requested)   a pure function: which dtype and why
    device_precision(device, requested)                     the same, reading the device's capability
    MixedPrecision                                          autocast, the fp16 gradient scaler, the step
    upcast_trainable(model)                                 trainable (LoRA) weights in fp32

What ``"auto"`` picks:

    CPU                          fp32, no autocast: every CPU run so far, unchanged
    CUDA, capability >= 8.0      bf16 autocast (bf16 has fp32's exponent: no loss scaling)
    CUDA, capability <  8.0      fp16 autocast with a gradient scaler (a T4 is 7.5)

A T4 has no bf16 tensor cores, yet ``torch.cuda.is_bf16_supported()`` says True there (bf16 runs
through emulation, slowly), so the capability decides, never that function. Under autocast the
matmuls run in the low precision while the weights that train stay fp32 (``upcast_trainable``): an
fp16 weight cannot take an update smaller than its spacing, and the scaler refuses fp16 gradients.
The scaler multiplies the loss by S before ``backward`` (fp16 gradients would underflow to 0),
divides the gradients by S before clipping, and skips the optimizer step when a gradient is inf or
NaN, halving S; S doubles after 2000 clean steps (``torch.amp.GradScaler``).

Left out on purpose: fp8, and the TRL backend (its preset sets ``fp16`` / ``bf16`` for transformers'
Trainer, which does the same things).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

MIXED_PRECISION = ("auto", "no", "fp16", "bf16")
DTYPES = {"no": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
BF16_CAPABILITY = (8, 0)  # Ampere: the first GPUs with bf16 tensor cores


def has_bf16(capability) -> bool:
    """Whether a CUDA device of this compute capability has bf16 in hardware (8.0 and up)."""
    return capability is not None and tuple(capability) >= BF16_CAPABILITY


def _cc(capability) -> str:
    return "unknown" if capability is None else ".".join(str(c) for c in capability)


@dataclass(frozen=True)
class Precision:
    """What the scratch loop trains in: ``mode`` ``"no"`` (fp32), ``"fp16"`` or ``"bf16"``, and why."""

    mode: str
    device_type: str
    reason: str

    @property
    def dtype(self) -> torch.dtype:
        """The compute dtype of the forward (the trainable weights stay fp32)."""
        return DTYPES[self.mode]

    @property
    def autocast(self) -> bool:
        return self.mode != "no"

    @property
    def scaler(self) -> bool:
        """fp16 needs loss scaling; bf16 and fp32 do not."""
        return self.mode == "fp16"


def choose_precision(device_type: str, capability=None, requested: str = "auto") -> Precision:
    """The precision to train in on a ``device_type`` device of compute ``capability`` ((7, 5) for a
    T4, None off CUDA). ``requested``: ``"auto"`` (see the module docstring), ``"no"`` (fp32),
    ``"fp16"`` or ``"bf16"``; bf16 on a CUDA device below 8.0 is refused (it would be emulated)."""
    if requested not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION}, got {requested!r}")
    if requested == "no":
        return Precision("no", device_type, "fp32 (mixed_precision='no')")
    if device_type != "cuda":
        if requested == "auto":
            return Precision("no", device_type, "fp32, no autocast (mixed precision is chosen for CUDA only)")
        return Precision(requested, device_type, f"{requested} autocast on {device_type} (asked for)")
    cc = _cc(capability)
    if requested == "bf16" and not has_bf16(capability):
        raise ValueError(f"mixed_precision='bf16' on a GPU of compute capability {cc}: bf16 needs 8.0 or more "
                         f"(torch.cuda.is_bf16_supported() says True through emulation, which is slow); "
                         f"use 'fp16' or 'auto'")
    if requested == "fp16" or (requested == "auto" and not has_bf16(capability)):
        why = "asked for" if requested == "fp16" else f"compute capability {cc} < 8.0 has no bf16 tensor cores"
        return Precision("fp16", "cuda", f"fp16 autocast + gradient scaler, fp32 trainable weights ({why})")
    why = "asked for" if requested == "bf16" else f"compute capability {cc} >= 8.0"
    return Precision("bf16", "cuda", f"bf16 autocast, fp32 trainable weights, no scaler ({why})")


def device_precision(device, requested: str = "auto") -> Precision:
    """``choose_precision`` for a torch device (a CUDA device's capability is read from it)."""
    device = torch.device(device)
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    return choose_precision(device.type, capability, requested)


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def upcast_trainable(model) -> int:
    """Cast every trainable fp16 / bf16 parameter to fp32 in place; returns how many were cast.
    A no-op on an fp32 model (every CPU run)."""
    n = 0
    for p in model.parameters():
        if p.requires_grad and p.dtype in (torch.float16, torch.bfloat16):
            p.data = p.data.float()
            n += 1
    return n


class MixedPrecision:
    """Autocast, backward and the optimizer step for one ``Precision``.

    With ``mode == "no"`` it is exactly the plain loop: no autocast context, ``loss.backward()``,
    clip, ``optimizer.step()``; the same operations in the same order."""

    def __init__(self, precision: Precision):
        self.precision = precision
        self.scaler = torch.amp.GradScaler(precision.device_type) if precision.scaler else None

    def autocast(self):
        """The context the forward runs in (a null context in fp32)."""
        if not self.precision.autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.precision.device_type, dtype=self.precision.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``; in fp16 of the scaled loss S x loss. The backward runs outside autocast
        (its ops take the dtypes the forward recorded), as PyTorch's AMP recipe says."""
        if not self.precision.autocast:
            loss.backward()
            return
        if self.scaler is not None:
            loss = self.scaler.scale(loss)                                     # scalar
        with torch.autocast(self.precision.device_type, enabled=False):
            loss.backward()

    def step(self, optimizer, params, max_grad_norm: float) -> bool:
        """Clip the gradient norm to ``max_grad_norm`` and step; returns False when the scaler
        skipped the step (an inf / NaN gradient; the weights are left as they were)."""
        if self.scaler is None:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()
            return True
        self.scaler.unscale_(optimizer)                    # clip the true gradient, not S times it
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        scale = self.scaler.get_scale()
        self.scaler.step(optimizer)                        # skipped when unscale_ found an inf / NaN
        self.scaler.update()                               # halves S after a skip
        return self.scaler.get_scale() >= scale

    def state_dict(self) -> dict:
        return self.scaler.state_dict() if self.scaler is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
