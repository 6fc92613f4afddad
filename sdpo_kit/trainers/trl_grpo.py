"""GRPO through TRL: a thin builder around ``trl.GRPOTrainer`` (TRL 1.16).

``build_trl_grpo_trainer(model, tokenizer, reward_funcs, train_dataset, preset=..., ...)``
returns a ready ``trl.GRPOTrainer``; call ``.train()`` on it. What the builder adds:

* presets: ``"cpu"`` (use_cpu, bf16 and fp16 off, no gradient checkpointing) and ``"t4"``
  (fp16, gradient checkpointing; LoRA / 4-bit / Unsloth come from ``models.load_policy``);
  ``"auto"`` picks ``"t4"`` when CUDA is there, else ``"cpu"``.
* our config names mapped to TRL's (``grpo_args``): ``prompts_per_step`` prompts x
  ``num_generations`` completions per optimizer step, like the scratch loop; the rest
  (``learning_rate``, ``temperature``, ``max_completion_length``, ``beta``, ``loss_type``,
  ``epsilon``, ``epsilon_high``, ``scale_rewards``, ``num_iterations``, ``seed``) share TRL's names.
  The learning rate is constant unless ``lr_scheduler_type`` says otherwise (TRL defaults to
  linear decay), as in the scratch loop, so both backends match.
* reward functions wrapped with ``rewards.checked``: a reward that raises, or returns NaN / inf,
  fails naming the function; dataset columns checked up front (``rewards.check_columns``).
* a batch that is not a whole number of groups fails here, before TRL, with a ``ValueError``
  giving the nearest valid sizes below and above. We fail instead of silently resizing: a
  different batch changes the learning-rate / batch trade-off the user chose.
* ``MetricsCallback``: writes ``output_dir/metrics.jsonl`` with the scratch loop's keys
  (``step, reward/mean, reward/std, reward/<name>, loss, loss/kl, stats/clip_frac*,
  completion/mean_length, time/step_s, eval/accuracy``; mapped by
  ``plotting.metrics_from_trl_logs``) and runs ``eval_fn`` at step 0, every ``eval_every``
  steps and at the end.

Left out on purpose: vLLM, multi-GPU launch, TRL's own eval loop (``eval_fn`` is ours).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from transformers import TrainerCallback

from ..plotting import is_train_summary
from ..rewards import check_columns, checked

PRESETS = {
    "cpu": {"use_cpu": True, "bf16": False, "fp16": False, "gradient_checkpointing": False},
    # a T4 has no real bf16; gradient checkpointing trades compute for the 15 GB of memory
    "t4": {"bf16": False, "fp16": True, "gradient_checkpointing": True},
}
# what every run gets unless overridden: log each step, no checkpoints, no trackers,
# keep answer columns for the rewards, constant lr as the scratch loop's default
BASE_ARGS = {
    "report_to": "none", "logging_steps": 1, "save_strategy": "no", "remove_unused_columns": False,
    "lr_scheduler_type": "constant", "per_device_train_batch_size": 64, "num_generations": 8,
}
OURS_ONLY = ("prompts_per_step", "eval_every")  # config keys TRL does not know


def _trl_fields() -> set[str]:
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig)}


def _nearest_multiples(value: int, m: int) -> str:
    lo, hi = (value // m) * m, -(-value // m) * m
    return f"{lo} or {hi}" if lo > 0 else f"{hi}"


def check_group_divisibility(args: dict, world_size: int | None = None) -> None:
    """TRL samples whole groups: the generation batch must be a multiple of ``num_generations``.

    The generation batch is ``generation_batch_size`` when set, else
    ``per_device_train_batch_size * processes * (steps_per_generation or gradient_accumulation_steps)``.
    Raises ``ValueError`` with the nearest valid values below and above.
    """
    G = int(args.get("num_generations") or 8)
    p = int(args.get("per_device_train_batch_size", 8))
    world = world_size or int(os.environ.get("WORLD_SIZE", "1"))
    if args.get("generation_batch_size") is not None:
        gb = int(args["generation_batch_size"])
        if gb % G:
            m = math.lcm(G, p * world)
            raise ValueError(
                f"generation_batch_size={gb} is not a multiple of num_generations={G}: TRL's GRPOTrainer "
                f"needs whole groups of {G} completions (and a multiple of the global batch {p * world}). "
                f"Nearest valid generation_batch_size: {_nearest_multiples(gb, m)}."
            )
        return
    k = int(args.get("steps_per_generation") or args.get("gradient_accumulation_steps") or 1)
    if (p * k * world) % G:
        m = G // math.gcd(G, k * world)  # p must be a multiple of m
        raise ValueError(
            f"generation batch per_device_train_batch_size ({p}) x steps_per_generation / "
            f"gradient_accumulation_steps ({k}) x processes ({world}) = {p * k * world} completions "
            f"is not divisible by num_generations={G}: TRL's GRPOTrainer needs whole groups. "
            f"Nearest valid per_device_train_batch_size: {_nearest_multiples(p, m)} "
            f"(or set prompts_per_step: batch = prompts_per_step x num_generations)."
        )


def grpo_args(preset: str = "cpu", output_dir: str = "runs/trl_grpo", **overrides) -> dict:
    """GRPOConfig keyword arguments from a preset, our defaults and ``overrides``.

    ``overrides`` take TRL's names and ours: ``prompts_per_step`` becomes
    ``per_device_train_batch_size = prompts_per_step * num_generations / gradient_accumulation_steps``
    (one optimizer step sees prompts_per_step x G completions, as in the scratch loop);
    ``eval_every`` is dropped here (``MetricsCallback`` uses it). Unknown names raise.
    """
    if preset == "auto":
        preset = "t4" if torch.cuda.is_available() else "cpu"
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)} or 'auto'")
    unknown = set(overrides) - _trl_fields() - set(OURS_ONLY)
    if unknown:
        raise ValueError(f"unknown GRPO option(s) {sorted(unknown)}: neither trl.GRPOConfig fields "
                         f"nor sdpo_kit names {list(OURS_ONLY)}")
    args = {**BASE_ARGS, **PRESETS[preset], "output_dir": str(output_dir)}
    overrides = {k: v for k, v in overrides.items() if v is not None or k == "epsilon_high"}
    overrides.pop("eval_every", None)
    prompts_per_step = overrides.pop("prompts_per_step", None)
    args.update(overrides)
    if prompts_per_step is not None:
        if "per_device_train_batch_size" in overrides:
            raise ValueError("give prompts_per_step or per_device_train_batch_size, not both")
        total = int(prompts_per_step) * int(args["num_generations"])
        k = int(args.get("gradient_accumulation_steps") or 1)
        if total % k:
            raise ValueError(f"prompts_per_step x num_generations = {total} completions cannot be split "
                             f"into gradient_accumulation_steps={k} equal micro-batches")
        args["per_device_train_batch_size"] = total // k
    # one sdpo_kit step = one sampled batch and num_iterations optimizer passes over it;
    # TRL counts each pass as a step, so the same config gets mu x as many TRL steps
    mu = int(args.get("num_iterations") or 1)
    if mu > 1 and "max_steps" in overrides:
        args["max_steps"] = int(overrides["max_steps"]) * mu
    check_group_divisibility(args)
    return args


class MetricsCallback(TrainerCallback):
    """Writes the scratch loop's metric rows to ``output_dir/metrics.jsonl`` from TRL's logs.

    Runs ``eval_fn(model) -> float`` at step 0 (``on_train_begin``), every ``eval_every``
    steps and at the last step, adding ``eval/accuracy``. Each row also goes to every
    ``sinks`` callable (``LivePlot``, a printer...), as the scratch loop's callbacks get it.
    """

    def __init__(self, output_dir=None, eval_fn: Callable | None = None, eval_every: int = 0,
                 sinks: Sequence[Callable] = (), num_iterations: int = 1):
        self.path = Path(output_dir) / "metrics.jsonl" if output_dir else None
        self.mu = max(1, int(num_iterations))  # TRL optimizer steps per sdpo_kit step
        self.eval_fn, self.eval_every, self.sinks = eval_fn, eval_every, list(sinks)
        self.history: list[dict] = []
        self._last_eval_step = None
        self._pending: dict | None = None  # the row of the sdpo_kit step in progress
        self._t_last, self._last_row_step = time.perf_counter(), 0

    def _evaluate(self, model) -> float:
        was_training = model.training
        model.eval()
        try:
            return float(self.eval_fn(model))
        finally:
            model.train(was_training)

    def _log(self, row: dict) -> None:
        self.history.append(row)
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(row) + "\n")
        for sink in self.sinks:
            sink(row)

    def _step(self, global_step: int) -> int:
        """sdpo_kit's step (sampled batches) from TRL's global step (optimizer passes)."""
        return math.ceil(global_step / self.mu)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")
        if self.eval_fn is not None:
            self._last_eval_step = state.global_step
            self._log({"step": self._step(state.global_step), "eval/accuracy": self._evaluate(model)})
        self._t_last, self._last_row_step = time.perf_counter(), self._step(state.global_step)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        # TRL logs every optimizer pass; the reward only on the pass that sampled. One row per
        # sdpo_kit step: opened by the sampling pass, updated by the later passes (the loss and
        # clip stats of the last pass win, as in the scratch loop), written after the last pass.
        if not logs or is_train_summary(logs):
            return
        from ..plotting import metrics_from_trl_logs

        step = self._step(state.global_step)
        mapped = metrics_from_trl_logs(logs, step)
        mapped.pop("time/step_s", None)  # TRL's step_time leaves out the optimizer step; we time the wall
        if "reward" in logs or self._pending is None:
            self._pending = {"step": step}
        self._pending.update(mapped)
        if state.global_step % self.mu and state.global_step < state.max_steps:
            return  # more passes over this batch to come
        row, self._pending = self._pending, None
        if "reward/mean" not in row:
            return
        if args.beta == 0.0:  # TRL skips the KL without a reference model; the scratch loop logs 0
            row.setdefault("loss/kl", 0.0)
        now = time.perf_counter()
        row["time/step_s"] = (now - self._t_last) / max(1, step - self._last_row_step)
        last = state.global_step >= state.max_steps
        if self.eval_fn is not None and (last or (self.eval_every and step % self.eval_every == 0)):
            row["eval/accuracy"] = self._evaluate(model)
            self._last_eval_step = state.global_step
        self._log(row)
        self._t_last, self._last_row_step = time.perf_counter(), step  # evaluation kept out of s/step

    def on_train_end(self, args, state, control, model=None, **kwargs):
        # training stopped before max_steps (or the last step did not log): still evaluate at the end
        if self.eval_fn is not None and self._last_eval_step != state.global_step:
            self._last_eval_step = state.global_step
            self._log({"step": self._step(state.global_step), "eval/accuracy": self._evaluate(model)})


def build_trl_grpo_trainer(model, tokenizer, reward_funcs, train_dataset, *, preset: str = "cpu",
                           eval_fn: Callable | None = None, output_dir="runs/trl_grpo",
                           callbacks: Sequence = (), eval_every: int = 0, verbose: bool = True,
                           reward_weights: Sequence[float] | None = None, **grpo_overrides):
    """A ``trl.GRPOTrainer`` for ``model`` with sdpo_kit's rewards, presets and metrics file.

    Args:
        model, tokenizer: from ``models.load_policy`` (a PEFT model trains its adapter only).
        reward_funcs: one or more TRL-signature reward functions; wrapped with ``checked``.
        train_dataset: a ``datasets.Dataset`` or a list of row dicts with ``prompt`` and the
            columns the rewards need.
        preset: ``"cpu"``, ``"t4"`` or ``"auto"``.
        eval_fn: ``eval_fn(model) -> float``, e.g. held-out greedy accuracy; logged as
            ``eval/accuracy`` at step 0, every ``eval_every`` steps and at the end.
        callbacks: ``TrainerCallback`` instances go to the trainer; plain callables get each
            metrics row (the scratch loop's callback interface, e.g. a ``LivePlot``).
        verbose: False drops transformers' progress bar / log printer.
        grpo_overrides: ``GRPOConfig`` fields or our names (see ``grpo_args``).

    The trainer's ``metrics_callback.history`` holds the rows written to ``metrics.jsonl``.
    """
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    if isinstance(train_dataset, list):
        train_dataset = datasets.Dataset.from_list(train_dataset)
    reward_funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    check_columns(train_dataset.column_names, reward_funcs)
    args = grpo_args(preset, output_dir, **grpo_overrides)
    if reward_weights is not None:
        args["reward_weights"] = list(reward_weights)
    trainer_cbs = [c for c in callbacks if isinstance(c, TrainerCallback)
                   or (isinstance(c, type) and issubclass(c, TrainerCallback))]
    sinks = [c for c in callbacks if c not in trainer_cbs]
    metrics_cb = MetricsCallback(output_dir, eval_fn, eval_every, sinks, args.get("num_iterations") or 1)
    trainer = GRPOTrainer(
        model=model, reward_funcs=[checked(f) for f in reward_funcs], args=GRPOConfig(**args),
        train_dataset=train_dataset, processing_class=tokenizer, callbacks=[metrics_cb, *trainer_cbs],
    )
    if not verbose:
        from transformers.trainer import DEFAULT_PROGRESS_CALLBACK  # NotebookProgressCallback in Jupyter
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for cb in (ProgressCallback, PrinterCallback, DEFAULT_PROGRESS_CALLBACK):
            trainer.remove_callback(cb)
    trainer.metrics_callback = metrics_cb
    return trainer
