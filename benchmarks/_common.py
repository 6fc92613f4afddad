"""Shared helpers for the benchmark scripts: run a config in-process, print tables, save results.

Every script writes ``benchmarks/results/<name>.json``: the command that made it, the date, the
machine, the git commit, the config, the raw per-run figures and the summary. ``report.py``
renders the README's tables from those files, so every number in the README comes from one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
            f"python {sys.version.split()[0]}, torch threads {torch.get_num_threads()}")


def machine_info() -> dict:
    import transformers
    import trl

    return {"arch": platform.machine(), "cores": os.cpu_count(), "python": sys.version.split()[0],
            "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("+changes" if dirty else "")


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


def command() -> str:
    """How this script was run, as one would type it from the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    return " ".join(["python", str(script), *sys.argv[1:]])


def write_results(name: str, *, config: dict, runs: list, summary: dict) -> Path:
    """``benchmarks/results/<name>.json`` with everything a reader needs to trust the numbers."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "command": command(), "date": dt.date.today().isoformat(),
               "commit": git_commit(), "machine": machine_info(), "config": config, "runs": runs,
               "summary": summary}
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")
    return path


def run_config(path: str, overrides: dict) -> dict:
    """Train ``path`` with dotted-key ``overrides`` in this process; the CLI's summary dict."""
    from sdpo_kit.cli import train
    from sdpo_kit.registry import load_config

    cfg = load_config(ROOT / path, overrides)
    return train(cfg, config_path=path)
