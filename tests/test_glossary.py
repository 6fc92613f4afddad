"""The glossary covers the course (read, not run).

``docs/glossary.md`` is a table ``| word | what it means | first in |``. Every bold term of every notebook's
"Words this notebook uses" box, and every method name in ``METHODS``, has a line there; every "first in"
link opens the page of the notebook it names (the docs site serves ``notebooks/NN_*.ipynb`` at that path,
relative to ``docs/``); the lines stay in alphabetical order.

The matching rule, in full. A word cell names one or more things: it is split on commas, slashes,
parentheses and the word "and" (``"KL divergence, KL penalty"``, ``"critic (value function)"``,
``"bf16 / fp16 / fp32"``), and each piece is a name. A box term is split the same way (``"fp32, fp16, bf16"``)
and each of its pieces must match a name: after lowercasing, dropping backticks and a leading "the ", it is
the name, or the name with an "s" added or taken off (``"preference spans"``), or the name followed by " of "
or " as " and a qualifier (``"log-probability of a completion"``, ``"KL penalty as a reward"``). Nothing is
exempted. A method name must be a name exactly as written, case included: ``GRPO`` the method and ``grpo`` the
loss type are different lines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
BOX = "Words this notebook uses"
SEPARATORS = re.compile(r",|/|\(|\)|\band\b")
LINK = re.compile(r"\[(\d\d)\]\(notebooks/((\d\d)_[\w-]+\.ipynb)\)")

# the methods the course builds or compares, and the loss_type and KL-estimator names its code uses
METHODS = [
    "REINFORCE", "RLOO", "GRPO", "Dr. GRPO", "DAPO", "GSPO", "PPO", "teacher-student PPO", "DPO", "VAPOR",
    "SDPO", "test-time SDPO", "best-of-k", "multi-turn reprompting",
    "grpo", "bnpo", "dr_grpo", "dapo", "k1", "k2", "k3",
]
# words the notebooks use outside their boxes' bold terms, matched like the box terms
OTHER_WORDS = ["smoke mode", "SFT", "pass@k", "EMA", "skill lab"]


def rows() -> list[tuple[str, str, str]]:
    """The glossary's lines as (word, meaning, first in), the header and its rule left out."""
    out = []
    for line in GLOSSARY.read_text().splitlines():
        if line.startswith("|") and not line.startswith(("| word |", "|---")):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            assert len(cells) == 3, f"not three cells: {line}"
            out.append((cells[0], cells[1], cells[2]))
    return out


def pieces(text: str) -> list[str]:
    """A word cell or a box term split into the names it holds, as written."""
    return [p.strip() for p in SEPARATORS.split(text.replace("`", "")) if p.strip()]


def norm(name: str) -> str:
    name = " ".join(name.lower().split())
    return name[4:] if name.startswith("the ") else name


def names() -> set[str]:
    return {norm(p) for word, _, _ in rows() for p in pieces(word)}


def covered(term: str, known: set[str]) -> bool:
    """Every piece of the term is a name, its plural or singular, or a name qualified by " of " or " as "."""
    def one(piece: str) -> bool:
        p = norm(piece)
        return p in known or p + "s" in known or (p.endswith("s") and p[:-1] in known) or any(
            p.startswith((n + " of ", n + " as ")) for n in known)
    return all(one(piece) for piece in pieces(term))


def box_terms(path: Path) -> list[str]:
    """The bold terms of the notebook's words box."""
    for cell in json.loads(path.read_text())["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and BOX in text:
            return [t for t in re.findall(r"\*\*(.+?)\*\*", text) if t != BOX]
    return []


def test_every_notebook_has_a_words_box():
    """Each notebook NN_*.ipynb has a words box with bold terms (else the next check would pass on nothing)."""
    assert len(NOTEBOOKS) >= 9, [p.name for p in NOTEBOOKS]
    empty = [p.name for p in NOTEBOOKS if not box_terms(p)]
    assert not empty, f"no bold terms in a '{BOX}' box: {empty}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_word_box_term_has_a_glossary_line(path):
    """Every bold term of the notebook's words box matches a glossary name (the module docstring's rule)."""
    known = names()
    missing = [t for t in box_terms(path) if not covered(t, known)]
    assert not missing, f"{path.name}: box terms with no line in docs/glossary.md: {missing}"


def test_every_method_has_a_glossary_line():
    """Every name in METHODS is a glossary name exactly as written, case included."""
    exact = {" ".join(p.split()) for word, _, _ in rows() for p in pieces(word)}
    missing = [m for m in METHODS if m not in exact]
    assert not missing, f"methods with no line in docs/glossary.md: {missing}"


def test_the_course_s_other_words_have_a_glossary_line():
    """Every name in OTHER_WORDS matches a glossary name by the box terms' rule."""
    known = names()
    missing = [w for w in OTHER_WORDS if not covered(w, known)]
    assert not missing, f"words with no line in docs/glossary.md: {missing}"


def test_every_first_in_link_opens_its_notebook():
    """Every "first in" cell is one link [NN](notebooks/NN_name.ipynb) to a notebook that exists, NN its number."""
    bad = []
    for word, _, first in rows():
        m = LINK.fullmatch(first)
        if not (m and m[1] == m[3] and (ROOT / "notebooks" / m[2]).is_file()):
            bad.append(f"{word}: {first}")
    assert not bad, "first-in links that do not open their notebook:\n" + "\n".join(bad)


def test_the_lines_are_in_alphabetical_order():
    """The lines are sorted by word, case, backticks and a leading "the " ignored."""
    keys = [norm(word.replace("`", "")) for word, _, _ in rows()]
    assert len(keys) > 50
    out = [f"{a!r} before {b!r}" for a, b in zip(keys, keys[1:]) if a > b]
    assert not out, "out of order: " + "; ".join(out)
