"""Behaviour fingerprints (``benchmarks/fingerprint.py``): every results file carries one, a replay is
deterministic, a change of behaviour moves it and a comment does not, and the comparison's tolerance
is for rounding only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tools")]   # reports/, benchmarks/, tools/
import bench_check  # noqa: E402  (tools/bench_check.py: make bench-check)
import fingerprint  # noqa: E402  (benchmarks/fingerprint.py)

from reports.render import MAKERS  # noqa: E402

RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))


def test_every_results_file_and_benchmark_has_a_fingerprint_of_known_replays():
    """Each results file and each benchmark report.MAKERS knows is declared in FINGERPRINTS, with
    replays or digests that exist, and every replay's config is in the repository."""
    stems = {p.stem for p in RESULTS} | set(MAKERS)
    assert not stems - set(fingerprint.FINGERPRINTS), sorted(stems - set(fingerprint.FINGERPRINTS))
    for stem, names in fingerprint.FINGERPRINTS.items():
        assert names and all(n in fingerprint.REPLAYS or n in fingerprint.DIGESTS for n in names), stem
    for name, spec in fingerprint.REPLAYS.items():
        assert (ROOT / spec["config"]).exists(), name
    assert fingerprint.needed(["demo", "speed", "fresh_clone"]) == ["ci", "demo"]   # each once, digests first


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_results_files_carry_their_fingerprint(path):
    """A results file carries the replays FINGERPRINTS names for it, taken at a commit."""
    fp = json.loads(path.read_text()).get("fingerprint")
    assert fp and fp.get("commit") and set(fp["replays"]) == set(fingerprint.FINGERPRINTS[path.stem])


def test_differs_names_the_first_value_beyond_the_tolerance():
    was = {"steps": [{"loss": 0.5, "reward/mean": 0.25}], "after": 0.3, "weights": [10.0, 3.0]}
    assert fingerprint.differs(json.loads(json.dumps(was)), was) is None
    assert fingerprint.differs({**was, "weights": [10.0 + 1e-5, 3.0]}, was) is None      # rounding
    assert fingerprint.differs({**was, "weights": [10.01, 3.0]}, was) == "weights[0]: 10.01, was 10"
    assert fingerprint.differs({**was, "steps": []}, was) == "steps: 0 entries, was 1"
    assert fingerprint.differs({**was, "steps": [{"loss": 0.5}]}, was).startswith("steps[0]: ['reward/mean']")
    assert fingerprint.differs({**was, "after": None}, was) == "after: None, was 0.3"
    assert fingerprint.differs({"sha256": "abc"}, {"sha256": "abd"}) == "sha256: abc, was abd"


def test_a_digest_ignores_comments_and_docstrings_and_sees_code(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    src = '"""Doc."""\nX = 1  # one\n'
    (tmp_path / "pkg" / "a.py").write_text(src)
    (tmp_path / "Makefile").write_text("# a comment\ntest:\n\tpytest\n")
    (tmp_path / "pkg" / "out.yaml").write_text("a run's output: not tracked\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "pkg/a.py", "Makefile"], cwd=tmp_path, check=True)
    monkeypatch.setitem(fingerprint.DIGESTS, "t", ["pkg", "Makefile"])
    base = fingerprint.digest("t", tmp_path)
    assert base["files"] == 2
    (tmp_path / "pkg" / "a.py").write_text(src.replace("Doc.", "Longer doc.").replace("# one", "# uno"))
    (tmp_path / "Makefile").write_text("# another comment\n\ntest:\n\tpytest\n")
    assert fingerprint.digest("t", tmp_path) == base
    (tmp_path / "pkg" / "a.py").write_text(src.replace("X = 1", "X = 2"))
    assert fingerprint.digest("t", tmp_path) != base


def test_a_replay_is_deterministic_and_a_changed_behaviour_moves_it(monkeypatch):
    """Two replays of one config in two processes agree exactly; the same config with another learning
    rate (what a changed default would do) differs, and differs says where. (Short: 2 steps, a 20-step
    warm start.)"""
    monkeypatch.setitem(fingerprint.REPLAYS, "t", dict(config="configs/demo.yaml", steps=2))
    monkeypatch.setitem(fingerprint.REPLAYS, "t_lr", dict(config="configs/demo.yaml", steps=2,
                                                          set={"trainer.learning_rate": 1e-3}))
    monkeypatch.setattr(fingerprint, "WARM_START", {"sft_steps": 20, "context_steps": 5, "copy_steps": 5})
    one = fingerprint.child(["t", "t_lr"], ROOT)
    two = fingerprint.child(["t"], ROOT)
    assert "error" not in one["t"] and [r["step"] for r in one["t"]["steps"]] == [1, 2]
    assert fingerprint.differs(two["t"], one["t"]) is None and two["t"] == one["t"]
    where = fingerprint.differs(one["t_lr"], one["t"])
    assert where and where.startswith(("steps[0].stats/learning_rate", "steps[", "weights"))


def test_check_names_each_results_file_whose_replay_moved(tmp_path, monkeypatch, capsys):
    """make bench-check: exit 1 naming the results file whose replay moved (and where), not the one that
    matches; a results file without a fingerprint is named too; exit 0 once all match. What it replayed
    is recorded (last_check.json) for the pages' Stale notes, and the pages are rendered from it."""
    replay = {"steps": [{"step": 1, "loss": 0.5}], "before": 0.1, "after": 0.2, "weights": [3.0, 4.0]}
    for stem, fp in (("demo", {"demo": replay}), ("vapor", {"vapor": {**replay, "after": 0.3}})):
        (tmp_path / f"{stem}.json").write_text(json.dumps({"benchmark": stem, "fingerprint": {"commit": "abc",
                                                                                              "replays": fp}}))
    monkeypatch.setattr(bench_check, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_check, "LAST_CHECK", tmp_path / "check" / "last_check.json")
    asked = []
    monkeypatch.setattr(bench_check, "run_child", lambda names, *a, **k: asked.append(names) or
                        {"demo": replay, "vapor": replay})
    assert bench_check.check() == 1 and asked == [["demo", "vapor"]]
    out = capsys.readouterr().out
    assert "vapor.json: vapor.after: 0.2, was 0.3" in out and "demo.json:" not in out
    assert "1 of 2 results files replay as measured" in out
    recorded = json.loads((tmp_path / "check" / "last_check.json").read_text())
    assert recorded["replays"]["vapor"] == replay and list(recorded["moved"]) == ["vapor"]
    (tmp_path / "vapor.json").write_text(json.dumps({"benchmark": "vapor", "fingerprint": {"commit": "abc",
                                                                                            "replays": {"vapor": replay}}}))
    rendered = []   # make bench-check renders the pages from the record it wrote (their Stale notes follow it)
    assert bench_check.check(render=rendered.append) == 0 and rendered == [[]]
    (tmp_path / "lab.json").write_text(json.dumps({"benchmark": "lab"}))
    assert bench_check.check() == 1 and "lab.json: no fingerprint" in capsys.readouterr().out


def test_a_replay_that_differs_is_rebased_on_its_own_commit_replayed_here(tmp_path, monkeypatch, capsys):
    """Another CPU rounds differently: a replay that differs from its fingerprint is compared with the
    fingerprint's own commit replayed on this machine. Same there as now: not moved (the machine, not the code),
    and the pages say nothing; different there too: moved. The references are recorded (``rebased``)."""
    import contextlib

    from reports import staleness

    here = {"steps": [{"step": 1, "loss": 0.25}], "before": 0.1, "after": 0.2, "weights": [3.0, 4.0]}
    elsewhere = {**here, "steps": [{"step": 1, "loss": 0.26}]}           # the fingerprint's machine rounded otherwise
    for stem, commit in (("demo", "c0de"), ("speed", "0ld")):
        (tmp_path / f"{stem}.json").write_text(json.dumps({"benchmark": stem, "fingerprint": {
            "commit": commit, "replays": {"demo": elsewhere}}}))
    monkeypatch.setattr(bench_check, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_check, "LAST_CHECK", tmp_path / "check" / "last_check.json")
    trees = []

    @contextlib.contextmanager
    def worktree(commit):
        trees.append(commit)
        yield tmp_path / commit

    monkeypatch.setattr(bench_check, "worktree", worktree)
    # replayed here: at HEAD as now; at c0de the same (unchanged code); at 0ld otherwise (the code changed since)
    monkeypatch.setattr(bench_check, "run_child", lambda names, root=None, **k: {"demo": {
        None: here, tmp_path / "c0de": here, tmp_path / "0ld": {**here, "after": 0.5}}[root]})
    assert bench_check.check() == 1 and sorted(trees) == ["0ld", "c0de"]
    out = capsys.readouterr().out
    assert "speed.json: demo.after: 0.2, was 0.5" in out and "demo.json:" not in out
    recorded = json.loads((tmp_path / "check" / "last_check.json").read_text())
    assert set(recorded["rebased"]) == {"c0de", "0ld"} and list(recorded["moved"]) == ["speed"]
    demo, speed = (json.loads((tmp_path / f"{s}.json").read_text()) for s in ("demo", "speed"))
    assert staleness.moved(demo, recorded) is None and "demo.after" in staleness.moved(speed, recorded)
    assert "demo.steps[0].loss" in staleness.moved(demo, {**recorded, "rebased": {}})   # without it: the machine
