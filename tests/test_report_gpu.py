"""reports/gpu.py: what has run on a GPU, read from the lease folders' reports and logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
from reports import gpu as report_gpu  # noqa: E402


def _report(checks: list[dict]) -> dict:
    return {"date": "2026-11-28 01:10:00", "device": "NVIDIA H100 80GB HBM3", "checks": checks,
            "passed": sum(c["outcome"] == "passed" for c in checks),
            "failed": sum(c["outcome"] == "failed" for c in checks)}


def test_a_stage_without_its_report_is_counted_from_its_log_and_says_so(tmp_path):
    lease = tmp_path / "2026-11-28-h100"
    lease.mkdir()
    (lease / "run.json").write_text(json.dumps({"kind": "full", "commit": "abc1234"}))
    (lease / "gpu_check_base.json").write_text(json.dumps({**_report([
        {"check": "test_a.py::t1", "outcome": "passed"}, {"check": "test_a.py::t2", "outcome": "failed"},
        {"check": "test_a.py::t3", "outcome": "unfinished"}]), "unfinished": 1}))
    (lease / "gpu_check_real.log").write_text("bringing up nodes...\n\n.......F.s   [100%]Traceback (most recent\n")
    (run,) = report_gpu.gpu_runs(tmp_path)
    assert run["stages"] == [("base", 1, 3), ("real (from its log)", 8, 9)]   # the unfinished one ran
    assert run["nb00"] is None


def test_log_counts_reads_every_progress_line_and_nothing_else(tmp_path):
    log = tmp_path / "gpu_check_real.log"
    log.write_text("warning: ...\n" + "." * 60 + "F" * 2 + "  [ 80%]\n" + "s.E [100%]\nsome text. [99%]\n")
    assert report_gpu.log_counts(log) == (61, 64)
    log.write_text("no progress here\n")
    assert report_gpu.log_counts(log) is None


def test_nb00_run_reads_the_steps_accuracy_and_whether_it_ended(tmp_path):
    log = tmp_path / "nb00_gpu.log"
    log.write_text("step    0/16  eval acc 0.110\nstep   16/16  reward 0.3  eval acc 0.420\n"
                   "held-out accuracy: before 0.110 -> after 0.420 (+0.310)\n")
    assert report_gpu.nb00_run(log) == {"step": 16, "steps": 16, "before": 0.11, "after": 0.42, "finished": False}
    log.write_text(log.read_text() + "notebook 00, full size, GPU path: 41.0 s\n")
    assert report_gpu.nb00_run(log)["finished"] is True
