"""The README's numbers and the notebooks' reference figures are what benchmarks/results/ says.

``benchmarks/report.py`` renders every block between ``<!-- report:NAME -->`` markers from the
results files the benchmark scripts write; a hand-edited number, or a results file committed
without re-rendering, fails here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402  (benchmarks/report.py)


@pytest.mark.parametrize("path", report.targets(), ids=lambda p: p.name)
def test_rendered_blocks_match_the_results(path):
    old, new = report.render_file(path)
    assert old == new, f"{path.name} is out of date: run python benchmarks/report.py"


def test_every_readme_block_has_its_results():
    """No README block waits for a benchmark that was never run. The fresh-clone block is the
    exception: it times CI on a committed HEAD, so the commit it measures cannot contain it yet."""
    blocks = report.BLOCK.findall((ROOT / "README.md").read_text())
    assert len(blocks) >= 8
    waiting = [name for _, name, body, _ in blocks if "(not measured yet" in body and name != "fresh-clone"]
    assert not waiting, f"run the benchmarks these blocks name, then benchmarks/report.py: {waiting}"


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
