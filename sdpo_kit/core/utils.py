"""Small helpers every part of the library shares.

* ``eval_mode(model)``: a context manager that puts a model in eval mode (no dropout) and
  gives it back in the mode it came in, whatever happens inside.
* ``seed_everything(seed)``: Python's ``random``, NumPy's and torch's generators in one call.
* ``tolerances(model)``: ``assert_close`` tolerances that follow the model's precision (fp32
  tight; fp16 / bf16 / 4-bit loose), so a check does not branch on which model runs.

Left out on purpose: device placement and dtype helpers (``models.load_policy`` owns those).
"""

from __future__ import annotations

import contextlib
import random

import torch


@contextlib.contextmanager
def eval_mode(model):
    """``with eval_mode(model): ...`` runs the block in eval mode and restores train / eval after."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy (when installed) and torch (CPU and every GPU)."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy ships with the pinned stack
        pass


def tolerances(model_or_dtype) -> dict:
    """``{"rtol": ..., "atol": ...}`` for comparing two computations of one model's outputs.

    fp32 / fp64 weights: 1e-4 / 1e-5 (two fp32 code paths differ by rounding only). fp16,
    bf16 or a 4-bit quantised model: 2e-2 / 2e-2 (half-precision matmuls round at ~1e-3)."""
    if isinstance(model_or_dtype, torch.dtype):
        dtypes = {model_or_dtype}
    else:
        dtypes = {p.dtype for p in model_or_dtype.parameters() if p.is_floating_point()}
        if getattr(model_or_dtype, "is_loaded_in_4bit", False) or getattr(model_or_dtype, "is_loaded_in_8bit", False):
            dtypes.add(torch.float16)
    if dtypes <= {torch.float32, torch.float64}:
        return {"rtol": 1e-4, "atol": 1e-5}
    return {"rtol": 2e-2, "atol": 2e-2}


@contextlib.contextmanager
def quiet_progress_bars():
    """transformers' progress bars ("Loading weights", "Writing model shards") off inside, as they were after:
    a bar per load or save is noise in a notebook's output."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()

