"""The pages a learner reads carry no build history: no GPU leases, no lent machines, no commit hashes outside the
rendered results blocks (their provenance lines name commits on purpose). The GPU runs have a page of their own
(docs/gpu_runs.md, from ``benchmarks/results/gpu/``); the landing pages say in one sentence of at most 40 words what
has run on a GPU. The install page stays an install page: at most 1,500 words. The SDPO concept page teaches the
method in at most 3,000 words; the lab's measurements of it live on research pages (docs/sdpo_lab.md,
docs/sdpo_head_start.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LEARNER_PAGES = [ROOT / "README.md", ROOT / "docs" / "index.md", ROOT / "docs" / "install.md", ROOT / "docs" / "own_task.md",
                 *sorted((ROOT / "docs" / "concepts").glob("*.md")), *sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
BLOCK = re.compile(r"<!-- report:([\w-]+) -->.*?<!-- /report:\1 -->", re.S)
FIELD = re.compile(r"<!--f:[\w.-]+-->(.*?)<!--/f-->", re.S)
HISTORY = re.compile(r"\blease[sd]?\b|\blent\b|"
                     r"(?<![\w/-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])", re.I)   # a commit


def text_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    return path.read_text()


@pytest.mark.parametrize("path", LEARNER_PAGES, ids=lambda p: p.name)
def test_a_learner_page_carries_no_build_history(path):
    prose = FIELD.sub(r"\1", BLOCK.sub("", text_of(path)))
    found = sorted({m.group() for m in HISTORY.finditer(prose)})
    assert not found, f"{path.relative_to(ROOT)}: {found} (build history goes to docs/gpu_runs.md or docs/develop.md)"


def test_the_install_page_is_an_install_page():
    words = len(BLOCK.sub("", (ROOT / "docs" / "install.md").read_text()).split())
    assert words <= 1500, f"docs/install.md: {words} words (at most 1,500)"


def test_the_sdpo_page_teaches_in_at_most_3000_words():
    """Counted on the whole file, rendered blocks and fields included: a results block moved back here counts."""
    words = len((ROOT / "docs" / "concepts" / "sdpo.md").read_text().split())
    assert words <= 3000, (f"docs/concepts/sdpo.md: {words} words (at most 3,000; the measurements go to "
                           "docs/sdpo_lab.md or docs/sdpo_head_start.md)")


def test_the_landing_pages_say_what_ran_on_a_gpu_in_one_short_sentence():
    import sys

    sys.path.insert(0, str(ROOT))
    from reports.gpu import gpu_status_fields

    summary = gpu_status_fields()["summary"]
    assert len(summary.split()) <= 40 and summary.count(". ") == 0, summary
    for page in ("README.md", "docs/index.md", "docs/install.md"):
        fields = FIELD.findall((ROOT / page).read_text())
        assert "<!--f:gpu.summary-->" in (ROOT / page).read_text() and "<!--f:gpu.status-->" not in (ROOT / page).read_text(), page
        assert fields, page
