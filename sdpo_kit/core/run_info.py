"""A run folder that tells its state: ``RUN_DIR/run_info.json``, and the checkpoint a run continues from.

    RunInfo(output_dir, command, config_path)    writes run_info.json with status "running"
      .finished(summary) / .failed(error)         rewrites it; failed also writes traceback.txt
    resume_checkpoint(path) -> Path               a checkpoint-N folder, or a run folder's newest one

``run_info.json`` holds::

    status        running | finished | failed
    error         "RewardError: reward function 'larger' returned 3 values for 4 completions" (failed only)
    traceback     the file the whole traceback went to (failed only): RUN_DIR/traceback.txt
    command       what started the run: the sdpo-kit command line, or sdpo_kit.train('CONFIG')
    config_path   the config as given (a preset's name, a path, <dict>); RUN_DIR/config.yaml is what ran
    version       sdpo_kit's version; commit: the checkout's git commit (None outside a checkout)
    started, ended  ISO 8601 times, UTC (ended: None while running)
    resumed_from  the checkpoint a resumed run continued from (None otherwise)
    steps, before, after  the last step and the held-out accuracies (finished only)

A run killed from outside (the machine went down) stays "running": the status is written when the run
starts and again when it ends, never guessed.
"""

from __future__ import annotations

import json
import subprocess
import traceback
from datetime import datetime, timezone
from pathlib import Path

from sdpo_kit.core.checkpoint import CHECKPOINT_RE, list_checkpoints

FILE, TRACEBACK_FILE = "run_info.json", "traceback.txt"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def checkout_commit() -> str | None:
    """The git commit of the checkout sdpo_kit is imported from, or None (an installed wheel, no git)."""
    here = Path(__file__).resolve().parents[2]
    if not (here / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def package_version() -> str | None:
    """sdpo_kit's installed version (its package metadata), or None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sdpo_kit")
    except PackageNotFoundError:
        return None


def one_line(error: BaseException) -> str:
    """``Type: message`` on one line (a message's own line breaks become spaces)."""
    return " ".join(f"{type(error).__name__}: {error}".split())


class RunInfo:
    """``output_dir/run_info.json``, written at the start and at the end of a run (module docstring)."""

    def __init__(self, output_dir, command: str, config_path: str, resumed_from: str | None = None):
        self.path = Path(output_dir) / FILE
        self.data = {"status": "running", "command": command, "config_path": config_path, "version": package_version(),
                     "commit": checkout_commit(), "started": now(), "ended": None,
                     "resumed_from": str(resumed_from) if resumed_from else None}
        (self.path.parent / TRACEBACK_FILE).unlink(missing_ok=True)   # a failed earlier run's
        self.write()

    def write(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1) + "\n")

    def finished(self, summary: dict) -> None:
        steps = [r["step"] for r in summary.get("history", ()) if "step" in r]
        self.data.update(status="finished", ended=now(), steps=max(steps, default=0),
                         before=summary.get("before"), after=summary.get("after"))
        self.write()

    def failed(self, error: BaseException) -> Path:
        """Marks the run failed with ``error``; the traceback goes to traceback.txt, whose path it returns."""
        tb = self.path.parent / TRACEBACK_FILE
        tb.write_text("".join(traceback.format_exception(error)))
        self.data.update(status="failed", error=one_line(error), traceback=str(tb), ended=now())
        self.write()
        return tb


def resume_checkpoint(path) -> Path:
    """The checkpoint to continue from: ``path`` itself when it is a ``checkpoint-N`` folder, else the newest
    ``checkpoint-N`` in the run folder ``path``. A FileNotFoundError says what was found instead."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"--resume-from {path}: no such folder")
    if CHECKPOINT_RE.match(path.name):
        return path
    found = list_checkpoints(path)
    if not found:
        raise FileNotFoundError(f"--resume-from {path}: no checkpoint-N folder in it (a run keeps its last one "
                                "unless trainer.save_last is false)")
    return found[-1]
