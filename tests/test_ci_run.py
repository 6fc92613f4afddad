"""``.ci/run``, with a stand-in ``make`` on the PATH (the real legs take half an hour): every leg runs and
prints its time in the form ``tools/bench_fresh_clone.py`` reads, the verl leg beside the export and docs
legs, and a leg that fails fails CI, the background one included."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import bench_fresh_clone  # noqa: E402  (tools/bench_fresh_clone.py)

# a `make` that logs each start and end (with the time) to $LOG and exits with $FAIL_<LEG> when that is set
FAKE_MAKE = """#!/usr/bin/env bash
leg="${@: -1}"
echo "start $leg $(date +%s%3N)" >> "$LOG"
echo "running $leg"
sleep "$(case $leg in test-verl) echo 1.5;; test-export) echo 0.8;; *) echo 0.1;; esac)"
var="FAIL_${leg//-/_}"
if [ -n "${!var:-}" ]; then echo "end $leg failed" >> "$LOG"; exit "${!var}"; fi
echo "end $leg $(date +%s%3N)" >> "$LOG"
"""


@pytest.fixture
def ci(tmp_path):
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(FAKE_MAKE)
    (bin_dir / "make").chmod(0o755)
    log = tmp_path / "make.log"

    def run(**fail):
        log.write_text("")
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log),
               **{f"FAIL_{k}": str(v) for k, v in fail.items()}}
        proc = subprocess.run(["bash", ".ci/run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        return proc, log
    return run


def test_every_leg_runs_and_prints_its_time_as_the_benchmark_reads_it(ci):
    proc, log_file = ci()
    assert proc.returncode == 0, proc.stderr
    log = log_file.read_text().splitlines()
    legs = re.findall(r"^leg (\S+)", (ROOT / ".ci" / "run").read_text(), flags=re.M)
    assert legs == ["test", "test-real", "test-verl", "test-export", "docs"]
    printed = dict(bench_fresh_clone.LEG.findall(proc.stdout))
    assert set(printed) == set(legs) and float(printed["test-verl"]) >= 1.5, printed
    times = {line.split()[1]: int(line.split()[2]) for line in log if line.startswith("end ")}
    starts = {line.split()[1]: int(line.split()[2]) for line in log if line.startswith("start ")}
    assert starts["test-real"] >= times["test"] and starts["test-verl"] >= times["test-real"]   # one after another
    assert starts["test-export"] < times["test-verl"], "the verl leg runs beside the export leg"
    assert proc.stdout.index("ci leg docs") < proc.stdout.index("verl leg's output")   # its output after theirs


@pytest.mark.parametrize("leg, code", [("test_verl", 3), ("test_export", 4), ("test_real", 5)])
def test_a_failed_leg_fails_ci(ci, leg, code):
    proc, log_file = ci(**{leg: code})
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    if leg == "test_real":
        assert "test-verl" not in log_file.read_text(), "nothing runs after a failed leg"
    if leg == "test_export":   # the background verl leg is stopped, not left running to its end
        time.sleep(1.5)
        assert "start test-verl" in log_file.read_text() and "end test-verl" not in log_file.read_text()
