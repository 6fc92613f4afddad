"""Reference answers to the exercises of notebook 08 (scale out and export). CI loads them into the notebook
after each exercise cell (the cell's ``nbmake.post_cell_execute`` metadata); read them after trying."""

from __future__ import annotations

import numpy as np
import torch


def my_merge_lora(W: torch.Tensor, A: torch.Tensor, B: torch.Tensor, alpha: float, r: int) -> torch.Tensor:
    """Exercise 1: the adapter adds (alpha / r) B A to the weight (what peft's merge_and_unload does)."""
    return W + (alpha / r) * (B @ A)                                   # (d_out, r) @ (r, d_in) = (d_out, d_in)


def my_q8_0(x: np.ndarray) -> np.ndarray:
    """Exercise 2: per block of 32, d = max|x| / 127, q = roundf(x * (1 / d)) as int8, x^ = d16 q with d16 the
    scale stored in fp16. llama.cpp (and gguf) multiply by the reciprocal of the unrounded d and round halves
    away from zero, as C's roundf does (np.round takes them to even); an all-zero block has d = 0 and q = 0."""
    blocks = x.astype(np.float32).reshape(-1, 32)                     # (n_blocks, 32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / 127               # (n_blocks, 1)
    with np.errstate(divide="ignore"):
        v = blocks * np.where(d == 0, 0, 1 / d)                        # (n_blocks, 32)
    a = np.abs(v)
    q = (np.sign(v) * (np.floor(a) + np.floor(2 * (a - np.floor(a))))).astype(np.int8)   # roundf: halves away from 0
    return (q.astype(np.float32) * d.astype(np.float16).astype(np.float32)).reshape(x.shape)
