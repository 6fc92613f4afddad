"""Small views the notebooks print: answers before and after training side by side, one sampled group, and a
run's outcome beside the range a run like it usually lands in.

    print(side_by_side(questions, before, after, answers, is_correct))
    group = group_to_show(run_dir / "completions.jsonl", G)  # one prompt's G completions, mixed rewards if any
    print(against_usual("held-out accuracy changed by", lift, low=P.min_lift))

A notebook prints how much its run learned and never asserts it: one run is one sample (its seed, the
machine's rounding and the library versions all move it), so a learner's run outside the usual range is
news to read, not an error. The notebooks' asserts check the math and the plumbing.

Left out on purpose: plots (``viz.plots`` and the dashboard draw those).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path


def _cell(text: str, width: int) -> str:
    text = " ".join(str(text).split())                     # one line: newlines and runs of spaces as one space
    return text if len(text) <= width else text[:width - 1] + "…"


def side_by_side(questions: Sequence[str], before: Sequence[str], after: Sequence[str], answers: Sequence[str],
                 is_correct: Callable[[str, str], bool], width: int = 38) -> str:
    """A text table: each question, the answer before training and after it, each marked right (✓) or
    wrong (✗) by ``is_correct(completion, answer)``; a last line counts the right ones."""
    qw = min(60, max(len("question"), *(len(" ".join(str(q).split())) for q in questions)))
    lines = [f"{'question':<{qw}}  {'before':<{width + 2}}  {'after':<{width + 2}}"]
    right = [0, 0]
    for q, b, a, ans in zip(questions, before, after, answers):
        marks = [is_correct(b, ans), is_correct(a, ans)]
        right = [r + m for r, m in zip(right, marks)]
        lines.append(f"{_cell(q, qw):<{qw}}  {'✓' if marks[0] else '✗'} {_cell(b, width):<{width}}  "
                     f"{'✓' if marks[1] else '✗'} {_cell(a, width):<{width}}")
    lines.append(f"right: {right[0]} of {len(questions)} before, {right[1]} of {len(questions)} after")
    return "\n".join(lines)


def group_to_show(path: str | Path, group_size: int) -> list[dict]:
    """One prompt's ``group_size`` completions from ``completions.jsonl`` (dicts with ``step``, ``prompt``,
    ``completion``, ``reward``, ... as the run wrote them): the first group whose rewards differ, at the latest
    logged step that has one. When no logged group has mixed rewards, the last step's first group (its
    advantages are all 0: the caller can tell by its rewards)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{path}: no completions were logged (trainer.log_completions_every is 0?)")
    groups = []                                                 # latest step first, each step's groups in order
    for step in sorted({r["step"] for r in rows}, reverse=True):
        step_rows = [r for r in rows if r["step"] == step]
        chunks = (step_rows[i:i + group_size] for i in range(0, len(step_rows), group_size))
        groups += [g for g in chunks if len(g) == group_size and len({r["prompt"] for r in g}) == 1]
    if not groups:
        raise ValueError(f"{path}: no step logged a whole group of {group_size} completions to one prompt")
    return next((g for g in groups if len({r["reward"] for r in g}) > 1), groups[0])


def against_usual(what: str, value: float, low: float | None = None, high: float | None = None, *,
                  if_outside: str = "", fmt: str = "+.2f") -> str:
    """``what`` and ``value`` beside the range a run like this one usually lands in (``low`` / ``high``: None
    where that side is open; both None where no range was measured, as for a smoke run), with a note when
    ``value`` falls outside it: ``if_outside`` says what that may mean for this run. A NaN ``value`` (nothing to
    average in this run) says so."""
    if low is None and high is None:
        return f"{what} {value:{fmt}} (no usual range was measured for this model at this size)"
    usual = (f"between {low:{fmt}} and {high:{fmt}}" if low is not None and high is not None
             else f"at {low:{fmt}} or more" if low is not None else f"at {high:{fmt}} or less")
    if math.isnan(value):
        return f"{what} nothing to measure in this run (a run like this usually lands {usual})"
    text = f"{what} {value:{fmt}} (a run like this usually lands {usual})"
    if (low is not None and value < low) or (high is not None and value > high):
        text += ("\n  outside the usual range. One run is one sample: its seed, your machine's rounding and the "
                 "library versions all move it, so compare a few seeds before reading much into it.")
        text += f"\n  {if_outside}" if if_outside else ""
    return text
