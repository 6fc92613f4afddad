"""benchmarks/runner.py, the one runner of a benchmark's training runs: records in the order of the specs
(in this process or on spawned ones), each finished run journaled, and a resumed invocation that makes only
the runs its journal lacks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import runner  # noqa: E402  (benchmarks/runner.py)


def square(spec):
    """A stand-in training run (module level: spawned processes import it)."""
    name, x = spec
    return {"name": name, "value": x * x}


def test_runs_come_back_in_spec_order_whether_in_one_process_or_several():
    specs = [("a", 3), ("b", 1), ("c", 2)]
    shown = []
    assert runner.run_all(square, specs, show=shown.append) == [square(s) for s in specs]
    assert [r["name"] for r in shown] == ["a", "b", "c"]
    assert runner.run_all(square, specs, jobs=2) == [square(s) for s in specs]


def test_a_resumed_invocation_makes_only_the_runs_its_journal_lacks(tmp_path):
    journal = tmp_path / "x.runs.jsonl"
    specs = [("a", 1), ("b", 2), ("c", 3)]
    runner.run_all(square, specs[:2], journal=journal)            # cut short after two runs
    with journal.open("a") as f:
        f.write('{"spec": ["c", 3], "run": {"na')                 # and a third half written when it died
    made = []

    def counted(spec):
        made.append(spec)
        return square(spec)

    assert runner.run_all(counted, specs, journal=journal) == [square(s) for s in specs]
    assert made == [("c", 3)]
    lines = [json.loads(line) for line in journal.read_text().splitlines()[-1:]]
    assert lines == [{"spec": ["c", 3], "run": {"name": "c", "value": 9}}]


def test_a_fresh_invocation_starts_its_journal_empty_and_resume_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "UNSAVED", tmp_path)
    path = runner.journal_path("bench", resume=False)
    runner.run_all(square, [("a", 1)], journal=path)
    assert runner.journal_path("bench", resume=True).exists()
    assert not runner.journal_path("bench", resume=False).exists()


def test_run_py_lists_every_declared_results_file_and_refuses_an_unknown_one(capsys, monkeypatch):
    import pytest
    import run
    from experiments import EXPERIMENTS

    assert run.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in EXPERIMENTS)
    with pytest.raises(SystemExit, match="not declared"):
        run.main(["demo", "no_such_file"])
    with pytest.raises(SystemExit, match="one NAME at a time"):
        run.main(["vapor", "sdpo", "--seeds", "0"])
    called = []
    monkeypatch.setattr(run.subprocess, "call", lambda argv: called.append(argv[1:]) or 0)
    assert run.main(["vapor", "sdpo"]) == 0     # a script experiment runs its declared command
    assert [a[0].endswith("bench_vapor.py") for a in called] == [True, False] and called[1][0].endswith("bench_sdpo.py")
