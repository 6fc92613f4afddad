"""Every notebook exercise ships as a stub whose check fails, and passes with the reference answer.

Each notebook is executed once in smoke mode with ``SDPO_KIT_SOLUTIONS=1`` (every check passes on
the reference answers, as under nbmake), then, in the same kernel, each exercise's stub cell
(tag ``exercise``) is run again with the solutions switched off and its check cell (tag
``exercise-check``) must raise. The reference is put back before the next exercise.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def exercise_pairs(nb) -> list[tuple[int, int]]:
    """(stub cell index, check cell index): each ``exercise`` cell and the next ``exercise-check``."""
    pairs, stub = [], None
    for i, cell in enumerate(nb.cells):
        if "exercise" in tags(cell):
            stub = i
        elif "exercise-check" in tags(cell):
            assert stub is not None, f"check cell {i} has no exercise cell before it"
            pairs.append((stub, i))
            stub = None
    return pairs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercise_checks_fail_on_their_stubs(path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    pairs = exercise_pairs(nb)
    assert len(pairs) >= 2, f"{path.name}: every notebook closes with exercises (tagged exercise / exercise-check)"
    for k, v in {"SDPO_KIT_SMOKE": "1", "SDPO_KIT_SOLUTIONS": "1", "MPLBACKEND": "Agg"}.items():
        monkeypatch.setenv(k, v)
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})

    def run(source: str) -> None:  # a scratch cell, appended for the call (nbclient writes outputs into nb)
        nb.cells.append(nbformat.v4.new_code_cell(source))
        try:
            client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
        finally:
            nb.cells.pop()

    with client.setup_kernel(env=dict(os.environ)):
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)  # the whole notebook on the reference answers
        for stub, check in pairs:
            run("import os; os.environ['SDPO_KIT_SOLUTIONS'] = '0'")
            client.execute_cell(nb.cells[stub], stub)
            with pytest.raises(CellExecutionError):
                client.execute_cell(nb.cells[check], check)
            run("import os; os.environ['SDPO_KIT_SOLUTIONS'] = '1'")
            client.execute_cell(nb.cells[stub], stub)
            client.execute_cell(nb.cells[check], check)  # and the reference passes again
