"""No notebook asserts how much a run learned (read, not run).

How much one run learns moves with its seed, the machine's rounding and the library versions: a learner whose
run lands outside the usual range should read that, not meet an AssertionError. So a notebook prints a run's
outcome beside the range a run like it usually lands in (``sdpo_kit.course.against_usual``), and its asserts
check the math (the advantages of a group sum to zero) and the plumbing (a file was written, a shape, two runs
start from the same weights).

The scan reads every ``assert`` in the notebooks' code cells and fails on a comparison inside it that orders
(``<``, ``<=``, ``>``, ``>=``) an outcome of training: an accuracy, a lift, a before / after or a last / first
pair, a gap closed, a collapse, a head start, a discovery rate, or a profile's measured threshold (``P.min_*``).
Equalities stay allowed: ``acc_before == acc_before_of_the_other_run`` is plumbing. The scan reads names, so
an outcome under a name it does not know (``assert a1 > a0``) passes it: the names above are the ones the
notebooks use.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest

from sdpo_kit.course import against_usual

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
OUTCOME = re.compile(r"accura|\bacc\w*|lift|\bbefore\b|\bafter\b|improv|gap|collapse|\bfinal\b|head_start|"
                     r"token_win|plain_acc|discovery|multi_turn|\['best_of_k'\]|pushed_out|\btie\b|\bmin_\w+")
LATER_THAN_EARLIER = re.compile(r"\[-?1\].*[<>].*\[0\]|\[0\].*[<>].*\[-?1\]")   # x[1] > x[0]: it went up


def outcome_comparisons(code: str) -> list[str]:
    """The comparisons inside ``code``'s asserts that order an outcome of training (unparsed)."""
    tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines()))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            for cmp in ast.walk(node.test):
                if isinstance(cmp, ast.Compare) and any(isinstance(op, ORDER) for op in cmp.ops):
                    text = ast.unparse(cmp)
                    if OUTCOME.search(text) or LATER_THAN_EARLIER.search(text):
                        found.append(text)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_notebook_asserts_how_much_a_run_learned(path):
    """Every assert in the notebook checks the math or the plumbing, none an outcome of training."""
    cells = json.loads(path.read_text())["cells"]
    found = [(i, text) for i, c in enumerate(cells) if c["cell_type"] == "code"
             for text in outcome_comparisons("".join(c["source"]))]
    assert not found, (f"{path.name}: asserts on how much a run learned (cell, comparison): {found}; print it "
                       "beside its usual range instead (sdpo_kit.course.against_usual)")


@pytest.mark.parametrize("code", [
    'assert lift >= P.min_lift, "this run usually gains more"',
    "assert a1 - a0 >= P.min_lift",
    "assert after - before >= 0.1",
    "assert s['reward/mean'][1] > s['reward/mean'][0] + 0.3",
    "assert s['eval/accuracy'][1] <= s['eval/accuracy'][0]",
    "assert abs(final['sdpo', TOP] - final['grpo', TOP]) <= P.tie",
    "assert closed['kd'] >= P.min_kd_gap_closed",
    "assert bottom['multi_turn'] < bottom['best_of_k']",
    "assert head_start[TOP] > 0 > head_start[BOTTOM]",
    "assert losses[-1] < losses[0]",
    "for name, (a0, a1) in runs.items():\n    assert a1 - a0 >= P.min_lift, name",
])
def test_the_scan_finds_an_assert_on_what_a_run_learned(code):
    """The scan is not blind: each of these asserts on a run's outcome is found."""
    assert outcome_comparisons(code), code


@pytest.mark.parametrize("code", [
    'assert abs(advantages.sum()) < 1e-5, "advantages within a group sum to zero"',
    "assert trl_accs[0][1] == scratch_accs[0][1]",
    "assert r['history'][0]['eval/accuracy'] == acc_before",
    "assert all(math.isfinite(h['reward/mean']) and h['reward/mean'] <= 0 for h in history)",
    "assert abs(trace[-1][1] - 2.0) < 0.1",
    "assert expected_best_of_k(p, 4) < expected_best_of_k(q, 4)",
    "assert rows['merged fp16']['max_logit_diff'] < P.fp16_max_logit_diff",
    "assert (rewards.view(-1, G).std(1) > 0).any()",
    "%time x = 1\nassert x == 1",
])
def test_the_scan_leaves_the_math_and_the_plumbing_alone(code):
    """Asserts on a fact of the math or of the plumbing are not outcome asserts."""
    assert not outcome_comparisons(code), code


def test_against_usual_says_where_a_run_landed():
    """In the range: the value and the range; outside it: a note, with the notebook's own; no range: says so;
    NaN: nothing to measure."""
    inside = against_usual("held-out accuracy changed by", 0.35, low=0.15)
    assert inside == "held-out accuracy changed by +0.35 (a run like this usually lands at +0.15 or more)"
    below = against_usual("held-out accuracy changed by", 0.05, low=0.15, if_outside="Read its answers.")
    assert below.startswith("held-out accuracy changed by +0.05") and "outside the usual range" in below
    assert below.endswith("\n  Read its answers.")
    assert "outside" in against_usual("x", 0.2, -0.05, 0.05) and "outside" not in against_usual("x", 0.0, -0.05, 0.05)
    assert "between -0.05 and +0.05" in against_usual("x", 0.0, -0.05, 0.05)
    assert "at 0 or less" in against_usual("pairs:", 0, high=0, fmt="d")
    assert against_usual("x", 0.3) == "x +0.30 (no usual range was measured for this model at this size)"
    assert "nothing to measure" in against_usual("x", math.nan, low=0.5, fmt=".2f")
