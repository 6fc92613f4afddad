"""The docs site shows each notebook with the outputs of its full-size CPU run: bench_notebooks.py keeps the
executed copy with a first cell naming the run, and docs/hooks.py renders the page from it when it exists,
from the committed (output-free) notebook otherwise."""

import importlib.util
import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def load_hooks():
    pytest.importorskip("mkdocs")   # the docs extra (make docs installs it)
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def test_a_page_is_rendered_from_the_executed_copy_when_there_is_one(tmp_path, monkeypatch):
    """With an executed copy of a notebook, its page's source is the copy; without, the notebook itself."""
    hooks = load_hooks()
    monkeypatch.setattr(hooks, "EXECUTED", tmp_path)
    nb = hooks.notebooks()[0]
    assert hooks.notebook_source(nb) == hooks.ROOT
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / nb.name).write_text("{}")
    assert hooks.notebook_source(nb) == tmp_path


def test_the_executed_copy_keeps_outputs_and_names_its_run(tmp_path):
    """run_notebook(keep=...) writes the notebook with its outputs and the banner first, without the cell
    that reads RESULTS back; the RESULTS dict still comes back."""
    import bench_notebooks

    src = tmp_path / "01_x.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 01 x"),
                                         nbformat.v4.new_code_cell("RESULTS = {'acc': 0.5}\nprint('hello')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, src)
    keep = tmp_path / "executed" / "01_x.ipynb"
    seconds, results = bench_notebooks.run_notebook(src, keep, bench_notebooks.executed_banner("abc1234", "2026-01-01"))
    assert results == {"acc": 0.5} and seconds > 0
    cells = nbformat.read(keep, as_version=4).cells
    assert cells[0].cell_type == "markdown" and "`abc1234`" in cells[0].source
    assert [c.cell_type for c in cells] == ["markdown", "markdown", "code"]
    assert "hello" in "".join(o.get("text", "") for o in cells[2].outputs)
    assert json.loads(src.read_text())["cells"][1]["outputs"] == []   # the source notebook is left as it was
