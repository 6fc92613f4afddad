"""Reference answers to the exercises of notebooks/08_scale_out_and_export.ipynb (merging a LoRA
adapter, q8_0 by hand)."""

from __future__ import annotations

import numpy as np
import torch


def my_merge_lora(W: torch.Tensor, A: torch.Tensor, B: torch.Tensor, alpha: float, r: int) -> torch.Tensor:
    """Exercise 1: the adapter adds (alpha / r) B A to the weight (peft's merge_and_unload)."""
    return W + (alpha / r) * (B @ A)


def my_q8_0(x: np.ndarray) -> np.ndarray:
    """Exercise 2: per block of 32, d = max|x| / 127 rounded to fp16, q = roundf(x * (1 / d)) in int8; x^ = d q.
    (gguf, like llama.cpp, multiplies by the reciprocal of the unrounded d and rounds halves away from zero, C's
    roundf: numpy's np.round takes them to even, and a model whose weights were quantised before has exact
    halves; d is stored in fp16; an all-zero block has d = 0 and q = 0.)"""
    blocks = x.astype(np.float32).reshape(-1, 32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore"):
        v = blocks * np.where(d == 0, 0, 1 / d)                        # (n_blocks, 32)
    a = np.abs(v)
    q = (np.sign(v) * (np.floor(a) + np.floor(2 * (a - np.floor(a))))).astype(np.int8)   # roundf: halves away from 0
    return (q.astype(np.float32) * d.astype(np.float16).astype(np.float32)).reshape(x.shape)
