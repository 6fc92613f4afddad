"""A learner's own questions and answers, from a file: the ``dataset`` task.

    task:
      name: dataset
      path: larger.jsonl                 # JSONL, JSON, CSV, Parquet, or a datasets save_to_disk folder
      prompt_field: question             # the column the prompt is made from
      answer_field: answer               # the reference answer
      prompt_template: "{question} Answer with the number only."   # optional; any column by name
      system_prompt: null                # optional system turn (chat) or first paragraph (plain text)
      chat: true                         # the model's chat template, or plain text
      answer_rule: auto                  # a rule of text/answers.py, or "my_rules.py:first_number"
      n_eval: 50                         # rows held out for evaluation, drawn by seed...
      eval_path: null                    # ...or a separate file of held-out rows
      feedback_field: null               # a column of text a checker would say to a wrong answer (SDPO)
      seed: 0

Relative paths resolve against the config's folder (``base_dir``, set by ``registry.load_config``), else the
working directory. Each row becomes ``{"prompt": ..., "answer": str(row[answer_field]), **the other columns}``:
the other columns reach the rewards as TRL passes dataset columns, by name. Held-out evaluation and the
``exact_match`` reward read answers with ``answer_rule``.

Everything is checked when the task is built (``registry.load_config`` builds it before any model loads):
a missing file, an unknown format, an empty file, a malformed row (its line or row number), a missing field
(the row that lacks it), a column named ``prompt`` beside a different ``prompt_field``, fewer rows than the
held-out set needs. ``check_dataset_run`` checks what needs the trainer too: enough training rows for a step.

Left out on purpose: streaming files larger than memory, and tokenising here (the trainers do it).
"""

from __future__ import annotations

import csv
import json
import random
import string
from dataclasses import dataclass, field
from pathlib import Path

from sdpo_kit.core.user_code import UserCodeError, load_function, resolve_file
from sdpo_kit.tasks.base import TASKS, greedy_accuracy
from sdpo_kit.text import answers

FORMATS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class DatasetError(ValueError):
    """A dataset file cannot serve as a task (the message names the file and, where it applies, the row and field)."""


def read_rows(path: Path) -> list[dict]:
    """The rows of a JSONL, JSON (a list of objects, or ``{"data": [...]}``), CSV or Parquet file, or of a
    ``datasets`` ``save_to_disk`` folder; DatasetError naming the file (and line) otherwise."""
    if path.is_dir():
        if not (path / "dataset_info.json").exists() and not (path / "dataset_dict.json").exists():
            raise DatasetError(f"{path}: a folder, but not one `datasets`' save_to_disk wrote (no dataset_info.json)")
        from datasets import DatasetDict, load_from_disk

        ds = load_from_disk(str(path))
        if isinstance(ds, DatasetDict):
            split = "train" if "train" in ds else next(iter(ds))
            ds = ds[split]
        return [dict(r) for r in ds]
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise DatasetError(f"{path}: unknown format {path.suffix!r}; use one of {sorted(FORMATS)} or a "
                           "datasets save_to_disk folder")
    if kind == "jsonl":
        rows = []
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}, line {i}: not valid JSON ({e.msg}): {line[:80]!r}") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}, line {i}: a row must be a JSON object, got {type(row).__name__}")
            rows.append(row)
        return rows
    if kind == "json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
        data = data.get("data", data) if isinstance(data, dict) else data
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DatasetError(f"{path}: a JSON file must hold a list of objects (or {{\"data\": [...]}})")
        return data
    if kind == "csv":
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            rows = []
            for i, row in enumerate(reader, 2):     # line 1 is the header
                if None in row or any(v is None for v in row.values()):
                    raise DatasetError(f"{path}, line {i}: {len(row.get(None) or [])} more or fewer cells than the "
                                       f"header's {len(reader.fieldnames or [])} columns")
                rows.append(dict(row))
            return rows
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:
        raise DatasetError(f"{path}: cannot read it as Parquet: {type(e).__name__}: {e}") from e


@dataclass
class DatasetTask:
    """Questions and answers from a file (module docstring)."""

    path: str = ""
    prompt_field: str = "question"
    answer_field: str = "answer"
    prompt_template: str | None = None
    system_prompt: str | None = None
    chat: bool = True
    answer_rule: str = "auto"
    n_eval: int = 50
    eval_path: str | None = None
    feedback_field: str | None = None
    max_new_tokens: int = 256          # held-out evaluation's budget when no trainer sets one (sdpo-kit eval)
    seed: int = 0
    base_dir: str | None = None        # the config's folder (registry.load_config sets it)
    name: str = field(init=False, default="dataset")
    answer_column: str = field(init=False, default="answer")

    def __post_init__(self):
        if not self.path:
            raise DatasetError("task 'dataset' needs path: a JSONL, JSON, CSV or Parquet file, or a save_to_disk folder")
        if self.n_eval < 1:
            raise DatasetError(f"n_eval must be >= 1, got {self.n_eval}")
        if self.prompt_template is not None:
            fields = {f for _, f, _, _ in string.Formatter().parse(self.prompt_template) if f}
            if not fields:
                raise DatasetError(f"prompt_template {self.prompt_template!r} names no column: write "
                                   f"'{{{self.prompt_field}}}' where the question goes")
        self._rule = self._load_rule()
        self._splits = self._read_splits()       # every check of the file, before any model loads

    # --- the answer rule ------------------------------------------------------------------
    def _load_rule(self):
        if ":" in str(self.answer_rule):
            try:
                return load_function(self.answer_rule, self.base_dir, what="answer_rule")
            except UserCodeError as e:
                raise DatasetError(str(e)) from None
        return answers.check_rule(self.answer_rule)

    @property
    def rule(self):
        """The answer rule held-out evaluation and the exact-match reward read completions with."""
        return self._rule

    # --- rows ----------------------------------------------------------------------------
    def _file(self, name: str) -> Path:
        path, tried = resolve_file(name, self.base_dir)
        if not path.exists():
            raise DatasetError(f"dataset file {name!r} not found (looked in {', '.join(str(p) for p in tried)})")
        return path

    def prompt(self, row: dict):
        """The prompt of a row: its question in the template, with the system prompt, chat or plain text."""
        text = self.prompt_template.format(**row) if self.prompt_template else str(row[self.prompt_field])
        if not self.chat:
            return f"{self.system_prompt}\n\n{text}" if self.system_prompt else text
        head = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return head + [{"role": "user", "content": text}]

    def _rows(self, path: Path) -> list[dict]:
        raw = read_rows(path)
        if not raw:
            raise DatasetError(f"{path}: no rows")
        needed = [self.prompt_field, self.answer_field] + ([self.feedback_field] if self.feedback_field else [])
        if self.prompt_template:
            needed += [f for _, f, _, _ in string.Formatter().parse(self.prompt_template) if f]
        out = []
        for i, row in enumerate(raw, 1):
            missing = [f for f in dict.fromkeys(needed) if f not in row or row[f] is None]
            if missing:
                raise DatasetError(f"{path}, row {i}: no field {missing[0]!r} (its fields: {sorted(row)})")
            if "prompt" in row and self.prompt_field != "prompt":
                raise DatasetError(f"{path}: a column is named 'prompt' and prompt_field is {self.prompt_field!r}; "
                                   "rename the column, or set prompt_field: prompt")
            other = {k: v for k, v in row.items() if k not in ("prompt", "answer")}   # every column reaches the rewards
            out.append({"prompt": self.prompt(row), "answer": str(row[self.answer_field]), **other})
        return out

    def _read_splits(self) -> tuple[list[dict], list[dict]]:
        path = self._file(self.path)
        rows = self._rows(path)
        rng = random.Random(self.seed)
        if self.eval_path:
            heldout = self._rows(self._file(self.eval_path))
            rng.shuffle(heldout)
            return rows, heldout[:self.n_eval]
        if len(rows) <= self.n_eval:
            raise DatasetError(f"{path}: {len(rows)} rows, and n_eval={self.n_eval} holds out every one of them; "
                               "lower n_eval or give eval_path")
        order = list(range(len(rows)))
        rng.shuffle(order)
        held = set(order[:self.n_eval])
        return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in order[:self.n_eval]]

    def splits(self) -> tuple[list[dict], list[dict]]:
        """(train_rows, heldout_rows): the held-out rows drawn by ``seed`` (or read from ``eval_path``)."""
        return [dict(r) for r in self._splits[0]], [dict(r) for r in self._splits[1]]

    # --- scoring -------------------------------------------------------------------------
    def is_correct(self, completion, answer) -> bool:
        return answers.is_correct(completion, answer, self.rule)

    def reward(self, prompts, completions, answer, **kwargs) -> list[float]:
        return [float(self.is_correct(c, a)) for c, a in zip(completions, answer)]

    def feedback_reward(self, answer_field: str = "answer"):
        """The ``feedback`` reward on this task: ``{"score", "feedback"}``, the feedback being the row's
        ``feedback_field`` text for a wrong answer (a generic line when the file has no such column)."""
        task = self

        def feedback(prompts, completions, **columns) -> list[dict]:
            notes = columns.get(task.feedback_field) if task.feedback_field else None
            out = []
            for i, (c, a) in enumerate(zip(completions, columns[answer_field])):
                if task.is_correct(c, a):
                    out.append({"score": 1.0, "feedback": ""})
                    continue
                got = answers.extract_answer(c, task.rule)
                generic = answers.missing_answer_message(task.rule) if got is None else f"Your answer {got!r} is wrong."
                out.append({"score": 0.0, "feedback": str(notes[i]) if notes is not None else generic})
            return out

        feedback.required_columns = (answer_field,) + ((self.feedback_field,) if self.feedback_field else ())
        feedback.__name__ = "feedback"
        return feedback

    def evaluate(self, model, tokenizer, rows: list[dict] | None = None, batch_size: int = 64,
                 max_new_tokens: int | None = None) -> float:
        """Greedy accuracy on ``rows`` (default: the held-out rows) with this task's rule."""
        rows = self.splits()[1] if rows is None else rows
        return greedy_accuracy(self, model, tokenizer, rows, batch_size=batch_size,
                               max_new_tokens=max_new_tokens or self.max_completion_tokens())

    def max_completion_tokens(self) -> int:
        return self.max_new_tokens


def check_dataset_run(task, refusal: str | None, prompts_per_step: int) -> None:
    """What a dataset task needs from the run: an algorithm that can train on its rows (``refusal``: the algorithm's
    ``dataset_refusal``, None when it can), and at least one step's prompts to train on. DatasetError naming the
    file otherwise."""
    if not isinstance(task, DatasetTask):
        return
    if refusal:
        raise DatasetError(f"task 'dataset' ({task.path}): {refusal}")
    n_train = len(task.splits()[0])
    if n_train < prompts_per_step:
        raise DatasetError(f"{task.path}: {n_train} training rows after holding out {len(task.splits()[1])}, "
                           f"fewer than one step's prompts_per_step={prompts_per_step}")


TASKS["dataset"] = DatasetTask
