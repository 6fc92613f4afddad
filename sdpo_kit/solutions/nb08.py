"""Reference answers to the exercises of notebooks/08_scale_out_and_export.ipynb (merging a LoRA
adapter, q8_0 by hand)."""

from __future__ import annotations

import numpy as np
import torch


def my_merge_lora(W: torch.Tensor, A: torch.Tensor, B: torch.Tensor, alpha: float, r: int) -> torch.Tensor:
    """Exercise 1: the adapter adds (alpha / r) B A to the weight (peft's merge_and_unload)."""
    return W + (alpha / r) * (B @ A)


def my_q8_0(x: np.ndarray) -> np.ndarray:
    """Exercise 2: per block of 32, d = max|x| / 127 rounded to fp16, q = round(x / d) in int8; x^ = d q.
    (gguf computes q with the unrounded d and stores d in fp16; an all-zero block has d = 0 and q = 0.)"""
    blocks = x.astype(np.float32).reshape(-1, 32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d == 0, 0, np.round(blocks / d)).astype(np.int8)
    return (q.astype(np.float32) * d.astype(np.float16).astype(np.float32)).reshape(x.shape)
