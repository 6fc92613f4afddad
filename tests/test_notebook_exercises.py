"""Every notebook exercise ships as a stub the learner fills in, with a check that tells a wrong answer apart.

An exercise is a cell tagged ``exercise`` (the stub: a function that raises ``NotImplementedError``) and the
next cell tagged ``exercise-check``, which runs its checks inside ``course.checks.exercise(...)``: on a stub
the notebook prints "not written yet" and goes on, so "Run all" works before the learner has written a line.
The reference answers sit beside the notebooks, in ``notebooks/solutions/nbNN.py``; the stub cell's metadata
(``nbmake.post_cell_execute``) imports them into the notebook after the stub, so the nbmake run (``make test``,
with ``SDPO_KIT_SOLUTIONS=1``, under which a stub reaching a check is an error) runs every check on the
reference answer. What is left to prove needs no second run of the notebook: each stub cell is executed on its
own, after the notebook's import lines only, and

* the names it defines are the names its post-execute line imports, each a stub that raises
  ``NotImplementedError`` when called;
* the check cell uses one of those names, inside ``exercise(...)``;
* ``notebooks/solutions/nbNN.py`` defines each of them, as a different object.

"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


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


def names_used_outside_try(source: str) -> set[str]:
    tree = ast.parse(source)
    guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for b in t.body for n in ast.walk(b)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in guarded}


def call_stub(fn):
    """Call a stub with placeholder arguments; it must raise NotImplementedError at once."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    fn(*[None] * len(params))


def post_execute_names(cell) -> tuple[str, list[str]]:
    """(module, names) of a stub cell's ``from solutions.nbNN import a, b`` post-execute line."""
    lines = cell.get("metadata", {}).get("nbmake", {}).get("post_cell_execute", [])
    assert len(lines) == 1, f"one post-execute line importing the reference answers, got {lines}"
    tree = ast.parse(lines[0]).body[0]
    assert isinstance(tree, ast.ImportFrom) and tree.module.startswith("solutions.nb"), lines[0]
    return tree.module, [a.name for a in tree.names]


def check_new_layout(path, nb, pairs, header):
    import importlib.util

    number = path.name[:2]
    solutions = ROOT / "notebooks" / "solutions" / f"nb{number}.py"
    spec = importlib.util.spec_from_file_location(f"solutions_nb{number}", solutions)
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    for stub, check in pairs:
        where = f"{path.name} cell {stub}"
        module, names = post_execute_names(nb.cells[stub])
        assert module == f"solutions.nb{number}", f"{where}: imports from {module}"
        ns: dict = {}
        exec(compile(header + "\n" + nb.cells[stub].source, where, "exec"), ns)
        for name in names:
            with pytest.raises(NotImplementedError):
                call_stub(ns[name])
            assert callable(getattr(reference, name, None)) and getattr(reference, name) is not ns[name], \
                f"{solutions.name} has no reference answer {name}"
        source = nb.cells[check].source
        assert "with exercise(" in source, f"{path.name} cell {check}: the check runs inside exercise(...)"
        assert names_used_outside_try(source) & set(names), f"{path.name} cell {check}: the check uses none of {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercise_checks_fail_on_their_stubs(path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    pairs = exercise_pairs(nb)
    assert len(pairs) >= 2, f"{path.name}: every notebook closes with exercises (tagged exercise / exercise-check)"
    header = import_lines(nb)
    check_new_layout(path, nb, pairs, header)
