"""Experiment trackers for the scratch loops: ``report_to`` as TRL names it, written with each library's own API.

    report_to    "none" (default), "tensorboard", "trackio", "wandb", or a list of them
    tensorboard  ``torch.utils.tensorboard.SummaryWriter`` in ``output_dir/runs/<time>_<host>/``
                 (transformers' default folder, so ``tensorboard --logdir OUTPUT_DIR/runs`` opens
                 either backend's runs); one scalar per metric key per step
    trackio      ``trackio.init(project=$TRACKIO_PROJECT or "huggingface", name=...)``, ``trackio.log``;
                 local by default (``trackio show`` opens it), a Space with ``$TRACKIO_SPACE_ID``
    wandb        ``wandb.init(project=$WANDB_PROJECT or "huggingface", dir=output_dir)``, ``run.log``;
                 wandb's own settings decide where it goes (``WANDB_MODE=offline``: no network,
                 ``wandb sync OUTPUT_DIR/wandb/offline-run-*`` uploads later)

The TRL backend hands ``report_to`` to TRL, whose transformers callbacks write TRL's own names
(``train/reward``, ``train/loss``, ... at TRL's global step, which counts the num_iterations
passes); here the rows carry sdpo_kit's names (``reward/mean``, ``loss``, ``metrics.METRICS``) at
sdpo_kit's step. A tracker only reads the rows: a run's numbers are the same with or without one.

Left out on purpose: comet, mlflow and the rest of transformers' list (pass a callback that
forwards rows), completions tables inside the trackers (``completions.jsonl`` holds them).
"""

from __future__ import annotations

import math
import numbers
import os
import socket
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

REPORT_TO = ("none", "tensorboard", "trackio", "wandb")
DEFAULT_PROJECT = "huggingface"  # transformers' default project for trackio and wandb
INSTALL = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}


def check_report_to(report_to) -> list[str]:
    """The trackers ``report_to`` names, as a list without "none"; ValueError on an unknown name."""
    if report_to is None:
        return []
    names = [report_to] if isinstance(report_to, str) else list(report_to)
    unknown = [n for n in names if n not in REPORT_TO]
    if unknown:
        raise ValueError(f"report_to must be one of {REPORT_TO} or a list of them, got {report_to!r}")
    return [n for n in names if n != "none"]


def tensorboard_dir(output_dir=None) -> Path:
    """``output_dir/runs/<Mon01_12-00-00>_<host>``: transformers' (and PyTorch's) default log folder."""
    stamp = datetime.now().strftime("%b%d_%H-%M-%S")
    return Path(output_dir or ".") / "runs" / f"{stamp}_{socket.gethostname()}"


def scalars(row: Mapping) -> dict[str, float]:
    """The finite numbers of a metrics row, ``step`` left out (it is the x axis)."""
    out = {}
    for key, value in row.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, numbers.Real):
            continue
        if math.isfinite(float(value)):
            out[key] = float(value)
    return out


def _need(name: str):
    import importlib

    try:
        return importlib.import_module("torch.utils.tensorboard" if name == "tensorboard" else name)
    except ImportError as e:
        raise ImportError(f"report_to={name!r} needs the {INSTALL[name]} package: pip install {INSTALL[name]} "
                          f"(or pip install 'sdpo_kit[trackers]')") from e


class Trackers:
    """The rows of a scratch run, to every tracker ``report_to`` names.

    ``start()`` opens them (the libraries are imported only then), calling the object with a row
    logs its numbers at ``row["step"]``, ``close()`` flushes and finishes. With ``report_to="none"``
    every call returns at once.
    """

    def __init__(self, report_to="none", output_dir=None, config: Mapping | None = None, run_name: str | None = None):
        self.names = check_report_to(report_to)
        self.output_dir, self.config = output_dir, dict(config or {})
        self.run_name = run_name or (Path(output_dir).name if output_dir else None)
        self.writer = self.trackio = self.wandb_run = None
        self.log_dir: Path | None = None

    def start(self) -> None:
        if not self.names or self.writer or self.trackio or self.wandb_run:
            return
        if "tensorboard" in self.names:
            self.log_dir = tensorboard_dir(self.output_dir)
            self.writer = _need("tensorboard").SummaryWriter(log_dir=str(self.log_dir))
        if "trackio" in self.names:
            self.trackio = _need("trackio")
            self.trackio.init(project=os.environ.get("TRACKIO_PROJECT", DEFAULT_PROJECT), name=self.run_name,
                              space_id=os.environ.get("TRACKIO_SPACE_ID"), config=self.config)
        if "wandb" in self.names:
            wandb = _need("wandb")
            if self.output_dir:
                Path(self.output_dir).mkdir(parents=True, exist_ok=True)
            self.wandb_run = wandb.init(project=os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT), name=self.run_name,
                                        dir=str(self.output_dir) if self.output_dir else None, config=self.config)

    def __call__(self, row: Mapping) -> None:
        if not self.names:
            return
        values, step = scalars(row), int(row.get("step", 0))
        if not values:
            return
        if self.writer is not None:
            for key, value in values.items():
                self.writer.add_scalar(key, value, step)
        if self.trackio is not None:
            self.trackio.log(values, step=step)
        if self.wandb_run is not None:
            self.wandb_run.log(values, step=step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.trackio is not None:
            self.trackio.finish()
            self.trackio = None
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None
