"""What every TRL-backed trainer shares: presets, base arguments, checks and the metrics callback.

* ``PRESETS``: ``"cpu"`` (use_cpu, bf16 and fp16 off, no gradient checkpointing), ``"t4"``
  (16 bits: fp16 on a T4, bf16 from compute capability 8.0; gradient checkpointing; LoRA / 4-bit / Unsloth
  come from ``models.load_policy``) and
  ``"t4_vllm"`` (the T4 preset generating with vLLM colocated, 0.35 of the GPU: see
  ``core.fast_generation``, which drops it with a warning on a CPU or without vllm);
  ``resolve_preset("auto")`` picks ``"t4"`` when CUDA is there, else ``"cpu"``.
* ``BASE_ARGS``: log every step, no trackers unless ``report_to`` names them (passed to TRL), keep the answer columns for the rewards, a
  constant learning rate unless asked (the scratch loop's default).
* ``check_group_divisibility``: a batch that is not a whole number of groups fails before TRL,
  naming the nearest valid sizes; ``check_enough_rows``: a dataset smaller than one step's
  distinct prompts fails too (TRL would train 0 steps).
* ``NeutralGenerationDefaults``: the policy's own ``generation_config`` swapped for a neutral one
  while TRL trains, so TRL samples softmax(logits / T) as the scratch loop does (a hub model's
  ``no_repeat_ngram_size`` or ``min_p`` would otherwise reach TRL's sampler: tests/test_sampling_trl.py).
* ``MetricsCallback``: TRL's logs -> the scratch loop's rows (``sdpo_kit.core.metrics``), one row per
  sdpo_kit step, ``eval_fn`` at step 0 / every ``eval_every`` steps / the end; the rows also go
  into each TRL checkpoint, so a resumed run's ``metrics.jsonl`` holds the whole run; the batch's
  completions (``core.completions.trl_samples``) to ``completions.jsonl`` every
  ``log_completions_every`` steps and to listeners (the dashboard); and a clean stop, with a
  checkpoint, after the sdpo_kit step in which a sink's ``stop_requested`` turned true.
* ``train_trl(trainer, resume_from_checkpoint)``: ``Trainer.train(resume_from_checkpoint=...)``
  with the callback told where the earlier rows are; returns the rows. A max_steps other than
  the checkpoint's is refused when the learning-rate schedule is laid out over it.
* ``check_trl_runs_on(device)``: trl 1.15 (Unsloth's pin) computes GRPO's log-probs with a
  Triton kernel only, so its GRPOTrainer cannot run on a CPU; this says so before TRL crashes
  with ``'NoneType' object has no attribute 'apply'``. trl 1.16 falls back to torch off-GPU.
  ``cpu_args_on_gpu(args)``: beside a GPU, the ``cpu`` preset moves there on such a TRL.

TRL 1.15 and 1.16: every name imported from TRL here and in the algorithms' ``trl.py`` files
(``trl.GRPOConfig``, ``trl.GRPOTrainer``, ``TrainerCallback`` via transformers) is in the same place in
both, and ``trl.GRPOConfig`` has the same fields (only ``pad_to_multiple_of``'s default differs), so no
import needs a fallback today; a name that moves gets a ``try / except ImportError`` here.

Left out on purpose: vLLM's server mode, multi-GPU launch, TRL's own eval loop (``eval_fn`` is ours).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from transformers import TrainerCallback

from sdpo_kit.core.completions import CompletionLog, trl_samples
from sdpo_kit.core.fast_generation import VLLM_ARGS
from sdpo_kit.core.metrics import MetricsSink, is_train_summary, metrics_from_trl_logs, read_jsonl, write_jsonl
from sdpo_kit.core.precision import has_bf16
from sdpo_kit.core.sampling import neutral_generation_defaults
from sdpo_kit.core.utils import eval_mode

PRESETS = {
    "cpu": {"use_cpu": True, "bf16": False, "fp16": False, "gradient_checkpointing": False},
    # a T4 has no real bf16; gradient checkpointing trades compute for the 15 GB of memory
    "t4": {"bf16": False, "fp16": True, "gradient_checkpointing": True},
    # the same, generating with vLLM in the training process (core.fast_generation: the memory split)
    "t4_vllm": {"bf16": False, "fp16": True, "gradient_checkpointing": True, **VLLM_ARGS},
}
BASE_ARGS = {
    "report_to": "none", "logging_steps": 1, "save_strategy": "no", "remove_unused_columns": False,
    "lr_scheduler_type": "constant",
}
ROWS_FILE = "sdpo_kit_metrics.jsonl"  # our rows, written into each TRL checkpoint folder


def resolve_preset(preset: str, capability: tuple | None = None) -> dict:
    """The TRL arguments of a preset; ``"auto"`` is ``"t4"`` on CUDA, else ``"cpu"``. The GPU presets train in
    the 16 bits ``load_policy`` loads the model in: fp16 below compute capability 8.0 (a T4), bf16 from 8.0
    (an A100, an H100: Unsloth loads a bf16 model there and refuses fp16 training of it). ``capability``:
    stated, or read from the CUDA device when there is one."""
    if preset == "auto":
        preset = "t4" if torch.cuda.is_available() else "cpu"
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)} or 'auto'")
    args = dict(PRESETS[preset])
    if args.get("fp16"):
        if capability is None and torch.cuda.is_available():
            capability = torch.cuda.get_device_capability()
        if has_bf16(capability):
            args.update(fp16=False, bf16=True)
    return args


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


def check_enough_rows(num_rows: int | None, args) -> None:
    """ValueError when the dataset cannot fill one step's generation batch, before any model work.

    TRL's ``RepeatSampler`` cuts the shuffled rows into chunks of
    ``generation_batch_size / num_generations`` distinct prompts and drops the incomplete last
    chunk, so a dataset with fewer rows trains 0 steps, with only transformers' "stopping
    training at step 0" to say so. ``args``: the built ``GRPOConfig`` (its ``generation_batch_size``
    = per_device_train_batch_size x processes x steps_per_generation, resolved by TRL).
    ``num_rows`` None (an iterable dataset, no length) is not checked.
    """
    if num_rows is None:
        return
    G = int(args.num_generations)
    needed = int(args.generation_batch_size) // G
    if num_rows < needed:
        raise ValueError(
            f"train_dataset has {num_rows} row(s), but one step needs {needed} distinct prompts "
            f"(generation_batch_size {args.generation_batch_size} completions / num_generations {G}); TRL's sampler "
            f"drops an incomplete batch, so training would stop at step 0. Give at least {needed} rows, or set "
            f"prompts_per_step <= {num_rows} (or per_device_train_batch_size x gradient_accumulation_steps <= "
            f"{num_rows * G})."
        )


def trl_runs_on(device) -> bool:
    """Whether the installed TRL computes GRPO's log-probs on ``device``.

    TRL routes every log-prob through a fused head (``trl.trainer.utils._ChunkedLogProbFunction``).
    trl >= 1.16 uses its Triton kernel on CUDA / XPU and plain torch elsewhere (it has
    ``_use_triton``); trl 1.15 has only the Triton kernel, which needs a GPU (and is None
    without triton). A stand-in installed in its place (the tests' ``trl115_cpu_kernel``) passes.
    """
    if torch.device(device).type in ("cuda", "xpu"):
        return True
    import trl.trainer.utils as trl_utils

    if hasattr(trl_utils, "_use_triton"):
        return True
    try:
        from trl.kernels import ChunkedLogProbFunction as triton_kernel
    except ImportError:  # triton is not installed
        triton_kernel = None
    return getattr(trl_utils, "_ChunkedLogProbFunction", None) not in (None, triton_kernel)


def check_trl_runs_on(device) -> None:
    """RuntimeError when the installed TRL cannot compute log-probs on ``device`` (``trl_runs_on``)."""
    if not trl_runs_on(device):
        import trl

        raise RuntimeError(
            f"trl {trl.__version__}'s GRPOTrainer computes log-probs with a Triton kernel that needs a GPU, "
            f"so it cannot train on {torch.device(device).type}. On a CPU use trl 1.16 "
            f"(pip install 'trl==1.16.0'; sdpo_kit supports both) or backend: scratch.")


def cpu_args_on_gpu(args: dict) -> dict:
    """``args`` without ``use_cpu``, with a warning, when they ask for the CPU, the installed TRL cannot train
    there (trl 1.15, Unsloth's pin) and a GPU is there: the ``cpu`` preset (fp32, what the tiny lab runs)
    then trains on the GPU, as on a Colab T4 with the ``colab`` extra; else ``args`` unchanged."""
    if not (args.get("use_cpu") and torch.cuda.is_available()) or trl_runs_on("cpu"):
        return args
    import warnings

    import trl

    warnings.warn(f"trl {trl.__version__} cannot train on a CPU (its log-prob kernel is Triton's): the 'cpu' preset "
                  "trains on the GPU instead, in fp32", stacklevel=3)
    return {**args, "use_cpu": False}


def split_callbacks(callbacks: Sequence) -> tuple[list, list]:
    """(TrainerCallbacks for the trainer, plain callables that get each metrics row)."""
    trainer_cbs = [c for c in callbacks if isinstance(c, TrainerCallback)
                   or (isinstance(c, type) and issubclass(c, TrainerCallback))]
    return trainer_cbs, [c for c in callbacks if c not in trainer_cbs]


def quiet(trainer) -> None:
    """Drop transformers' progress bar / log printer (and Jupyter's progress table)."""
    from transformers.trainer import DEFAULT_PROGRESS_CALLBACK  # NotebookProgressCallback in Jupyter
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (ProgressCallback, PrinterCallback, DEFAULT_PROGRESS_CALLBACK):
        trainer.remove_callback(cb)


class NeutralGenerationDefaults(TrainerCallback):
    """The model's ``generation_config`` swapped for a neutral one from the start of training to its
    end (``sampling.neutral_generation_defaults``), then given back unchanged. TRL's GRPOTrainer
    sets temperature, top_p, top_k, repetition_penalty and min_p (None) in its own config and
    transformers fills every other knob, and a None, from the model's: the samples would leave the
    policy the loss assumes (off-policy) for a hub model whose config sets them."""

    def __init__(self):
        self._swap = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None and self._swap is None:
            self._swap = neutral_generation_defaults(model)
            self._swap.__enter__()

    def on_train_end(self, args, state, control, **kwargs):
        if self._swap is not None:
            self._swap.__exit__(None, None, None)
            self._swap = None


class MetricsCallback(TrainerCallback):
    """Writes the scratch loop's metric rows to ``output_dir/metrics.jsonl`` from TRL's logs.

    Runs ``eval_fn(model) -> float`` at step 0 (``on_train_begin``), every ``eval_every``
    steps and at the last step, adding ``eval/accuracy``. Each row also goes to every
    ``sinks`` callable (``LivePlot``, a printer...), as the scratch loop's callbacks get it.
    ``num_iterations`` (mu): TRL counts each optimizer pass as a step, sdpo_kit a sampled batch.
    ``trainer``: set once the trainer exists (the builders do); its last sampled batch goes to
    ``output_dir/completions.jsonl`` every ``log_completions_every`` steps and to the sinks that
    have ``on_completions``. A sink whose ``stop_requested`` turns true ends training after the
    current sdpo_kit step (all its mu passes) with a checkpoint that ``train_trl`` resumes.
    """

    def __init__(self, output_dir=None, eval_fn: Callable | None = None, eval_every: int = 0,
                 sinks: Sequence[Callable] = (), num_iterations: int = 1, log_completions_every: int = 0,
                 watch: Callable | None = None):
        self.sink = MetricsSink(output_dir, sinks, watch)
        self.history = self.sink.history
        self.sinks, self.output_dir = list(sinks), output_dir
        self.completions = CompletionLog(output_dir, log_completions_every, sinks)
        self.trainer = None
        self.stopped_at: int | None = None
        self.mu = max(1, int(num_iterations))
        self.eval_fn, self.eval_every = eval_fn, eval_every
        self.resume_rows: list[dict] | None = None  # set by train_trl when resuming
        self._last_eval_step = None
        self._pending: dict | None = None  # the row of the sdpo_kit step in progress
        self._t_last, self._last_row_step = time.perf_counter(), 0

    def _evaluate(self, model) -> float:
        with eval_mode(model):
            return float(self.eval_fn(model))

    def _step(self, global_step: int) -> int:
        """sdpo_kit's step (sampled batches) from TRL's global step (optimizer passes)."""
        return math.ceil(global_step / self.mu)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        resumed = state.global_step > 0
        self.sink.start(self.resume_rows if resumed and self.resume_rows else ())
        self.completions.start(self._step(state.global_step))
        if self.eval_fn is not None and not resumed:
            self._last_eval_step = state.global_step
            self.sink.log({"step": 0, "eval/accuracy": self._evaluate(model)})
        self._t_last, self._last_row_step = time.perf_counter(), self._step(state.global_step)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        # TRL logs every optimizer pass; the reward only on the pass that sampled. One row per
        # sdpo_kit step: opened by the sampling pass, updated by the later passes (the loss and
        # clip stats of the last pass win, as in the scratch loop), written after the last pass.
        if not logs or is_train_summary(logs):
            return
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
        if self.trainer is not None and self.completions.wanted(step):
            self.completions.add(step, **trl_samples(self.trainer))
            self.completions.flush(step)
        self.sink.log(row)
        self._t_last, self._last_row_step = time.perf_counter(), step  # evaluation kept out of s/step
        if not last and any(getattr(s, "stop_requested", False) for s in self.sinks):
            # asked for during the step or just now: the Trainer saves right after this log, then stops
            self.stopped_at = step
            control.should_training_stop = True
            control.should_save = bool(self.output_dir)

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if self.output_dir is not None and folder.is_dir():  # Trainer wrote it just before calling us (main only)
            write_jsonl(folder / ROWS_FILE, self.history)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        # training stopped before max_steps (or the last step did not log): still evaluate at the end
        if self.eval_fn is not None and self._last_eval_step != state.global_step:
            self._last_eval_step = state.global_step
            self.sink.log({"step": self._step(state.global_step), "eval/accuracy": self._evaluate(model)})


def schedule_depends_on_max_steps(args) -> bool:
    """Whether transformers lays the learning-rate schedule of ``args`` out over max_steps: every
    schedule but ``constant`` (and ``reduce_lr_on_plateau``), and ``constant_with_warmup`` when its
    warmup is a fraction of the run (``warmup_steps`` < 1, or transformers 4's ``warmup_ratio``)."""
    kind = str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type))
    if kind in ("constant", "reduce_lr_on_plateau"):
        return False
    if kind == "constant_with_warmup":
        warmup = float(getattr(args, "warmup_steps", 0) or 0)
        return 0 < warmup < 1 or bool(getattr(args, "warmup_ratio", 0))
    return True


def check_resume_max_steps(checkpoint_max_steps: int, args, num_iterations: int = 1) -> None:
    """ValueError when a resumed run changes max_steps under a schedule laid out over it.

    transformers restores the scheduler's step count but builds its schedule from the new
    ``max_steps``, so the rest of the run would follow another schedule than the interrupted
    run's, silently. ``checkpoint_max_steps`` and ``args.max_steps`` count TRL steps (optimizer
    passes); ``num_iterations`` (mu) turns them back into sdpo_kit steps for the message."""
    now = int(args.max_steps)
    if int(checkpoint_max_steps) == now or not schedule_depends_on_max_steps(args):
        return
    mu = max(1, int(num_iterations))
    kind = getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)
    raise ValueError(
        f"the checkpoint was written by a run with max_steps={checkpoint_max_steps // mu} (TRL's "
        f"{checkpoint_max_steps}), this run has max_steps={now // mu} (TRL's {now}): the {kind!r} learning-rate "
        f"schedule is laid out over max_steps, so the resumed steps would follow another schedule than the "
        f"interrupted run's. Resume with max_steps={checkpoint_max_steps // mu} (or train with "
        f"lr_scheduler_type='constant' to extend a run)")


def train_trl(trainer, resume_from_checkpoint: str | Path | None = None) -> list[dict]:
    """``trainer.train(resume_from_checkpoint=...)`` for a trainer built with a ``MetricsCallback``
    (``trainer.metrics_callback``); the checkpoint's rows are carried into the new metrics.jsonl.
    A max_steps other than the checkpoint's is refused when the schedule is laid out over it
    (``check_resume_max_steps``). Returns the rows (``trainer.metrics_callback.history``)."""
    cb = trainer.metrics_callback
    if resume_from_checkpoint is not None:
        path = Path(resume_from_checkpoint)
        if not (path / "trainer_state.json").exists():
            raise FileNotFoundError(f"{path} is not a TRL / transformers checkpoint (no trainer_state.json); "
                                    f"pass a folder like OUTPUT_DIR/checkpoint-N")
        saved = json.loads((path / "trainer_state.json").read_text())
        if saved.get("max_steps"):
            check_resume_max_steps(saved["max_steps"], trainer.args, cb.mu)
        cb.resume_rows = read_jsonl(path / ROWS_FILE) if (path / ROWS_FILE).exists() else None
    trainer.train(resume_from_checkpoint=str(resume_from_checkpoint) if resume_from_checkpoint else None)
    return cb.history
