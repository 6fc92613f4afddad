"""Small views the notebooks print: answers before and after training side by side, one sampled group.

    print(side_by_side(questions, before, after, answers, is_correct))
    group = last_group(run_dir / "completions.jsonl", G)     # one prompt's G completions of the last logged step

Left out on purpose: plots (``viz.plots`` and the dashboard draw those).
"""

from __future__ import annotations

import json
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


def last_group(path: str | Path, group_size: int, index: int = 0) -> list[dict]:
    """The ``index``-th group of ``group_size`` completions (one prompt's) at the last step the run logged
    in ``completions.jsonl``: dicts with ``prompt``, ``completion``, ``reward``, ... as the run wrote them."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{path}: no completions were logged (trainer.log_completions_every is 0?)")
    last = max(r["step"] for r in rows)
    step_rows = [r for r in rows if r["step"] == last]
    group = step_rows[index * group_size:(index + 1) * group_size]
    if len(group) != group_size:
        raise ValueError(f"step {last} logged {len(step_rows)} completions: no group {index} of {group_size}")
    return group
