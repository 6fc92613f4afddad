"""Small helpers every part of the library shares.

* ``eval_mode(model)``: a context manager that puts a model in eval mode (no dropout) and
  gives it back in the mode it came in, whatever happens inside.
* ``seed_everything(seed)``: Python's ``random``, NumPy's and torch's generators in one call.

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
