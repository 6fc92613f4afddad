"""Held-out accuracy of a run, an export or a model, outside training: what ``sdpo-kit eval`` prints.

    sdpo-kit eval runs/first_run --config configs/first_run.yaml        # a run sdpo-kit train wrote
    sdpo-kit eval runs/first_run/export-merged --config ...             # an export (merged or LoRA adapter)
    sdpo-kit eval smollm2-135m --config configs/first_run.yaml          # a model name (the base, untrained)

The config gives the task (its held-out rows and its answer rule) and the completion budget
(``core.config.completion_budget``: ``trainer.max_completion_length``), so a base model, a run and its export are measured
the same way as the run measured itself: greedy, the same questions, the same rule.

Left out on purpose: sampled (pass@k) metrics; ``sdpo.multi_turn.best_of_n`` counts those.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sdpo_kit.deploy.run_model import ExportError, is_adapter, load_run_model, run_source


@dataclass
class Evaluation:
    target: str
    kind: str             # "run", "export", "adapter" or "model"
    accuracy: float
    n: int
    rule: str
    max_new_tokens: int

    def line(self) -> str:
        return (f"held-out accuracy {self.accuracy:.3f} on {self.n} questions ({self.kind} {self.target}; greedy, "
                f"{self.max_new_tokens} new tokens, answers read with the {self.rule!r} rule)")


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


def evaluate(target: str, config) -> Evaluation:
    """Held-out greedy accuracy of ``target`` on ``config``'s task, with its rule and completion budget."""
    from sdpo_kit.core.config import completion_budget
    from sdpo_kit.registry import make_task
    from sdpo_kit.text.answers import rule_name

    task = make_task(**config.task)
    _, heldout = task.splits()
    if Path(target, "config.yaml").exists():
        _, run_task = run_source(target)
        if run_task.get("name") != config.task.get("name"):
            import warnings

            warnings.warn(f"{target} trained on task {run_task.get('name')!r}; evaluating it on --config's "
                          f"{config.task.get('name')!r}", stacklevel=2)
    model, tok, kind = load_target(target, config)
    budget = completion_budget(config.trainer)
    accuracy = task.evaluate(model, tok, heldout, max_new_tokens=budget)
    return Evaluation(str(target), kind, accuracy, len(heldout), rule_name(task.rule), budget)
