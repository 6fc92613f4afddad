"""Every notebook exercise ships as a stub whose check fails, and passes with the reference answer.

The nbmake run (``make test``) executes each notebook top to bottom with ``SDPO_KIT_SOLUTIONS=1``,
so every check cell passes on its reference answer there. What is left to prove is that each check
fails on the reader's stub, and that needs no second run of the notebook: each exercise cell
(tag ``exercise``) is run on its own with the solutions switched off, after the notebook's import
lines only, and

* every name it hands to ``solution(...)`` comes back as the stub itself: a function that raises
  ``NotImplementedError`` when called, or ``None`` for a value;
* the check cell that follows it (tag ``exercise-check``) uses one of those names, outside any
  ``try``, so executing the check on the stub raises;
* with the solutions on, ``solution`` hands back a different object (the reference answer).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import nbformat
import pytest

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


def import_lines(nb) -> str:
    """Every top-level import statement of the notebook's code cells (no other code runs)."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:   # a cell with IPython magics
            continue
        lines += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(dict.fromkeys(lines))


def solution_names(source: str) -> list[str]:
    """Names a cell assigns from ``solution(...)``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "solution"):
            out += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return out


def names_used_outside_try(source: str) -> set[str]:
    tree = ast.parse(source)
    guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for b in t.body for n in ast.walk(b)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in guarded}


def call_stub(fn):
    """Call a stub with placeholder arguments; it must raise NotImplementedError at once."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    fn(*[None] * len(params))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercise_checks_fail_on_their_stubs(path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    pairs = exercise_pairs(nb)
    assert len(pairs) >= 2, f"{path.name}: every notebook closes with exercises (tagged exercise / exercise-check)"
    header = import_lines(nb)
    for stub, check in pairs:
        where = f"{path.name} cell {stub}"
        names = solution_names(nb.cells[stub].source)
        assert names, f"{where}: an exercise hands its answer to solution(...)"
        used = names_used_outside_try(nb.cells[check].source)
        assert used & set(names), f"{path.name} cell {check}: the check uses none of {names}"

        monkeypatch.setenv("SDPO_KIT_SOLUTIONS", "0")
        ns: dict = {}
        exec(compile(header + "\n" + nb.cells[stub].source, where, "exec"), ns)
        for name in set(names) & used:
            value = ns[name]
            if callable(value):
                with pytest.raises(NotImplementedError):
                    call_stub(value)
            else:
                assert value is None, f"{where}: the stub value {name} should be None, got {value!r}"

        monkeypatch.setenv("SDPO_KIT_SOLUTIONS", "1")
        ref: dict = {}
        exec(compile(header + "\n" + nb.cells[stub].source, where, "exec"), ref)
        for name in names:
            assert ref[name] is not ns[name] and ref[name] is not None, f"{where}: no reference answer for {name}"
