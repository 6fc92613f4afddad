"""The one model cache make, the CLI, the notebooks and the tests share: the real model unpacked from its wheel,
the tiny lab's warm starts and reward models, llama.cpp's converter. A machine unpacks the model once.

    cache_dir() -> Path      $SDPO_KIT_CACHE, else $XDG_CACHE_HOME/sdpo_kit (default ~/.cache/sdpo_kit)
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$SDPO_KIT_CACHE`` when set, else the user's cache folder: ``$XDG_CACHE_HOME/sdpo_kit``, default
    ``~/.cache/sdpo_kit``."""
    root = os.environ.get("SDPO_KIT_CACHE")
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sdpo_kit"
    return Path(root)
