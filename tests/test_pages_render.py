"""Every page renders as written: a rendered number's marker never starts a line.

A line that starts with ``<!--`` opens an HTML block in CommonMark (GitHub's renderer) and in the docs
site: the paragraph splits there and the rest of the line is shown raw, markdown and all. Numbers the
reports render sit between ``<!--f:name-->`` and ``<!--/f-->`` (``reports/render.py``), so a line
break just before one breaks the page. Checked two ways on README.md, every docs page and every
notebook's markdown: no line starts with a marker, and a CommonMark renderer (markdown-it) puts no
marker in an HTML block of its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--/?f[:\-]")
LINE_START = re.compile(r"^\s*<!--/?f[:\-]")


def pages() -> list[tuple[str, str]]:
    """(name, markdown) of README.md, docs/**/*.md and each notebook's markdown cells."""
    out = [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in
           [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]]
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        for i, cell in enumerate(cells):
            if cell["cell_type"] == "markdown":
                out.append((f"{nb.name} cell {i}", "".join(cell["source"])))
    return out


PAGES = pages()


@pytest.mark.parametrize("name,text", PAGES, ids=[n for n, _ in PAGES])
def test_no_line_starts_with_a_rendered_numbers_marker(name, text):
    """A marker at the start of a line splits the paragraph (module docstring): join it to the line before."""
    bad = [f"line {i + 1}: {line.strip()[:70]}" for i, line in enumerate(text.splitlines()) if LINE_START.match(line)]
    assert not bad, f"{name}: " + "; ".join(bad)


def test_commonmark_keeps_every_marker_inline():
    """Rendered with CommonMark, every marker is inline HTML inside its paragraph or table cell, never an
    HTML block (what a marker at the start of a line becomes)."""
    md = MarkdownIt("commonmark").enable("table")
    broken = []
    for name, text in PAGES:
        for token in md.parse(text):
            if token.type == "html_block" and MARKER.search(token.content):
                broken.append(f"{name}: {token.content.strip()[:60]!r}")
    assert not broken, "markers rendered as HTML blocks (the paragraph breaks there):\n" + "\n".join(broken)


def test_the_check_can_fail():
    """The renderer does put a marker that starts a line into an HTML block (so the test above can fail)."""
    tokens = MarkdownIt("commonmark").parse("The answer is\n<!--f:x.y-->42<!--/f--> today.")
    assert any(t.type == "html_block" and MARKER.search(t.content) for t in tokens)
