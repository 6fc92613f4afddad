"""The executed copies' prose follows their notebooks: a copy (``benchmarks/results/executed/notebooks/``, made by
``bench_notebooks.py --full``) whose code cells are its notebook's, cell for cell, takes the notebook's markdown
cells as they are now. Its outputs stay those its code printed when it ran, at the commit its first cell names;
prose changes nothing a code cell runs. A copy whose code differs is left alone: it must run again
(``make executed``), and ``tests/test_executed_copies.py`` says so."""

from __future__ import annotations

import copy as _copy


def with_notebook_prose(executed: dict, notebook: dict) -> dict | None:
    """``executed`` (a notebook's JSON, its first cell the run's header) with each markdown cell replaced by
    ``notebook``'s; None when the two differ in a code cell's source or in which cells are code."""
    cells = executed["cells"][1:]
    if len(cells) != len(notebook["cells"]):
        return None
    for mine, theirs in zip(cells, notebook["cells"]):
        if mine["cell_type"] != theirs["cell_type"]:
            return None
        if mine["cell_type"] == "code" and "".join(mine["source"]) != "".join(theirs["source"]):
            return None
    out = _copy.deepcopy(executed)
    for mine, theirs in zip(out["cells"][1:], notebook["cells"]):
        if mine["cell_type"] == "markdown":
            mine["source"] = _copy.deepcopy(theirs["source"])
    return out
