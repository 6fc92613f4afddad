"""The code reward's report block, on a made-up results file in bench_code_reward.py's shape: the
throughput table, the goal sentence, the isolation, the provenance; "not measured yet" without it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
from reports import render as report  # noqa: E402  (reports/render.py)


def results() -> dict:
    runs = [{"batch": kind, "mode": mode, "workers": w, "repeat": 0, "seconds": 1.0, "test_runs": n,
             "runs_per_s": float(n), "statuses": ["passed"]}
            for kind, n in (("trivial", 200), ("timeout", 2), ("mixed", 201))
            for mode, w in (("pool", 2), ("one at a time", 1))]
    summary = {f"{kind}_{key}_{mode}": v for kind, (pool, one) in
               {"trivial": ((61.5, 3.25), (33.0, 6.06)), "timeout": ((1.3, 1.54), (0.9, 2.2)),
                "mixed": ((55.0, 3.65), (30.0, 6.7))}.items()
               for key, (p, o) in zip(("runs_per_s", "seconds"), zip(pool, one))
               for mode, v in (("pool", p), ("one_at_a_time", o))}
    summary.update(trivial_speedup=61.5 / 33.0, loop_delay_s_pool=0.4, timeout_s=1.0, loop_wall_limit_s=1.5)
    return {"command": "python benchmarks/bench_code_reward.py", "date": "2026-11-24", "commit": "abc",
            "machine": {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"},
            "config": {"programs": 50, "tests": 4, "timeout_s": 1.0, "workers": 2, "repeats": 3,
                       "isolation": {"user": "nobody", "network": "netns", "landlock_abi": 7,
                                     "packages": "landlock+mounts", "disk": "tmpfs 64 MiB"}},
            "runs": runs, "summary": summary}


def test_the_code_reward_block_renders_the_results_file(tmp_path, monkeypatch):
    """Every batch's row (test runs, both modes' runs/s and seconds), the headline numbers and
    the isolation come from the file; a missing file names the command that makes it."""
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    empty = "<!-- report:code-reward -->\n<!-- /report:code-reward -->"
    assert "(not measured yet: `python benchmarks/bench_code_reward.py`)" in report.render_text(empty)
    (tmp_path / "code_reward.json").write_text(json.dumps(results()))
    out = report.render_text(empty)
    assert "| trivial (add one) | 200 | 61.5 | 33.0 | 3.25 | 6.06 |" in out
    assert "| loops until the time limit | 2 | 1.3 | 0.9 | 1.54 | 2.20 |" in out
    assert "| trivial + one loop | 201 | 55.0 | 30.0 | 3.65 | 6.70 |" in out
    assert "**61.5** trivial test runs a second, 1.86x one at a time" in out and "**0.40 s**" in out
    assert "limit is 1.5 s" in out and "packages landlock+mounts" in out and "tmpfs" not in out
    assert "commit `abc`" in out
