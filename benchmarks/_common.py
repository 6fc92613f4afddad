"""Shared helpers for the benchmark scripts: run a config in-process, print tables."""

from __future__ import annotations

import os
import platform
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
            f"python {sys.version.split()[0]}, torch threads {torch.get_num_threads()}")


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def table(headers: list[str], rows: list[list]) -> str:
    """A GitHub-markdown table."""
    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def run_config(path: str, overrides: dict) -> dict:
    """Train ``path`` with dotted-key ``overrides`` in this process; the CLI's summary dict."""
    from sdpo_kit.cli import train
    from sdpo_kit.config import load_config

    cfg = load_config(ROOT / path, overrides)
    return train(cfg, config_path=path)
