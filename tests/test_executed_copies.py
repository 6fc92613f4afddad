"""The docs site shows today's notebooks: each notebook has an executed copy (``make executed``) whose code and
markdown are the notebook's own, whose first cell names the run, and whose outputs a page can show.

A notebook whose code changed without its copy made again fails here, so the copy is refreshed with the notebook
(``reports/render.py`` gives a copy whose code is unchanged its notebook's prose). The values of rendered
numbers (``<!--f:...-->value<!--/f-->``, rewritten by ``reports/render.py`` when a results file changes) are
left out of the comparison; everything else must be equal. The outputs: no cell
prints more than 20,000 characters, none shows a machine path, no widget output is kept (a page cannot run
it), and a notebook that trains under a dashboard or draws an explorer shows a plain image.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]   # reports/ (a package at the root) and benchmarks/
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXECUTED = ROOT / "benchmarks" / "results" / "executed" / "notebooks"
FIELD_VALUE = re.compile(r"(<!--f:[\w-]+\.\w+-->).*?(<!--/f-->)", re.S)


def comparable(cell) -> tuple[str, str]:
    return cell.cell_type, FIELD_VALUE.sub(r"\1\2", cell.source)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_executed_copy_is_the_notebook_with_its_outputs(path):
    copy = EXECUTED / path.name
    assert copy.exists(), f"no executed copy of {path.name}: run `make executed`"
    nb, ex = nbformat.read(path, as_version=4), nbformat.read(copy, as_version=4)
    assert ex.cells[0].cell_type == "markdown" and re.search(r"at commit `[0-9a-f]{7,}`", ex.cells[0].source), \
        "the copy's first cell names the commit it ran at"
    mine, theirs = [comparable(c) for c in nb.cells], [comparable(c) for c in ex.cells[1:]]
    differ = [i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b]
    assert len(mine) == len(theirs) and not differ, (
        f"{path.name} differs from its executed copy (cells {differ[:5] or 'count'}): run `make executed`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_page_can_show_the_outputs(path):
    import bench_notebooks

    copy = EXECUTED / path.name
    if not copy.exists():
        pytest.skip("no executed copy (the test above fails)")
    ex = nbformat.read(copy, as_version=4)
    assert bench_notebooks.output_problems(ex) == []
    outputs = [o for c in ex.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if bench_notebooks.WIDGET in o.get("data", {})], "a widget output was kept"
    assert not [o for o in outputs if o.get("output_type") == "error"], "a cell failed in the executed copy"
    code = "".join(c.source for c in ex.cells if c.cell_type == "code")
    if "Dashboard(" in code or "explore(" in code:
        assert any("image/png" in o.get("data", {}) for o in outputs), "the dashboard / explorer left no image"


def test_the_output_checks_can_fail():
    """A long print, a temporary folder's path and a home folder are each found."""
    import bench_notebooks

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", name="stdout", text="a" * 20_001)]),
        nbformat.v4.new_code_cell("y", outputs=[nbformat.v4.new_output("stream", name="stderr",
                                                                      text="wrote /tmp/tmpab12/model\n")]),
        nbformat.v4.new_code_cell("z", outputs=[nbformat.v4.new_output("execute_result",
                                                                      data={"text/plain": "'/home/me/x.png'"})]),
        nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                      text="wrote runs/first_run/model 0.5/1.0\n")]),
    ])
    problems = bench_notebooks.output_problems(nb)
    assert [p.split(" ")[1] for p in problems] == ["0", "1", "2"], problems


def test_a_copy_takes_its_notebook_s_prose_only_while_its_code_is_the_notebook_s():
    """Markdown follows the notebook; outputs stay; a code cell that differs leaves the copy alone (it must run
    again)."""
    from reports.executed import with_notebook_prose

    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    ran = code("print(1)", outputs=[nbformat.v4.new_output("stream", name="stdout", text="1\n")])
    copy = nbformat.v4.new_notebook(cells=[md("Executed at commit `abc1234`"), md("old prose"), ran])
    notebook = nbformat.v4.new_notebook(cells=[md("new prose"), code("print(1)")])
    synced = with_notebook_prose(copy, notebook)
    assert [c["source"] for c in synced["cells"]] == ["Executed at commit `abc1234`", "new prose", "print(1)"]
    assert synced["cells"][2]["outputs"] == ran["outputs"] and copy["cells"][1]["source"] == "old prose"
    assert with_notebook_prose(copy, nbformat.v4.new_notebook(cells=[md("new prose"), code("print(2)")])) is None
    assert with_notebook_prose(copy, nbformat.v4.new_notebook(cells=[md("new prose")])) is None
