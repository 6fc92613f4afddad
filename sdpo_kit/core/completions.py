"""Sampled completions, as a reader checks them: ``output_dir/completions.jsonl`` and the dashboard's table.

"Is it learning or hacking the reward?" is answered by reading what the policy writes. Every
``every`` steps (``log_completions_every`` in the trainers' configs) each completion of the step's
batch becomes one JSON row beside ``metrics.jsonl``::

    {"step": 10, "prompt": "...", "completion": "...", "reward": 1.0,
     "reward/<func name>": 1.0, ..., "feedback": null,            # every algorithm
     "answer": "154",                                             # when the dataset has an answer column
     "teacher_prompt": "...", "has_teacher": true}                # SDPO only

``pandas.read_json(path, lines=True)`` loads it. Both backends write the same rows: the scratch
loops hand theirs to ``CompletionLog.add`` from their ``step()``; on the TRL backend
``trl_samples(trainer)`` reads the batch TRL keeps for its own completions table (and SDPO's
teacher columns, ``SDPOTRLTrainer.teacher_samples``). Listeners (the dashboard) get the rows of every
step, whether or not the file is due.

Chat prompts and completions are stored as text (``as_text``: ``role: content`` lines). Nothing here
draws a random number or touches a tensor, so logging completions never changes a run's numbers.

Left out on purpose: advantages and token ids (the metrics rows summarise them), images.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from sdpo_kit.core.metrics import read_jsonl, write_jsonl

COMPLETIONS_FILE = "completions.jsonl"


def as_text(x) -> str | None:
    """A prompt or completion as text: a string as it is, chat messages as ``role: content`` lines."""
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        return f"{x.get('role', '?')}: {x.get('content', '')}"
    if isinstance(x, Sequence):
        if len(x) == 1 and isinstance(x[0], Mapping):  # one message (a completion): its content alone
            return str(x[0].get("content", ""))
        return "\n".join(as_text(m) or "" for m in x)
    return str(x)


def _plain(v):
    """A JSON value: tensors / numpy scalars to floats, NaN to None (JSON has no NaN)."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def completion_rows(step: int, columns: Mapping[str, Sequence]) -> list[dict]:
    """One dict per completion from equal-length columns (``prompt``, ``completion``, ``reward``,
    ``reward/<name>``, ``feedback``, ``teacher_prompt``, ``has_teacher``...), ``step`` first."""
    columns = {k: list(v) for k, v in columns.items() if v is not None}
    n = len(columns.get("completion", ()))
    bad = {k: len(v) for k, v in columns.items() if len(v) != n}
    if bad:
        raise ValueError(f"completion columns of unequal length: completion has {n}, {bad}")
    text = {"prompt", "completion", "teacher_prompt"}
    return [{"step": int(step), **{k: as_text(v[i]) if k in text else _plain(v[i]) for k, v in columns.items()}}
            for i in range(n)]


class CompletionLog:
    """Where a trainer's sampled completions go: ``output_dir/completions.jsonl`` every ``every``
    steps, and every step to each listener (``listener.on_completions(step, rows)``).

    A trainer asks ``wanted(step)`` before building the columns (no file due, no listener: skip),
    gives them to ``add(step, **columns)`` (called again to add columns to the same step, as SDPO
    adds its teacher's), and ``flush(step)`` after the step writes and hands the rows on.
    ``start(step)`` keeps the rows of steps <= ``step`` of an earlier file (a resumed run).
    """

    def __init__(self, output_dir=None, every: int = 0, listeners: Sequence = ()):
        if int(every) < 0:
            raise ValueError(f"log_completions_every must be >= 0, got {every}")
        self.path = Path(output_dir) / COMPLETIONS_FILE if output_dir else None
        self.every = int(every)
        self.listeners = [x for x in listeners if callable(getattr(x, "on_completions", None))]
        self.latest: list[dict] = []      # the rows of the last step that had any
        self._pending: dict[str, list] = {}

    def file_due(self, step: int) -> bool:
        return self.path is not None and self.every > 0 and step % self.every == 0

    def wanted(self, step: int) -> bool:
        """Whether a step's completions go anywhere (the file is due, or someone listens)."""
        return bool(self.listeners) or self.file_due(step)

    def start(self, step: int = 0) -> None:
        """A fresh file, or on resume the earlier file cut to steps <= ``step``."""
        if self.path is None or not self.every:
            return
        kept = [r for r in read_jsonl(self.path) if r.get("step", 0) <= step] if step and self.path.exists() else []
        write_jsonl(self.path, kept)

    def add(self, step: int, **columns) -> None:
        """Columns of the step's completions (equal lengths); ``None`` columns are left out."""
        if not self.wanted(step):
            return
        self._pending.update({k: list(v) for k, v in columns.items() if v is not None})

    def flush(self, step: int) -> list[dict]:
        """Write the step's rows when the file is due and hand them to the listeners; returns them."""
        pending, self._pending = self._pending, {}
        if not pending:
            return []
        rows = completion_rows(step, pending)
        self.latest = rows
        if self.file_due(step):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
        for listener in self.listeners:
            listener.on_completions(step, rows)
        return rows


def reward_columns(names: Sequence[str], per_func) -> dict[str, list]:
    """``{"reward/<name>": [...]}`` from a (B, F) tensor or list of rows, one column per function."""
    rows = per_func.tolist() if hasattr(per_func, "tolist") else [list(r) for r in per_func]
    return {f"reward/{n}": [r[i] for r in rows] for i, n in enumerate(names)}


def trl_samples(trainer) -> dict[str, list]:
    """The columns of the last batch a TRL ``GRPOTrainer`` sampled: TRL keeps them for its own
    completions table (``log_completions``) in ``trainer._logs`` (trl 1.15 and 1.16: ``prompt``,
    ``completion``, ``rewards`` per function, ``extra`` from the rewards' ``log_extra``); plus
    ``trainer.teacher_samples`` when the trainer keeps one (SDPO). Empty when nothing was sampled."""
    logs = getattr(trainer, "_logs", None)
    if not logs or not logs.get("prompt"):
        return {}
    n = len(logs["prompt"])
    out: dict[str, list] = {"prompt": list(logs["prompt"]), "completion": list(logs["completion"])}
    per_func = {name: list(v) for name, v in logs.get("rewards", {}).items()}
    weights = getattr(trainer, "reward_weights", None)
    weights = weights.tolist() if hasattr(weights, "tolist") else [1.0] * len(per_func)
    if per_func:
        out["reward"] = [sum(w * (0.0 if v is None or v != v else v) for w, v in zip(weights, vals))
                         for vals in zip(*per_func.values())]
    out.update({f"reward/{name}": v for name, v in per_func.items()})
    feedback = [list(v) for k, v in logs.get("extra", {}).items() if k.startswith("feedback") and len(v) == n]
    if feedback:
        out["feedback"] = ["\n".join(t for t in texts if t) or None for texts in zip(*feedback)]
    answer = logs.get("extra", {}).get("answer")
    if answer is not None and len(answer) == n:   # the rows' reference answers (rewards.checked's log_columns)
        out["answer"] = list(answer)
    for k, v in (getattr(trainer, "teacher_samples", None) or {}).items():
        if len(v) == n:
            out[k] = list(v)
    return out

