"""Which process this is when a launcher (``torchrun``, ``accelerate launch``) starts several: read from the
environment the launcher sets, so it costs nothing and imports nothing in a single process.

    world_size() -> int      WORLD_SIZE, 1 without a launcher
    rank() -> int            RANK, 0 without a launcher
    is_main() -> bool        rank 0: the one process that writes the run's files, prints and evaluates

The TRL backend trains on every process (Accelerate wraps the model in DDP, each rank samples its share of
the step's batch); sdpo_kit's own files (config.yaml, run_info.json, metrics.jsonl, completions.jsonl, the
plot, model/) come from the main process only, and held-out evaluation runs there once. The scratch loops
are one process by design.
"""

from __future__ import annotations

import os


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def is_main() -> bool:
    return rank() == 0
