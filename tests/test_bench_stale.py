"""``make bench-stale`` plans the right runs: exactly the stale results files, each command once, in order.

Only the planning is tested (``tools/bench_stale.py``'s ``plan`` and its dry run): running the
benchmarks takes hours and is what the target is for."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
sys.path.insert(0, str(ROOT / "tools"))
import bench_stale  # noqa: E402  (tools/bench_stale.py)
from experiments import script_path  # noqa: E402

from reports.render import MAKERS  # noqa: E402
from reports.staleness import Finding  # noqa: E402


def test_plan_runs_each_command_once_in_order():
    """Two stale files one command makes: one step naming both, at the place of the first; the order is
    ORDER's whatever order the names come in; a file no command makes is refused before anything runs."""
    makers = {"a": "bench_a.py", "b": "bench_b.py --out b.json", "c": "bench_a.py", "d": "bench_d.py"}
    steps = bench_stale.plan(["d", "c", "b", "a", "a"], makers=makers, order=["a", "b", "c", "d"])
    assert [(s.command, s.results) for s in steps] == [("bench_a.py", ["a", "c"]), ("bench_b.py --out b.json", ["b"]),
                                                       ("bench_d.py", ["d"])]
    assert bench_stale.plan(["d"], makers=makers, order=["a", "b", "c", "d"])[0].results == ["d"]
    assert bench_stale.plan([], makers=makers, order=["a"]) == []
    with pytest.raises(ValueError, match="'e'"):
        bench_stale.plan(["a", "e"], makers=makers, order=["a", "b", "c", "d", "e"])
    with pytest.raises(ValueError, match="'d'"):
        bench_stale.plan(["d"], makers=makers, order=["a", "b", "c"])


def test_the_order_covers_every_results_file_and_readers_come_after_what_they_read():
    """ORDER names every results file MAKERS makes, once; a benchmark that reads another's results runs
    after it; fresh_clone (CI timed on a clone of HEAD) is last; every command's script exists."""
    assert sorted(bench_stale.ORDER) == sorted(MAKERS) and len(set(bench_stale.ORDER)) == len(bench_stale.ORDER)
    for reader, reads in bench_stale.READS.items():
        assert all(bench_stale.ORDER.index(r) < bench_stale.ORDER.index(reader) for r in reads), reader
    assert bench_stale.ORDER[-1] == "fresh_clone"
    for command in MAKERS.values():
        assert (ROOT / script_path(command)).is_file(), command
    results = {p.stem for p in (ROOT / "benchmarks" / "results").glob("*.json")}
    assert results <= set(MAKERS), results - set(MAKERS)


def test_plan_with_the_real_commands():
    """sdpo_lab before the signal benchmark that reads its learning rate, fresh_clone last, and the command
    as MAKERS has it, run as ``python benchmarks/<script> <args>`` (or ``tools/...``) from the worktree's root."""
    steps = bench_stale.plan(["fresh_clone", "sdpo_lab_signal_1000", "sdpo_lab", "demo_top_k50", "demo"])
    assert [s.results for s in steps] == [["demo"], ["demo_top_k50"], ["sdpo_lab"], ["sdpo_lab_signal_1000"],
                                          ["fresh_clone"]]
    argv = steps[3].argv("python")
    assert argv[:2] == ["python", "benchmarks/bench_sdpo_lab_signal.py"] and argv[-2:] == ["--out",
                                                                                           "sdpo_lab_signal_1000.json"]
    assert steps[4].argv("python") == ["python", "tools/bench_fresh_clone.py"]   # a tool, from its own folder


def test_dry_run_prints_the_plan_and_runs_nothing(monkeypatch, capsys):
    """--dry-run: the stale files, why each is stale and the commands, in order; no worktree, no benchmark."""
    findings = [Finding("sdpo_lab_signal", ["abc1234"], [], "its replay differs at `def5678` (sdpo_lab.weights[0])"),
                Finding("sdpo_lab", ["abc1234"], [], "its replay differs at `def5678` (sdpo_lab.steps[0].loss: 1, was 2)")]
    monkeypatch.setattr(bench_stale, "scan", lambda results: findings)
    monkeypatch.setattr(bench_stale, "missing", lambda results: [])

    def no_runs(*args, **kwargs):
        raise AssertionError("a dry run ran something")
    monkeypatch.setattr(bench_stale, "run", no_runs)
    assert bench_stale.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    first = out.index("1. python benchmarks/bench_sdpo_lab.py\n")
    second = out.index("2. python benchmarks/bench_sdpo_lab_signal.py")
    assert first < out.index("sdpo_lab.json: measured at abc1234; its replay differs at `def5678` (sdpo_lab.steps[0].loss") < second
    assert "2 results files to measure with 2 commands" in out
    assert bench_stale.main(["--dry-run", "--only", "sdpo_lab"]) == 0
    assert "bench_sdpo_lab_signal" not in capsys.readouterr().out
    monkeypatch.setattr(bench_stale, "scan", lambda results: [])
    monkeypatch.setattr(bench_stale, "missing", lambda results: [])
    assert bench_stale.main([]) == 0 and "nothing stale" in capsys.readouterr().out


def test_results_not_measured_yet_are_planned_too(monkeypatch, capsys, tmp_path):
    """A results file ORDER names and the results folder lacks is measured like a stale one, in ORDER's
    place, and the plan says it is new; --only takes names with or without .json."""
    (tmp_path / "a.json").write_text("{}")
    assert bench_stale.missing(tmp_path, order=["a", "b", "c"]) == ["b", "c"]
    monkeypatch.setattr(bench_stale, "scan", lambda results: [])
    monkeypatch.setattr(bench_stale, "missing", lambda results: ["real_tasks", "demo_plateau"])
    monkeypatch.setattr(bench_stale, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    assert bench_stale.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.index("bench_demo_plateau.py") < out.index("bench_real.py tasks"), out
    assert "real_tasks.json: not measured yet" in out and "2 results files to measure" in out
    assert bench_stale.main(["--dry-run", "--only", "real_tasks.json"]) == 0
    assert "bench_demo_plateau" not in capsys.readouterr().out


def test_the_executed_notebooks_a_step_wrote_are_copied_back(monkeypatch, tmp_path):
    """What a step wrote under the worktree's benchmarks/results/executed/ comes back here; older files stay."""
    tree, here = tmp_path / "tree", tmp_path / "here"
    executed = tree / "benchmarks" / "results" / "executed" / "notebooks"
    executed.mkdir(parents=True)
    (executed / "old.ipynb").write_text("old")
    import os
    os.utime(executed / "old.ipynb", (1, 1))
    (executed / "01.ipynb").write_text("new")
    monkeypatch.setattr(bench_stale, "RESULTS", here)
    assert bench_stale.copy_executed(tree, since=100.0) == 1
    assert (here / "executed" / "notebooks" / "01.ipynb").read_text() == "new"
    assert not (here / "executed" / "notebooks" / "old.ipynb").exists()


def test_the_make_target_runs_the_script():
    """``make bench-stale`` runs bench_stale.py, with --dry-run when DRY is set."""
    make = (ROOT / "Makefile").read_text()
    assert "\nbench-stale:" in make and "tools/bench_stale.py $(if $(DRY),--dry-run)" in make


def test_force_adds_results_files_that_are_not_stale(monkeypatch, capsys):
    """--force NAME: measured too, stale or not (a change the last check has not replayed yet)."""
    monkeypatch.setattr(bench_stale, "scan", lambda results: [])
    monkeypatch.setattr(bench_stale, "missing", lambda results: [])
    assert bench_stale.main(["--dry-run", "--force", "notebooks_smoke.json", "demo"]) == 0
    out = capsys.readouterr().out
    assert "2 results files to measure with 2 commands" in out and "notebooks_smoke.json: asked for" in out
    assert out.index("run.py demo") < out.index("bench_notebooks.py")
