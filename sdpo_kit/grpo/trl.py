"""GRPO through TRL: a thin builder around ``trl.GRPOTrainer`` (TRL 1.15 and 1.16).

``build_trl_grpo_trainer(model, tokenizer, reward_funcs, train_dataset, preset=..., ...)``
returns a ready ``trl.GRPOTrainer``; call ``.train()`` on it (or ``trl_base.train_trl`` to
resume with the metrics file carried over). The stock class is used, not a subclass, so
Unsloth's patched ``GRPOTrainer`` (Colab's fast path) is the one that runs. What it adds:

* presets (``trl_base.PRESETS``: ``"cpu"``, ``"t4"``, ``"t4_vllm"``, ``"auto"``) and base arguments;
  ``mixed_precision`` (the scratch loops' knob) sets TRL's ``fp16`` / ``bf16`` when not ``"auto"``
  (``"auto"``: the preset's); vLLM asked for where it cannot run falls back with a warning
  (``core.fast_generation.guard_trl_vllm``);
* our config names mapped to TRL's (``grpo_args``): ``prompts_per_step`` prompts x
  ``num_generations`` completions per optimizer step, like the scratch loop; ``max_steps`` and
  ``save_steps`` count sampled batches (x mu for TRL, which counts passes); the rest
  (``learning_rate``, ``temperature``, ``max_completion_length``, ``beta``, ``loss_type``,
  ``epsilon``, ``epsilon_high``, ``scale_rewards``, ``num_iterations``, ``seed``, ...) share
  TRL's names. The learning rate is constant unless ``lr_scheduler_type`` says otherwise (TRL
  defaults to linear decay), as in the scratch loop, so both backends match;
* reward functions wrapped with ``rewards.checked`` (a reward that raises or returns NaN / inf
  fails naming the function); dataset columns checked up front (``rewards.check_columns``);
* a batch that is not a whole number of groups fails here, before TRL, naming the nearest
  valid sizes (``trl_base.check_group_divisibility``), and so does a dataset with fewer rows
  than one step's distinct prompts, which TRL would train for 0 steps (``trl_base.check_enough_rows``);
* ``trl_base.MetricsCallback``: ``output_dir/metrics.jsonl`` with the scratch loop's keys, and the
  scratch loop's warning when the run has nothing to learn from (``metrics.ZeroSignalWatch``);
* ``trl_base.NeutralGenerationDefaults``: the model's own generation defaults kept out of sampling.

``GRPOTRLConfig`` is the same knobs as the scratch loop's ``GRPOFields`` plus ``preset`` and
``trl_args`` (any other ``trl.GRPOConfig`` field); the CLI builds the trainer from it.

Left out on purpose: vLLM's server mode, multi-GPU launch, TRL's own eval loop (``eval_fn`` is ours).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from sdpo_kit.core.distributed import is_main, world_size
from sdpo_kit.core.fast_generation import guard_trl_vllm
from sdpo_kit.core.metrics import ZeroSignalWatch
from sdpo_kit.core.trl_base import (
    BASE_ARGS,
    MetricsCallback,
    NeutralGenerationDefaults,
    check_enough_rows,
    check_group_divisibility,
    check_trl_runs_on,
    cpu_args_on_gpu,
    quiet,
    resolve_preset,
    split_callbacks,
)
from sdpo_kit.grpo.config import (
    SAMPLING_ON_TRL,
    GRPOTRLConfig,
)
from sdpo_kit.rewards import check_columns, checked

# config keys TRL does not know
OURS_ONLY = ("prompts_per_step", "eval_every", "mixed_precision", "log_completions_every", "zero_signal_fraction",
             "zero_signal_steps", "sampling_dtype", "save_last")
DEFAULT_ARGS = {"per_device_train_batch_size": 64, "num_generations": 8}


def _trl_fields(args_class=None) -> set[str]:
    if args_class is None:
        from trl import GRPOConfig as args_class

    return {f.name for f in dataclasses.fields(args_class)}


def grpo_args(preset: str = "cpu", output_dir: str = "runs/trl_grpo", *, args_class=None, **overrides) -> dict:
    """GRPOConfig keyword arguments from a preset, our defaults and ``overrides``.

    ``overrides`` take TRL's names and ours: ``prompts_per_step`` becomes
    ``per_device_train_batch_size = prompts_per_step * num_generations / gradient_accumulation_steps``
    (one optimizer step sees prompts_per_step x G completions, as in the scratch loop);
    ``max_steps`` and ``save_steps`` count sdpo_kit steps (sampled batches; TRL counts each of
    the mu passes); ``eval_every`` is dropped here (``MetricsCallback`` uses it). Unknown names raise.
    ``args_class``: the TRL config class the names are checked against (default ``trl.GRPOConfig``;
    a subclass such as ``VAPORTRLArgs`` adds its fields).
    """
    unknown = set(overrides) - _trl_fields(args_class) - set(OURS_ONLY)
    if unknown:
        name = args_class.__name__ if args_class is not None else "trl.GRPOConfig"
        raise ValueError(f"unknown GRPO option(s) {sorted(unknown)}: neither {name} fields "
                         f"nor sdpo_kit names {list(OURS_ONLY)}")
    args = {**BASE_ARGS, **DEFAULT_ARGS, **resolve_preset(preset), "output_dir": str(output_dir)}
    overrides = {k: v for k, v in overrides.items() if v is not None or k == "epsilon_high"}
    for key in ("eval_every", "log_completions_every", "zero_signal_fraction", "zero_signal_steps"):
        overrides.pop(key, None)  # ours, read by MetricsCallback (evaluations, completions.jsonl, ZeroSignalWatch)
    prompts_per_step = overrides.pop("prompts_per_step", None)
    save_last = overrides.pop("save_last", False)   # ours: a checkpoint at the last step (TRL's save_steps)
    if overrides.pop("sampling_dtype", "float32") == "bfloat16":   # GRPOTRLConfig refuses it too
        raise ValueError(SAMPLING_ON_TRL)
    mixed_precision = overrides.pop("mixed_precision", "auto")
    if mixed_precision != "auto":  # the scratch loops' knob, in transformers' flags
        args.update(fp16=mixed_precision == "fp16", bf16=mixed_precision == "bf16")
    args.update(overrides)
    if prompts_per_step is not None:
        if "per_device_train_batch_size" in overrides:
            raise ValueError("give prompts_per_step or per_device_train_batch_size, not both")
        total = int(prompts_per_step) * int(args["num_generations"])
        k, n = int(args.get("gradient_accumulation_steps") or 1), world_size()   # n: processes (torchrun)
        if total % (k * n):
            raise ValueError(f"prompts_per_step x num_generations = {total} completions cannot be split "
                             f"into gradient_accumulation_steps={k} equal micro-batches on each of {n} processes")
        args["per_device_train_batch_size"] = total // (k * n)   # the step's batch, shared by the processes
    # one sdpo_kit step = one sampled batch and num_iterations optimizer passes over it;
    # TRL counts each pass as a step, so the same config gets mu x as many TRL steps
    mu = int(args.get("num_iterations") or 1)
    if "max_steps" in overrides:
        args["max_steps"] = int(overrides["max_steps"]) * mu
    if overrides.get("save_steps"):
        args.update(save_strategy="steps", save_steps=int(overrides["save_steps"]) * mu)
    elif save_last and args.get("max_steps", -1) > 0:   # one checkpoint, at the last step
        args.update(save_strategy="steps", save_steps=int(args["max_steps"]))
    elif "save_steps" in overrides:  # 0: no checkpoints (TRL would take 0 as "every step")
        args.pop("save_steps")
        args["save_strategy"] = "no"
    check_group_divisibility(args)
    return guard_trl_vllm(args)


def build_trl_grpo_trainer(model, tokenizer, reward_funcs, train_dataset, *, preset: str = "cpu",
                           eval_fn: Callable | None = None, output_dir="runs/trl_grpo",
                           callbacks: Sequence = (), eval_every: int = 0, log_completions_every: int = 10,
                           verbose: bool = True,
                           reward_weights: Sequence[float] | None = None, trainer_class=None, args_class=None,
                           **grpo_overrides):
    """A ``trl.GRPOTrainer`` for ``model`` with sdpo_kit's rewards, presets and metrics file.

    Args:
        model, tokenizer: from ``models.load_policy`` (a PEFT model trains its adapter only).
        reward_funcs: one or more TRL-signature reward functions; wrapped with ``checked``.
        train_dataset: a ``datasets.Dataset`` or a list of row dicts with ``prompt`` and the
            columns the rewards need.
        preset: ``"cpu"``, ``"t4"``, ``"t4_vllm"`` or ``"auto"``.
        eval_fn: ``eval_fn(model) -> float``, e.g. held-out greedy accuracy; logged as
            ``eval/accuracy`` at step 0, every ``eval_every`` steps and at the end.
        log_completions_every: the sampled batch to ``output_dir/completions.jsonl`` every N steps (0: never).
        callbacks: ``TrainerCallback`` instances go to the trainer; plain callables get each
            metrics row (the scratch loop's callback interface, e.g. a ``LivePlot`` or a
            ``Dashboard``: its completions table and stop button work here too).
        verbose: False drops transformers' progress bar / log printer.
        trainer_class, args_class: a ``GRPOTrainer`` subclass and its config class (VAPOR's);
            default ``trl.GRPOTrainer`` / ``trl.GRPOConfig``, looked up now.
        grpo_overrides: ``GRPOConfig`` fields or our names (see ``grpo_args``).

    The trainer's ``metrics_callback.history`` (also ``trainer.history``) holds the rows
    written to ``metrics.jsonl``.
    """
    import datasets
    from trl import GRPOConfig, GRPOTrainer  # looked up now: Unsloth may have patched trl since import

    trainer_class, args_class = trainer_class or GRPOTrainer, args_class or GRPOConfig

    if isinstance(train_dataset, list):
        train_dataset = datasets.Dataset.from_list(train_dataset)
    reward_funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    check_columns(train_dataset.column_names, reward_funcs)
    args = grpo_args(preset, output_dir, args_class=args_class, **grpo_overrides)
    args = cpu_args_on_gpu(args)   # trl 1.15 beside a GPU: the 'cpu' preset trains there
    check_trl_runs_on("cpu" if args.get("use_cpu") or not torch.cuda.is_available() else "cuda")
    if reward_weights is not None:
        args["reward_weights"] = list(reward_weights)
    trl_config = args_class(**args)
    check_enough_rows(len(train_dataset) if hasattr(train_dataset, "__len__") else None, trl_config)
    trainer_cbs, sinks = split_callbacks(callbacks)
    ours = output_dir if is_main() else None   # several processes: our files come from the main one
    watch = ZeroSignalWatch(grpo_overrides.get("zero_signal_fraction", 0.9), grpo_overrides.get("zero_signal_steps", 10),
                            ours, log_completions_every)
    metrics_cb = MetricsCallback(ours, eval_fn, eval_every, sinks, args.get("num_iterations") or 1,
                                 log_completions_every, watch)
    trainer = trainer_class(
        model=model, args=trl_config,
        # the first reward also logs each row's reference answer to the completions table
        reward_funcs=[checked(f, log_columns=("answer",) if i == 0 else ()) for i, f in enumerate(reward_funcs)],
        train_dataset=train_dataset, processing_class=tokenizer,
        callbacks=[NeutralGenerationDefaults(), metrics_cb, *trainer_cbs],
    )
    if not verbose:
        quiet(trainer)
    trainer.metrics_callback = metrics_cb
    metrics_cb.trainer = trainer  # its last sampled batch feeds completions.jsonl (core.completions.trl_samples)
    trainer.history = metrics_cb.history
    return trainer


def build_from_config(model, tokenizer, reward_funcs, train_rows, config: GRPOTRLConfig, *,
                      eval_fn: Callable | None = None, callbacks: Sequence = (),
                      reward_weights: Sequence[float] | None = None, verbose: bool = False,
                      trainer_class=None, args_class=None):
    """``build_trl_grpo_trainer`` from a ``GRPOTRLConfig`` (what the CLI and the registry call).
    Every field of the config except ``preset`` and ``trl_args`` is a TRL argument (ours mapped);
    ``eval_every`` and ``log_completions_every`` reach the builder's own keywords of those names."""
    knobs = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in ("preset", "trl_args")}
    output_dir = knobs.pop("output_dir") or "runs/trl_grpo"
    return build_trl_grpo_trainer(model, tokenizer, reward_funcs, train_rows, preset=config.preset,
                                  eval_fn=eval_fn, output_dir=output_dir, callbacks=callbacks, verbose=verbose,
                                  reward_weights=reward_weights,
                                  trainer_class=trainer_class, args_class=args_class,
                                  **{**knobs, **config.trl_args})
