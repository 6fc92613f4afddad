"""The notebooks read as lessons, not logs (read, not run).

Each notebook: at most 2,500 words of prose (its markdown cells), no code cell over 40 lines, a
"Words this notebook uses" box before the first section, no "Stale" mark, no "Reference figures" and no
rendered results table (those belong to docs/concepts), no ``RESULTS`` dict kept for a benchmark, no
issue numbers or project history, and outputs cleared (the executed copies the docs site shows live in
``benchmarks/results/executed``). Notebook 04 says at its top that VAPOR is a case study one may skip.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_WORDS, MAX_LINES = 2500, 40
HISTORY = re.compile(r"\b(issue|stop) #?\d+|#\d{2,}\b|\bearlier versions?\b|\bStale\b|Reference figures", re.I)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def prose_words(path: Path) -> int:
    return sum(len("".join(c["source"]).split()) for c in cells(path) if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_is_read_in_under_half_an_hour(path):
    words = prose_words(path)
    assert words <= MAX_WORDS, f"{path.name}: {words} words of prose (at most {MAX_WORDS}; analyses go to docs/concepts)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_code_cell_is_over_40_lines(path):
    long = [(i, len("".join(c["source"]).splitlines())) for i, c in enumerate(cells(path))
            if c["cell_type"] == "code" and len("".join(c["source"]).splitlines()) > MAX_LINES]
    assert not long, f"{path.name}: code cells over {MAX_LINES} lines (cell, lines): {long}; move the function to the library"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_research_log_in_a_lesson(path):
    """No Stale marks, reference-figure blocks, rendered result tables, RESULTS dicts or project history."""
    for i, cell in enumerate(cells(path)):
        text = "".join(cell["source"])
        assert not HISTORY.search(text), f"{path.name} cell {i}: {HISTORY.search(text).group()!r}"
        assert "<!-- report:" not in text, f"{path.name} cell {i}: a rendered results table (move it to docs/concepts)"
        if cell["cell_type"] == "code":
            assert not re.search(r"^RESULTS\s*=", text, re.M), f"{path.name} cell {i}: a RESULTS dict"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_words_are_defined_before_the_lesson_starts(path):
    """A "Words this notebook uses" box comes before the first numbered section."""
    md = ["".join(c["source"]) for c in cells(path) if c["cell_type"] == "markdown"]
    box = next((i for i, t in enumerate(md) if "Words this notebook uses" in t), None)
    first_section = next((i for i, t in enumerate(md) if re.search(r"^## 1\.", t, re.M)), len(md))
    assert box is not None and box <= first_section, f"{path.name}: no words box before section 1"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_outputs_are_cleared(path):
    dirty = [i for i, c in enumerate(cells(path)) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells with outputs {dirty}"


def test_the_vapor_notebook_says_it_may_be_skipped():
    path = next(p for p in NOTEBOOKS if p.name.startswith("04_"))
    top = "".join(cells(path)[0]["source"]).lower()
    assert "case study" in top and "skip" in top
