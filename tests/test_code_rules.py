"""benchmarks/ and reports/ stay readable: no function over 60 lines, no line over 120 characters.

The function rule is read from the source with ``ast`` (every ``def`` and ``async def``: methods and nested
functions too, decorators not counted). The line rule is ruff's E501 at ``line-length = 120``, switched on for
these two rooms by pyproject.toml (``make lint`` and ``make test`` run ruff); the test here checks that the
configuration does so. A long function is split by idea into helpers named for what they do, never by folding
lines together (STYLE.md, Limits).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("benchmarks", "reports")
MAX_FUNCTION_LINES = 60
LINE_LENGTH = 120


def sources() -> list[Path]:
    """The Python files of benchmarks/ and reports/, the results folders (executed notebooks' copies) aside."""
    return sorted(p for room in ROOMS for p in (ROOT / room).rglob("*.py") if "results" not in p.parts)


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """``(name, lines)`` of every function in ``path``, from its ``def`` line to its last line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_rooms_have_python_to_check():
    """The rule reads real files: both rooms hold their scripts (a moved folder would pass the rule vacuously)."""
    found = {p.relative_to(ROOT).parts[0] for p in sources()}
    assert found == set(ROOMS), found


def test_no_function_over_60_lines():
    """Every function in benchmarks/ and reports/ is at most 60 lines; a longer one is named as file:function:lines."""
    long = [f"{path.relative_to(ROOT)}:{name}:{n}" for path in sources() for name, n in function_lengths(path)
            if n > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them by idea): {long}"


def test_function_lengths_count_methods_and_nested_functions(tmp_path):
    """The count sees a method, a nested function and an async one, each from ``def`` to its last line."""
    path = tmp_path / "example.py"
    path.write_text("class A:\n    def method(self):\n        def inner():\n            return 1\n"
                    "        return inner()\n\n\nasync def run():\n    pass\n")
    assert sorted(function_lengths(path)) == [("inner", 2), ("method", 4), ("run", 2)]


def ruff() -> str:
    """The ruff beside this Python (the venv's), else one on PATH; skip when there is none."""
    found = Path(sys.executable).with_name("ruff")
    found = str(found) if found.exists() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e .[dev])")
    return found


@pytest.mark.parametrize("path, enforced", [("benchmarks/example.py", True), ("reports/example.py", True),
                                            ("benchmarks/sub/example.py", True), ("sdpo_kit/example.py", False)])
def test_ruff_holds_benchmarks_and_reports_to_120_characters(path, enforced):
    """pyproject.toml's ruff section reports E501 on a line over 120 characters in benchmarks/ and reports/, and
    leaves it to the library, whose shape comments sit at the end of long lines on purpose."""
    line = "x = 1  # " + "a" * (LINE_LENGTH - 8) + "\n"   # 121 characters
    fits = "x = 1  # " + "a" * (LINE_LENGTH - 9) + "\n"   # 120
    for text, expected in ((line, enforced), (fits, False)):
        out = subprocess.run([ruff(), "check", "--no-cache", "--output-format", "concise", "--stdin-filename", path,
                              "-"], input=text, cwd=ROOT, capture_output=True, text=True)
        assert ("E501" in out.stdout) == expected, (path, len(text) - 1, out.stdout, out.stderr)
