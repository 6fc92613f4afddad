"""Held-out accuracy of a run, an export or a model, outside training: what ``sdpo-kit eval`` prints.

    sdpo-kit eval runs/first_run                                   # a run sdpo-kit train wrote (its config.yaml)
    sdpo-kit eval runs/first_run --show 5                          # and five questions, reply, answer read
    sdpo-kit eval runs/first_run/export-merged --config first_run  # an export (merged or LoRA adapter)
    sdpo-kit eval smollm2-135m --config first_run                  # a model name (the base, untrained)

The config (a run's own ``config.yaml`` unless ``--config`` names another) gives the task (its held-out rows
and its answer rule) and the completion budget (``core.config.completion_budget``:
``trainer.max_completion_length``), so a base model, a run and its export are measured the same way as the
run measured itself: greedy, the same questions, the same rule, the task's batch size.

Every evaluation writes one JSON row per question (``eval.jsonl`` in a run folder, or at ``out``) with the keys
``question``, ``reply``, ``parsed`` (the answer the rule read, or null), ``expected`` and ``correct``.

Left out on purpose: sampled (pass@k) metrics; ``sdpo.multi_turn.best_of_n`` counts those.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path

from sdpo_kit.deploy.run_model import ExportError, is_adapter, load_run_model, run_source
from sdpo_kit.text.shown import one_line, question_text


@dataclass
class Evaluation:
    target: str
    kind: str             # "run", "export", "adapter" or "model"
    accuracy: float
    n: int
    rule: str
    max_new_tokens: int
    records: list[dict] = field(default_factory=list, repr=False)   # one per question (module docstring)
    path: Path | None = None                                         # where the records were written

    def line(self) -> str:
        return (f"held-out accuracy {self.accuracy:.3f} on {self.n} questions ({self.kind} {self.target}; greedy, "
                f"{self.max_new_tokens} new tokens, answers read with the {self.rule!r} rule)")

    def report(self, show: int = 0) -> str:
        """What ``sdpo-kit eval`` prints: ``show`` questions (``self.show``), then the accuracy line."""
        last = self.line() + (f"; every reply in {self.path}" if self.path else "")
        return f"{self.show(show)}\n{last}" if show else last

    def show(self, n: int) -> str:
        """The first ``n`` questions: the question, the reply, the answer read, the expected one, right or wrong;
        then how many of all were wrong."""
        lines = []
        for i, r in enumerate(self.records[:n], 1):
            mark = "right" if r["correct"] else "wrong"
            lines += [f"[{i}] {mark}: expected {r['expected']!r}, read {r['parsed']!r}",
                      f"    Q: {one_line(r['question'])}", f"    A: {one_line(r['reply'])}"]
        wrong = sum(not r["correct"] for r in self.records)
        lines.append(f"{wrong} of {self.n} wrong" + (f"; every question in {self.path}" if self.path else ""))
        return "\n".join(lines)




def load_target(target: str, config=None):
    """(model, tokenizer, kind) for a run directory, an export folder, a LoRA adapter folder or a model name."""
    from sdpo_kit.models import ModelNotAvailableError, load_policy

    path = Path(target)
    if (path / "config.yaml").exists() and (path / "model").is_dir():
        model, tok = load_run_model(path)
        return model, tok, "run"
    if path.is_dir() and is_adapter(path):
        from peft import PeftModel

        if config is None:
            raise ExportError(f"{target} is a LoRA adapter: its base comes from --config's model.name")
        base, tok = load_policy(config.model.name, lora=False, load_in_4bit=False, use_unsloth=False)
        return PeftModel.from_pretrained(base, path).merge_and_unload().eval(), tok, "adapter"
    if path.is_dir() and not (path / "config.json").exists():
        raise ExportError(f"{target}: a folder, but neither a run (config.yaml and model/), a LoRA adapter "
                          "(adapter_model.safetensors) nor a transformers model (config.json)")
    lab = None
    if target == "tiny-lab" and config is not None:   # the warm start follows the config's task, as in training
        from sdpo_kit.lab.model import lab_config_for
        from sdpo_kit.registry import make_task

        lab = lab_config_for(config, make_task(**config.task))
    try:
        model, tok = load_policy(target, lora=False, load_in_4bit=False, use_unsloth=False, lab_config=lab)
    except ModelNotAvailableError as e:
        raise ExportError(f"{target}: {e}") from None
    return model.eval(), tok, "export" if path.is_dir() else "model"


def records(task, rows: list[dict], replies: list[str]) -> list[dict]:
    """One row per question: ``question``, ``reply``, ``parsed``, ``expected``, ``correct`` (the task's rule)."""
    from sdpo_kit.text.answers import completion_text, extract_answer

    out, rule = [], getattr(task, "rule", None)
    for row, reply in zip(rows, replies):
        expected = row[task.answer_column]
        parsed = extract_answer(reply, rule) if rule is not None else None
        out.append({"question": question_text(row["prompt"]), "reply": completion_text(reply), "parsed": parsed,
                    "expected": expected, "correct": bool(task.is_correct(reply, expected))})
    return out


def task_batch_size(task, default: int = 256) -> int:
    """The batch the task's own ``evaluate`` generates in (a batch's padding can move a greedy reply)."""
    param = inspect.signature(task.evaluate).parameters.get("batch_size")
    return param.default if param is not None and isinstance(param.default, int) else default


def run_config(target) -> Path:
    """A run folder's own config.yaml (what ``sdpo-kit eval RUN_DIR`` measures with when no --config is given)."""
    path = Path(target, "config.yaml")
    if not path.exists():
        raise ExportError(f"{target} is not a run folder (no config.yaml): give --config")
    return path


def evaluate(target: str, config, *, out: str | Path | None = None, progress: bool = True) -> Evaluation:
    """Held-out greedy accuracy of ``target`` on ``config``'s task, with its rule and completion budget;
    ``config`` may be None for a run folder (its own config.yaml). The per-question records go to ``out``,
    default ``TARGET/eval.jsonl`` for a run folder (else none unless ``out`` is given)."""
    from sdpo_kit.core.config import completion_budget
    from sdpo_kit.core.progress import Progress
    from sdpo_kit.registry import load_config, make_task
    from sdpo_kit.tasks.base import greedy_replies
    from sdpo_kit.text.answers import rule_name

    is_run = Path(target, "config.yaml").exists()
    config = load_config(run_config(target)) if config is None else config
    task = make_task(**config.task)
    _, heldout = task.splits()
    if is_run:
        _, run_task = run_source(target)
        if run_task.get("name") != config.task.get("name"):
            import warnings

            warnings.warn(f"{target} trained on task {run_task.get('name')!r}; evaluating it on --config's "
                          f"{config.task.get('name')!r}", stacklevel=2)
    model, tok, kind = load_target(target, config)
    budget = completion_budget(config.trainer)
    bar = Progress(len(heldout), "eval", unit="question") if progress else None
    replies = greedy_replies(model, tok, heldout, max_new_tokens=budget, batch_size=task_batch_size(task),
                             on_batch=bar.update if bar else None)
    if bar:
        bar.close()
    rows = records(task, heldout, replies)
    path = Path(out) if out is not None else (Path(target, "eval.jsonl") if is_run else None)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    accuracy = sum(r["correct"] for r in rows) / len(rows)
    rule = getattr(task, "rule", None)
    return Evaluation(str(target), kind, accuracy, len(heldout), rule_name(rule) if rule is not None else "tests",
                      budget, rows, path)
