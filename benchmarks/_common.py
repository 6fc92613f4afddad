"""Shared helpers for the benchmark scripts: run a config in-process, print tables, save results.

Every script writes ``benchmarks/results/<name>.json``: the command that made it, the date, the
machine, the git commit, the config, the raw per-run figures and the summary. ``report.py``
renders the README's tables from those files, so every number in the README comes from one.

Numbers come from clean commits: a script refuses to start, and ``write_results`` to write, while
``sdpo_kit/``, ``configs/``, ``benchmarks/`` (results aside) or ``notebooks/`` have uncommitted changes.
``--allow-dirty`` (any script) runs anyway and stamps the commit ``<sha>+dirty:<hash of the diff>``.
Each results file names the files it measures (``MEASURES``); ``tests/test_report.py`` fails when
one of them changed in a commit later than the one the results were made at.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import multiprocessing
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


# the code each benchmark measures (besides this file and its own script): a result is stale once
# any of these changes in a later commit (tests/test_report.py); rooms, not single files
CORE = ["sdpo_kit/core", "sdpo_kit/lab", "sdpo_kit/models.py", "sdpo_kit/registry.py", "sdpo_kit/cli.py",
        "sdpo_kit/rewards", "benchmarks/_common.py"]
MEASURES = {
    "demo": CORE + ["sdpo_kit/grpo", "configs/demo.yaml"],
    "speed": CORE + ["sdpo_kit/grpo", "configs/demo.yaml"],
    "lab": CORE + ["sdpo_kit/grpo", "configs/demo.yaml"],
    "vapor": CORE + ["sdpo_kit/grpo", "sdpo_kit/vapor", "configs/vapor.yaml"],
    "sdpo": CORE + ["sdpo_kit/grpo", "sdpo_kit/sdpo", "configs/sdpo.yaml", "configs/sdpo_feedback.yaml"],
    "sdpo_lab": CORE + ["sdpo_kit/grpo", "sdpo_kit/sdpo", "configs/sdpo_lab.yaml", "configs/sdpo_paper.yaml"],
    "ppo": CORE + ["sdpo_kit/ppo", "configs/teacher_student_ppo.yaml"],
    "export": CORE + ["sdpo_kit/grpo", "sdpo_kit/deploy", "configs/demo.yaml"],
    "notebooks": CORE + ["sdpo_kit", "notebooks", "configs"],
    "code_reward": ["sdpo_kit/rewards", "sdpo_kit/lab/code_task.py", "benchmarks/_common.py"],
    "code_lab": CORE + ["sdpo_kit/grpo", "sdpo_kit/sdpo", "configs/sdpo_code_lab.yaml"],
    "fresh_clone": ["Makefile", ".ci/run", "pyproject.toml", "constraints.txt", "constraints-verl.txt",
                    "tests/conftest.py"],
}
WATCHED = ["sdpo_kit", "configs", "benchmarks", "notebooks"]   # a dirty tree here refuses to write results

ALLOW_DIRTY = "--allow-dirty" in sys.argv
if ALLOW_DIRTY:  # taken out before the script's own argparse sees it
    sys.argv.remove("--allow-dirty")


class DirtyTree(RuntimeError):
    """Results asked for from a working tree whose measured code is not committed."""


def dirty_diff() -> str:
    """The uncommitted diff (tracked files and untracked, not ignored, ones) under ``WATCHED``,
    results files aside; "" for a clean tree."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout
    spec = [*WATCHED, ":(exclude)benchmarks/results"]
    untracked = git("ls-files", "--others", "--exclude-standard", "--", *spec)
    return git("diff", "HEAD", "--", *spec) + "".join(
        f"\nuntracked {f}\n" + (ROOT / f).read_text(errors="replace") for f in untracked.split())


def git_commit() -> str:
    """HEAD's short sha; ``+dirty:<sha256 of the diff, 12 hex>`` with --allow-dirty on a dirty tree."""
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    diff = dirty_diff()
    if not diff:
        return out.stdout.strip()
    return out.stdout.strip() + "+dirty:" + hashlib.sha256(diff.encode()).hexdigest()[:12]


def require_clean_tree() -> None:
    """DirtyTree (naming the files) unless the measured code is committed or --allow-dirty was given."""
    if ALLOW_DIRTY:
        return
    if dirty_diff():
        files = subprocess.run(["git", "status", "--porcelain", "--", *WATCHED, ":(exclude)benchmarks/results"],
                               cwd=ROOT, capture_output=True, text=True).stdout.rstrip()
        raise DirtyTree("uncommitted changes to the code a benchmark measures; commit them first (numbers come from "
                        "clean commits), or pass --allow-dirty to stamp the diff's hash into the results:\n" + files)


def _benchmark_file(path) -> str | None:
    """``path`` relative to the repository when it is a file under ``benchmarks/``, else None (a module
    whose ``__file__`` is not a real path, as some of torch's are, is none of ours)."""
    try:
        p = Path(path).resolve()
        rel = p.relative_to(ROOT).as_posix()
    except (TypeError, ValueError):
        return None
    return rel if rel.startswith("benchmarks/") and p.is_file() else None


def measures(name: str) -> list[str]:
    """The files a results file ``name`` measures: its room list (``MEASURES``), its script, and the
    benchmark modules the script imported (``bench_sdpo_lab_room.py`` runs ``bench_sdpo_lab.py``'s code)."""
    base = next((k for k in sorted(MEASURES, key=len, reverse=True) if name.startswith(k)), None)
    if base is None:
        raise KeyError(f"benchmark {name!r} names no measured files: add it to MEASURES in benchmarks/_common.py")
    files = [_benchmark_file(sys.argv[0])] + [_benchmark_file(getattr(m, "__file__", None))
                                              for m in list(sys.modules.values())]
    return sorted(set(MEASURES[base]) | {f for f in files if f})


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
    """``benchmarks/results/<name>.json`` with everything a reader needs to trust the numbers.

    Refuses (DirtyTree) while the measured code has uncommitted changes, unless --allow-dirty."""
    require_clean_tree()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "command": command() + (" --allow-dirty" if ALLOW_DIRTY else ""),
               "date": dt.date.today().isoformat(), "commit": git_commit(), "measures": measures(name),
               "machine": machine_info(), "config": config, "runs": runs, "summary": summary}
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")
    return path


def run_config(path: str, overrides: dict) -> dict:
    """Train ``path`` with dotted-key ``overrides`` in this process; the CLI's summary dict."""
    from sdpo_kit.cli import train
    from sdpo_kit.registry import load_config

    cfg = load_config(ROOT / path, overrides)
    return train(cfg, config_path=path)


if __name__ != "__main__" and Path(sys.argv[0]).name.startswith("bench_") and multiprocessing.current_process().name == "MainProcess":
    require_clean_tree()   # fail before an hour of training, not after it (once: not in a script's worker processes)
