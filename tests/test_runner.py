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


def test_a_journal_is_resumed_only_by_the_same_command_at_the_same_commit(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setattr(runner, "UNSAVED", tmp_path)
    monkeypatch.setattr(runner, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(runner, "command", lambda: "python benchmarks/bench_x.py --seeds 0 --resume")
    runner.run_all(square, [("a", 1)], journal=runner.journal_path("bench", resume=False))
    assert runner.read_journal(runner.journal_path("bench", resume=True)) == {'["a", 1]': square(("a", 1))}
    monkeypatch.setattr(runner, "git_commit", lambda: "def5678")   # a commit since: its runs are other code's
    with pytest.raises(SystemExit, match="abc1234"):
        runner.journal_path("bench", resume=True)
    assert runner.read_journal(runner.journal_path("bench", resume=False)) == {}   # a fresh start empties it


def square_or_fail(spec):
    if spec[0] == "bad":
        raise ValueError("this run fails")
    return square(spec)


def test_a_failed_run_on_a_worker_loses_none_of_the_others(tmp_path):
    import pytest

    journal = tmp_path / "x.runs.jsonl"
    specs = [("a", 1), ("bad", 2), ("c", 3), ("d", 4)]
    with pytest.raises(RuntimeError, match="1 of 4 runs failed"):
        runner.run_all(square_or_fail, specs, jobs=2, journal=journal)
    assert set(runner.read_journal(journal)) == {'["a", 1]', '["c", 3]', '["d", 4]'}


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


def test_the_vapor_benchmark_runs_its_variants_through_the_runner(monkeypatch, tmp_path):
    """bench_vapor.py's part 1 is specs for ``runner.run_all`` (seed-major, each variant, the start's margin in
    each), ``--jobs`` and ``--resume`` reach it, ``--out`` reaches the results file; training stood in for."""
    import bench_vapor

    seen, written = {}, {}
    margin = {"margin": -0.5, "accuracy": 0.25, "pairs": 4}
    monkeypatch.setattr("sdpo_kit.models.load_policy", lambda *a, **k: (None, None))
    monkeypatch.setattr(bench_vapor, "heldout_margin", lambda *a: margin)
    monkeypatch.setattr(bench_vapor, "journal_path", lambda name, resume: seen.setdefault("journal", (name, resume)))
    monkeypatch.setattr(bench_vapor, "run_all", lambda run, specs, jobs, journal, show: seen.update(specs=specs, jobs=jobs)
                        or [{"variant": v, "seed": s, "acc_after": 0.5, "margin_after": 0.1, "pref_acc_after": 0.5,
                             "acc_before": 0.2, "wall_s": 1.0} for v, s, *_ in specs])
    monkeypatch.setattr(bench_vapor, "train", lambda data, over: {"history": [{"step": k, "time/step_s": 0.1}
                                                                               for k in range(1, 9)]})
    monkeypatch.setattr(bench_vapor, "write_results", lambda name, **kw: written.update(kw))
    monkeypatch.setattr(sys.modules["_common"], "require_clean_tree", lambda: None)
    monkeypatch.setattr(sys, "argv", ["bench_vapor.py", "--seeds", "0", "1", "--steps", "2", "--jobs", "2", "--resume",
                                      "--out", str(tmp_path / "v.json")])
    bench_vapor.main()
    assert seen["specs"] == [(v, s, 2, -0.5, 0.25) for s in (0, 1) for v in bench_vapor.VARIANTS]
    assert seen["jobs"] == 2 and seen["journal"] == ("v", True) and written["out"] == str(tmp_path / "v.json")
