"""A benchmark's results file: ``--out`` says only where it goes, and a failed write never loses the runs.

``benchmarks/_common.write_results`` takes the provenance (what the file measures) from the benchmark's
own name and the path from ``out``; whatever makes the write fail, the runs land on disk first. No
training here: the runs are made up."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _common  # noqa: E402  (benchmarks/_common.py)
from experiments import EXPERIMENTS  # noqa: E402

RUNS = [{"method": "grpo", "seed": 11, "final_acc": 0.25}, {"method": "sdpo", "seed": 11, "final_acc": 0.5}]


@pytest.fixture
def quick(monkeypatch, tmp_path):
    """write_results without the slow or tree-dependent parts: a clean tree, a fixed machine, no replay, and
    unsaved runs under tmp_path (never in the repository's benchmarks/results/unsaved/)."""
    monkeypatch.setattr(_common, "require_clean_tree", lambda: None)
    monkeypatch.setattr(_common, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(_common, "machine_info", lambda: {"arch": "x86_64", "cores": 2})
    monkeypatch.setattr(_common, "fingerprint_of", lambda stem, name: {"commit": "abc1234", "replays": {}})
    monkeypatch.setattr(_common, "UNSAVED", tmp_path / "unsaved")
    monkeypatch.setattr(sys, "argv", [str(ROOT / "benchmarks" / "bench_sdpo_lab.py"), "--out", "out/r.json"])
    return tmp_path


def unsaved(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("unsaved-*.json"))]


def test_out_takes_any_file_name_and_the_name_gives_the_provenance(quick, monkeypatch):
    """The run from the issue, ``bench_sdpo_lab.py ... --out out/r.json``: written to out/r.json from the
    current directory, measuring what sdpo_lab measures (the out file's stem 'r' names nothing)."""
    monkeypatch.chdir(quick)
    path = _common.write_results("sdpo_lab", config={"seeds": [11]}, runs=RUNS, summary={"n": 2},
                                 out="out/r.json", extra={"lr": {"grpo": 1e-5}})
    assert path == quick / "out" / "r.json"
    res = json.loads(path.read_text())
    assert res["benchmark"] == "sdpo_lab" and res["commit"] == "abc1234" and res["runs"] == RUNS
    assert {"sdpo_kit/sdpo", "configs/sdpo_lab.yaml", "benchmarks/_common.py"} <= set(res["measures"])
    assert res["lr"] == {"grpo": 1e-5} and list(res)[:6] == ["benchmark", "command", "date", "commit", "measures",
                                                               "machine"]
    assert res["command"].endswith("--out out/r.json")
    assert not (quick / "out" / "r.json.part").exists() and not unsaved(quick / "unsaved")


def test_results_path():
    """Default: benchmarks/results/<name>.json; a bare file name lands there too (the commands recorded in
    today's results files, ``--out sdpo_lab_ablations.json``); an absolute path as given; any other
    relative path from the current directory."""
    assert _common.results_path("sdpo_lab") == _common.RESULTS / "sdpo_lab.json"
    assert _common.results_path("sdpo_lab", "sdpo_lab_ablations.json") == _common.RESULTS / "sdpo_lab_ablations.json"
    assert _common.results_path("sdpo_lab", "/tmp/x/r.json") == Path("/tmp/x/r.json")
    assert _common.results_path("sdpo_lab", "out/r.json") == Path.cwd() / "out" / "r.json"


@pytest.mark.parametrize("failure", ["dirty tree", "bad path", "unknown name", "unwritable value"])
def test_a_failed_write_keeps_the_runs(quick, monkeypatch, capsys, failure):
    """Whatever makes the write fail, the error is raised and the runs are on disk first, where the
    loud message says."""
    name, out, runs = "sdpo_lab", quick / "r.json", RUNS
    if failure == "dirty tree":
        def dirty():
            raise _common.DirtyTree("uncommitted changes")
        monkeypatch.setattr(_common, "require_clean_tree", dirty)
    elif failure == "bad path":
        (quick / "a_file").write_text("")
        out = quick / "a_file" / "r.json"          # a folder that is a file
    elif failure == "unknown name":
        name = "r"
    else:
        runs = [*RUNS, {"method": "grpo", "weights": object()}]   # json cannot write it
    with pytest.raises((_common.DirtyTree, OSError, KeyError, TypeError)):
        _common.write_results(name, config={"seeds": [11]}, runs=runs, summary={"n": 2}, out=out)
    saved = unsaved(quick / "unsaved")
    assert len(saved) == 1 and saved[0]["runs"][:2] == RUNS and saved[0]["summary"] == {"n": 2}
    assert saved[0]["benchmark"] == name and saved[0]["error"]
    err = capsys.readouterr().err
    assert "COULD NOT WRITE THE RESULTS" in err and str(quick / "unsaved") in err


def test_the_runs_go_to_the_temporary_folder_when_unsaved_is_unwritable(quick, monkeypatch, capsys):
    """When benchmarks/results/unsaved/ cannot be written either, the system's temporary folder takes the runs."""
    (quick / "blocked").write_text("")
    monkeypatch.setattr(_common, "UNSAVED", quick / "blocked" / "unsaved")
    (quick / "tmp").mkdir()
    monkeypatch.setattr(_common.tempfile, "gettempdir", lambda: str(quick / "tmp"))
    with pytest.raises(KeyError):
        _common.write_results("r", config={}, runs=RUNS, summary={})
    assert unsaved(quick / "tmp")[0]["runs"] == RUNS
    assert str(quick / "tmp") in capsys.readouterr().err


def test_every_benchmark_with_out_names_itself():
    """Each bench_*.py that takes ``--out`` passes its own name to write_results and ``out=args.out``, so the
    provenance never comes from the out file's name (the 35-minute run that died on ``--out out/r.json``)."""
    checked = 0
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        text = script.read_text()
        if '"--out"' not in text and "add_runner_args(" not in text:
            continue
        calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", None) == "write_results"]
        assert calls, script.name
        for call in calls:
            assert isinstance(call.args[0], ast.Constant), f"{script.name}: write_results' name is not a literal"
            assert any(call.args[0].value.startswith(k) for k in EXPERIMENTS), script.name
            assert any(k.arg == "out" and ast.unparse(k.value) == "args.out" for k in call.keywords), script.name
        checked += 1
    assert checked >= 6


def test_a_benchmark_checks_the_tree_once_its_arguments_are_read(monkeypatch):
    """``_common.parse_args``: the arguments, then the clean-tree check (before any training); ``--help``
    answers on any tree. Every benchmark script reads its arguments through it (no check on import)."""
    import argparse

    calls = []
    monkeypatch.setattr(_common, "require_clean_tree", lambda: calls.append("checked"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    assert _common.parse_args(ap, ["--seeds", "1", "2"]).seeds == [1, 2] and calls == ["checked"]
    with pytest.raises(SystemExit):
        _common.parse_args(ap, ["--help"])
    assert calls == ["checked"]
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        text = script.read_text()
        if "write_results(" in text:
            assert "parse_args(ap" in text and "ap.parse_args(" not in text, script.name
