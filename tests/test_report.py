"""The numbers of the README, the docs pages and the notebooks are what benchmarks/results/ says.

``reports/render.py`` renders every block between ``<!-- report:NAME -->`` markers from the
results files the benchmark scripts write; a hand-edited number, or a results file committed
without re-rendering, fails here."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
from reports import format as report_format  # noqa: E402
from reports import pins as report_pins  # noqa: E402
from reports import render as report  # noqa: E402  (reports/render.py)
from reports import staleness  # noqa: E402  (reports/staleness.py)
from reports.staleness import (  # noqa: E402
    STALE_NOTE,
    git,
    moved,
    provenance_problems,
    python_code,
    shallow,
    stale_note,
    stale_reasons,
)


@pytest.mark.parametrize("path", report.targets(), ids=lambda p: p.name)
def test_rendered_blocks_match_the_results(path):
    """The committed text is what report.py renders now (stale notes included: they are a function of HEAD).
    A shallow clone lacks the results' commits, so it cannot tell stale from fresh: there the notes are
    left out of the comparison and everything else is compared."""
    old, new = report.render_file(path)
    if shallow():
        old, new = STALE_NOTE.sub("", old), STALE_NOTE.sub("", new)
    assert old == new, f"{path.name} is out of date: run python reports/render.py"


def test_every_readme_and_benchmarks_page_block_has_its_results():
    """No block of the README (its headline results) or of docs/benchmarks.md (every benchmark) waits for a
    benchmark that was never run. The fresh-clone block is the exception: it times CI on a committed HEAD, so
    the commit it measures cannot contain it yet."""
    readme = report.BLOCK.findall((ROOT / "README.md").read_text())
    page = report.BLOCK.findall((ROOT / "docs" / "benchmarks.md").read_text())
    assert len(readme) >= 3 and len(page) >= 8
    waiting = [name for _, name, body, _ in readme + page if "(not measured yet" in body and name != "fresh-clone"]
    assert not waiting, f"run the benchmarks these blocks name, then reports/render.py: {waiting}"


def test_every_results_file_is_shown_somewhere():
    """Each results file is rendered, by a block or a field, on at least one page report.py keeps up to date:
    a benchmark whose numbers no page shows is a benchmark nobody reads."""
    shown = set()
    for path in report.targets():
        text = path.read_text()
        shown |= {report.BLOCKS[name][0] for _, name, _, _ in report.BLOCK.findall(text) if name in report.BLOCKS}
        shown |= {report.FIELDS[name][0] for _, name, _, _, _ in report.FIELD.findall(text) if name in report.FIELDS}
    unshown = sorted(p.stem for p in report.RESULTS.glob("*.json") if p.stem not in shown)
    assert not unshown, f"add a block or a field for these results to docs/benchmarks.md: {unshown}"


def test_a_block_renders_from_its_results_file_only(tmp_path, monkeypatch):
    """A hand-typed number between markers is replaced by the results file's."""
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    (tmp_path / "lab.json").write_text(
        '{"command": "python benchmarks/bench_lab.py", "date": "2026-01-01", "commit": "abc", '
        '"machine": {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"}, '
        '"runs": [{"copy_steps": 0, "warm_start_s": 14.7, "heldout_acc": 0.49, "acc_right_hint": 0.41, '
        '"acc_random_hint": 0.115}], "summary": {}}')
    out = report.render_text("x\n<!-- report:lab -->\n| made up | 9.99 |\n<!-- /report:lab -->\ny")
    assert "9.99" not in out and "0.490" in out and "0.115" in out and "commit `abc`" in out
    assert report.render_text("<!-- report:speed -->\n<!-- /report:speed -->").count("not measured yet") == 1


def test_a_docstring_edit_is_not_a_code_change():
    """``python_code`` ignores docstrings and comments and nothing else: a changed docstring or comment
    is the same code, a changed constant, name or statement is not (so the staleness check still fails)."""
    base = '"""Module."""\nX = 1  # one\n\ndef f(a):\n    """Doc."""\n    return a + X\n'
    assert python_code(base) == python_code(base.replace("Module.", "The module.").replace("# one", "# uno")
                                            .replace("Doc.", "Longer doc."))
    for edit in (("X = 1", "X = 2"), ("a + X", "a - X"), ("def f(a)", "def g(a)"),
                 ('    """Doc."""\n', '    """Doc."""\n    print(a)\n')):
        assert python_code(base) != python_code(base.replace(*edit)), edit
    assert python_code("def (:") is None


def test_a_results_file_measures_the_benchmark_modules_its_script_ran(monkeypatch):
    """The skill lab's benchmark runs lab.py's training code: its results name that file too."""
    import _common
    import lab  # noqa: F401  (imported by bench_sdpo_lab.py)

    monkeypatch.setattr(sys, "argv", [str(ROOT / "benchmarks" / "bench_sdpo_lab.py")])
    measured = _common.measures("sdpo_lab_room")
    assert {"benchmarks/bench_sdpo_lab.py", "benchmarks/lab.py", "sdpo_kit/sdpo", "configs/sdpo_lab.yaml"} <= set(measured)
    assert all((ROOT / f).exists() for f in measured), measured
    assert not any(f.startswith("benchmarks/") and "torch" in f for f in measured)


@pytest.mark.skipif(shallow(), reason="a shallow clone lacks the history the check reads")
@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks" / "results").glob("*.json")), ids=lambda p: p.stem)
def test_results_have_sound_provenance(path):
    """Every results file names its measured files and a clean commit of this repository. (Stale is
    allowed: its blocks say so and make bench-stale re-measures it.)"""
    problems = provenance_problems(json.loads(path.read_text()))
    assert not problems, "rerun the benchmark from a clean commit:\n" + "\n".join(problems)


REPLAY = {"steps": [{"step": 1, "loss": 0.25, "reward/mean": 0.5}], "before": 0.2, "after": 0.3, "weights": [1.5, 2.0]}


def test_the_staleness_check_can_fail(monkeypatch):
    """A result whose replay at the last check differs from its fingerprint is stale, and its rendered
    provenance line names where; one that matches (within the tolerance) is fresh, with no note; one
    without a fingerprint is stale; a replay the check did not run, or a check older than the fingerprint,
    says nothing. One from a dirty tree,
    naming nothing, naming no commit or an unknown one has no sound provenance."""
    head = git("rev-parse", "--short", "HEAD").stdout.strip()
    fresh = {"benchmark": "x", "commit": head, "measures": ["sdpo_kit"],
             "fingerprint": {"commit": head, "replays": {"demo": REPLAY}}}
    moved_loss = {**REPLAY, "steps": [{**REPLAY["steps"][0], "loss": 0.26}]}
    check = {"commit": "abc1234", "replays": {"demo": moved_loss}}
    monkeypatch.setattr(staleness, "last_check", lambda: check)
    assert moved(fresh) == "its replay differs at `abc1234` (demo.steps[0].loss: 0.26, was 0.25)"
    assert stale_reasons(fresh) == ["x: its replay differs at `abc1234` (demo.steps[0].loss: 0.26, was 0.25)"]
    machine = {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"}
    line = report_format.provenance({**fresh, "command": "c", "date": "d", "machine": machine})
    assert "**Stale**: its replay differs at `abc1234` (demo.steps[0].loss" in line and STALE_NOTE.search(line)
    check["replays"]["demo"] = {**REPLAY, "weights": [1.5 * (1 + 1e-6), 2.0]}   # another CPU's rounding
    assert moved(fresh) is None and stale_note(fresh) == "" and stale_reasons(fresh) == []
    assert not STALE_NOTE.search(report_format.provenance({**fresh, "command": "c", "date": "d", "machine": machine}))
    check["replays"] = {"sdpo": REPLAY}
    assert moved(fresh) is None
    assert moved({k: v for k, v in fresh.items() if k != "fingerprint"}) == "it carries no behaviour fingerprint"
    check["replays"] = {"demo": {"error": "KeyError: 'trainer.top_k'"}}
    assert moved(fresh) == "its replay `demo` fails at `abc1234`"
    first = git("rev-list", "--max-parents=0", "HEAD").stdout.split()[0][:7]
    check.update(commit=first, replays={"demo": moved_loss})   # a check older than the fingerprint says nothing
    assert moved(fresh) is None
    assert moved({**fresh, "fingerprint": {"commit": first, "replays": {"demo": REPLAY}}}).startswith(
        f"its replay differs at `{first}`")
    assert not provenance_problems(fresh)
    for bad in ({"commit": head + "+dirty:abc", "measures": ["sdpo_kit"]}, {"commit": head, "measures": []},
                {"measures": ["sdpo_kit"]}, {"commit": "0000000", "measures": ["sdpo_kit"]},
                {"commit": head, "measures": ["sdpo_kit"], "runs": [{"commit": head + "+changes:abc"}]}):
        assert provenance_problems({"benchmark": "x", **bad}), bad


def test_check_lists_stale_results_and_fails_only_on_what_make_test_fails_on(tmp_path, monkeypatch, capsys):
    """report.py --check with a stale results file: listed, exit 0 (make test passes on staleness alone);
    with a results file from a dirty tree: exit 1; --stale lists the stale file alone, exit 0."""
    head = git("rev-parse", "--short", "HEAD").stdout.strip()
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "targets", lambda: [])
    monkeypatch.setattr(staleness, "last_check", lambda: {"commit": "abc1234", "replays": {"demo": REPLAY}})
    fp = {"commit": head, "replays": {"demo": {**REPLAY, "after": 0.4}}}
    (tmp_path / "old.json").write_text(json.dumps({"benchmark": "old", "commit": head, "measures": ["sdpo_kit"],
                                                   "fingerprint": fp}))
    assert report.main(["--check"]) == 0
    out = capsys.readouterr().out
    assert f"old.json: measured at {head}; its replay differs at `abc1234` (demo.after: 0.3, was 0.4)" in out
    assert "up to date" in out
    assert report.main(["--stale"]) == 0 and capsys.readouterr().out.startswith(f"old.json: measured at {head}")
    (tmp_path / "dirty.json").write_text(json.dumps({"benchmark": "dirty", "commit": head + "+dirty:abc",
                                                     "measures": ["sdpo_kit"], "fingerprint": fp}))
    assert report.main(["--check"]) == 1
    assert "dirty.json: made from a tree with uncommitted changes" in capsys.readouterr().out


def test_install_pins_are_the_files_pins(tmp_path):
    """docs/install.md's pins are fields read from pyproject.toml and constraints.txt: another pin
    there renders another version (and the committed page matches: test_rendered_blocks_match_the_results)."""
    text = (ROOT / "docs" / "install.md").read_text()
    for key in ("colab_unsloth", "colab_trl", "colab_transformers", "torch", "trl", "transformers", "dep_trl"):
        assert f"<!--f:pins.{key}-->" in text, key
    assert "<!-- report:install-pip -->" in text
    (tmp_path / "pyproject.toml").write_text(re.sub(r'"unsloth==[^"]+"', '"unsloth==2099.1.1"',
                                                    (ROOT / "pyproject.toml").read_text()))
    (tmp_path / "constraints.txt").write_text("# pins\ntorch==9.9.9  # a comment\ndatasets>=4.8,<4.9\n")
    pins = report_pins.pins_fields(tmp_path)
    assert pins["colab_unsloth"] == "2099.1.1" and pins["torch"] == "9.9.9" and pins["datasets"] == ">=4.8,<4.9"
    assert "pip install torch==9.9.9 " in report_pins.install_pip(tmp_path)
    ours = report_pins.pins_fields()
    assert f'"unsloth=={ours["colab_unsloth"]}"' in (ROOT / "pyproject.toml").read_text()
    assert f"\ntorch=={ours['torch']}\n" in (ROOT / "constraints.txt").read_text()
    with pytest.raises(ValueError):
        report_pins.exact(">=1.15,<1.17")


def test_a_results_file_names_its_cpu_where_it_recorded_one(monkeypatch):
    """Machines differ in speed and rounding: the provenance line names the CPU a results file recorded
    (``_common.machine_info``), and a file from before says what it said."""
    import _common

    monkeypatch.setattr(staleness, "last_check", lambda: {})
    machine = {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"}
    res = {"benchmark": "x", "stem": "not_declared", "command": "c", "date": "d", "commit": "abc1234"}
    assert "(x86_64, 2 cores, torch" in report_format.provenance({**res, "machine": machine})
    line = report_format.provenance({**res, "machine": {**machine, "cpu": "AMD EPYC, family 26"}})
    assert "(x86_64, AMD EPYC, family 26, 2 cores, torch 2.13.0" in line
    assert _common.machine_info()["cpu"] == _common.cpu_name()
