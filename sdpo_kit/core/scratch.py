"""The scaffold every scratch trainer stands on, so an algorithm file holds only its ``step()``.

    RunConfig       the knobs every trainer has: steps, prompts per step, optimizer, schedule,
                    evaluation and checkpoint cadence, seed, output_dir
    RowSampler      shuffled passes over the train rows, seeded, with a position to resume from
                    (``check_enough_rows``: at least one step's prompts_per_step rows)
    make_optimizer  AdamW over the trainable parameters + a constant or linear-decay schedule
    should_evaluate step 0, every ``eval_every`` steps, the last step
    ScratchTrainer  the loop: evaluate, step, log (``metrics.MetricsSink``), checkpoint, resume
                    (a changed max_steps is refused when the schedule decays over it), in the
                    precision ``core.precision`` chooses from the device (``mixed_precision``);
                    sampled completions to ``completions.jsonl`` (``core.completions``), the rows
                    to the trackers ``report_to`` names (``core.trackers``), a warning when the
                    run has nothing to learn from (``metrics.ZeroSignalWatch``), and a clean stop
                    after the current step, with a checkpoint, when a callback asks for one
                    (its ``stop_requested`` is true: the dashboard's stop button)

A subclass implements ``step() -> dict`` (one sampled batch and its optimizer passes; it calls
``self.next_rows()`` and ``self.optimizer_step(loss)``) and, if it keeps state of its own that a
resumed run needs, ``extra_state()`` / ``load_extra_state(state)``. ``step()`` hands the batch's
completions to ``self.record_completions(prompt=..., completion=..., reward=..., ...)``.

Mixed precision (``mixed_precision="auto"``): fp32 on a CPU, exactly as before it existed (no
autocast, the same operations in the same order); on CUDA bf16 autocast from compute capability
8.0, else fp16 autocast with a gradient scaler, the trainable weights in fp32 (``core.precision``).

Left out on purpose: gradient accumulation and distributed training (the TRL-backed trainers have
them); a scratch trainer stays one readable file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from sdpo_kit.core import checkpoint as ckpt
from sdpo_kit.core.completions import CompletionLog
from sdpo_kit.core.metrics import MetricsSink, ZeroSignalWatch
from sdpo_kit.core.precision import MIXED_PRECISION, MixedPrecision, device_precision, model_device, upcast_trainable
from sdpo_kit.core.trackers import Trackers, check_report_to
from sdpo_kit.core.utils import eval_mode

LR_SCHEDULES = ("constant", "linear")


@dataclass
class RunConfig:
    """Knobs every trainer shares (names follow TRL's where TRL has them)."""

    max_steps: int = 100
    prompts_per_step: int = 16
    learning_rate: float = 1e-3
    lr_scheduler_type: str = "constant"  # or "linear": decays to 0 by the last update (TRL's default)
    max_grad_norm: float = 1.0
    eval_every: int = 25              # 0: only at step 0 and at the end
    save_steps: int = 0               # write output_dir/checkpoint-N every N steps; 0: never
    save_total_limit: int | None = None  # keep only the newest N checkpoints; None: all
    save_last: bool = True            # a finished run keeps checkpoint-<max_steps> (output_dir set): --resume-from
                                      # RUN_DIR extends it
    seed: int = 0
    output_dir: str | None = None     # metrics.jsonl and checkpoints go there when set
    mixed_precision: str = "auto"     # auto | no | fp16 | bf16 (core.precision; auto is fp32 on a CPU)
    log_completions_every: int = 10   # output_dir/completions.jsonl every N steps; 0: never
    report_to: str | list = "none"    # none | tensorboard | trackio | wandb, or a list (TRL's report_to)
    zero_signal_fraction: float = 0.9  # warn when at least this share of the groups has one reward ...
    zero_signal_steps: int = 10       # ... for this many steps in a row (metrics.ZeroSignalWatch); 0: never

    def __post_init__(self):
        if self.max_steps < 1 or self.prompts_per_step < 1:
            raise ValueError("max_steps and prompts_per_step must be >= 1")
        if self.lr_scheduler_type not in LR_SCHEDULES:
            raise ValueError(f"lr_scheduler_type must be one of {LR_SCHEDULES}, got {self.lr_scheduler_type!r}")
        if self.eval_every < 0 or self.save_steps < 0:
            raise ValueError("eval_every and save_steps must be >= 0")
        if self.save_steps and not self.output_dir:
            raise ValueError("save_steps > 0 needs an output_dir to write checkpoints to")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {MIXED_PRECISION}, got {self.mixed_precision!r}")
        if self.log_completions_every < 0:
            raise ValueError(f"log_completions_every must be >= 0, got {self.log_completions_every}")
        check_report_to(self.report_to)
        ZeroSignalWatch(self.zero_signal_fraction, self.zero_signal_steps)   # raises on a bad value


def check_enough_rows(num_rows: int, prompts_per_step: int) -> None:
    """ValueError unless the train rows fill one step's batch of ``prompts_per_step`` distinct
    prompts. Fewer rows would repeat a prompt within a step here, and train 0 steps on the TRL
    backend (its sampler drops an incomplete batch), so one config fails the same way on both."""
    if num_rows < prompts_per_step:
        raise ValueError(f"train_rows has {num_rows} row(s), but one step samples prompts_per_step={prompts_per_step} "
                         f"distinct prompts: give at least {prompts_per_step} rows or set prompts_per_step <= "
                         f"{max(1, num_rows)}")


class RowSampler:
    """``batch_size`` rows at a time from shuffled passes over ``rows`` (seeded, resumable)."""

    def __init__(self, rows: Sequence[dict], batch_size: int, seed: int):
        if not rows:
            raise ValueError("train_rows is empty")
        self.rows, self.batch_size = list(rows), batch_size
        self._rng = random.Random(seed)
        self._order: list[int] = []

    def next_rows(self) -> list[dict]:
        out = []
        while len(out) < self.batch_size:
            if not self._order:  # a new pass over the data
                self._order = list(range(len(self.rows)))
                self._rng.shuffle(self._order)
            out.append(self.rows[self._order.pop()])
        return out

    def state_dict(self) -> dict:
        return {"order": list(self._order), "rng": ckpt._to_lists(self._rng.getstate())}

    def load_state_dict(self, state: dict) -> None:
        self._order = list(state["order"])
        self._rng.setstate(ckpt._to_tuples(state["rng"]))


def make_optimizer(model, learning_rate: float, lr_scheduler_type: str, total_updates: int):
    """AdamW (no weight decay) over the trainable parameters, and its schedule: constant, or
    linear decay to 0 over ``total_updates`` optimizer steps (TRL's ``linear``)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.0)
    linear = lr_scheduler_type == "linear"
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda t: max(0.0, 1.0 - t / total_updates) if linear else 1.0)
    return optimizer, scheduler


def should_evaluate(step: int, max_steps: int, eval_every: int) -> bool:
    """Evaluate at step 0, every ``eval_every`` steps and at the last step."""
    return step == 0 or step == max_steps or bool(eval_every and step % eval_every == 0)


class ScratchTrainer:
    """The loop around a subclass's ``step()``.

    Args:
        model, tokenizer: a causal LM (a PEFT model trains its adapter) and its tokenizer.
        train_rows: dicts with ``prompt`` and whatever columns the algorithm needs.
        config: a ``RunConfig`` (subclass).
        eval_fn: ``eval_fn(model) -> float``, e.g. a task's held-out greedy accuracy; run in
            eval mode at step 0, every ``eval_every`` steps and at the end (``eval/accuracy``).
        callbacks: callables ``cb(row)`` run after each logged row (``LivePlot``, ``Dashboard``, a
            printer...); one with ``on_completions(step, rows)`` also gets each step's sampled
            completions, and one whose ``stop_requested`` turns true ends the run after that step.
    """

    @property
    def updates_per_step(self) -> int:
        """Optimizer steps per ``step()`` (the linear schedule's length is max_steps x this)."""
        return 1

    def __init__(self, model, tokenizer, train_rows: Sequence[dict], config: RunConfig, *,
                 eval_fn: Callable | None = None, callbacks: Sequence[Callable] = ()):
        if train_rows:  # an empty list is RowSampler's to name
            check_enough_rows(len(train_rows), config.prompts_per_step)
        self.model, self.tokenizer, self.config = model, tokenizer, config
        self.eval_fn = eval_fn
        # chosen from the model's device; the trainable weights go to fp32 before the optimizer holds them
        self.precision = device_precision(model_device(model), config.mixed_precision)
        upcast_trainable(model)
        self.amp = MixedPrecision(self.precision)
        self.skipped_updates = 0  # optimizer steps the fp16 scaler skipped (an inf / NaN gradient)
        self.phase_s: dict[str, float] = {}   # this step's seconds per part (``phase``)
        self.sampler = RowSampler(train_rows, config.prompts_per_step, config.seed)
        self.rows = self.sampler.rows
        self.optimizer, self.scheduler = make_optimizer(
            model, config.learning_rate, config.lr_scheduler_type, config.max_steps * self.updates_per_step)
        self.callbacks = list(callbacks)
        self.trackers = Trackers(config.report_to, config.output_dir, dataclasses.asdict(config))
        watch = ZeroSignalWatch(config.zero_signal_fraction, config.zero_signal_steps, config.output_dir,
                                config.log_completions_every)
        self.sink = MetricsSink(config.output_dir, [*self.callbacks, self.trackers], watch)
        self.history = self.sink.history
        self.completion_log = CompletionLog(config.output_dir, config.log_completions_every, self.callbacks)
        self.current_step = 0  # the step train() is running (record_completions files rows under it)
        self.stopped_at: int | None = None  # the step a stop request ended the run after

    # --- what a subclass writes ---------------------------------------------------------
    def step(self) -> dict:
        """One sampled batch and its optimizer passes; returns the step's metrics row."""
        raise NotImplementedError

    def extra_state(self) -> dict:
        """JSON-friendly state of the subclass a resumed run needs (none by default)."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        pass

    def save_extra_files(self, folder: Path) -> None:
        """Write files of the subclass's own into a checkpoint folder (none by default)."""

    def load_extra_files(self, folder: Path) -> None:
        """Read them back on resume."""

    # --- helpers for step() -------------------------------------------------------------
    def next_rows(self) -> list[dict]:
        return self.sampler.next_rows()

    def record_completions(self, **columns) -> None:
        """The step's sampled completions, one list per column (``core.completions``): prompt,
        completion, reward, reward/<name>, feedback, ...; kept only when a file or listener wants them."""
        self.completion_log.add(self.current_step, **columns)

    def completions_wanted(self) -> bool:
        """Whether this step's completions go anywhere (skip extra work, such as decoding, if not)."""
        return self.completion_log.wanted(self.current_step)

    def stop_requested(self) -> bool:
        """True when a callback asks to stop (``stop_requested``: the dashboard's stop button)."""
        return any(getattr(cb, "stop_requested", False) for cb in self.callbacks)

    def optimizer_step(self, loss: torch.Tensor) -> None:
        """zero, backward, clip the gradient norm to ``max_grad_norm``, step, schedule, zero (in fp16 the
        loss is scaled and a step with an inf / NaN gradient skipped: ``core.precision``). Zeroing first:
        a gradient already on the model (a backward of the caller's own) must not add to this step's."""
        with self.phase("backward"):
            self.optimizer.zero_grad(set_to_none=True)
            self.amp.backward(loss)
            if not self.amp.step(self.optimizer, self.model.parameters(), self.config.max_grad_norm):
                self.skipped_updates += 1
            with warnings.catch_warnings():   # a skipped fp16 step still advances the schedule, on purpose
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)` before")
                self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)

    @contextlib.contextmanager
    def phase(self, name: str):
        """Time a part of the step: the row gets ``time/<name>_s`` (the seconds summed over the step), so a
        run shows where its time goes (sample, score, forward, backward: ``GRPOScratchTrainer`` times those)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phase_s[name] = self.phase_s.get(name, 0.0) + time.perf_counter() - t0

    @property
    def learning_rate(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    # --- the loop -----------------------------------------------------------------------
    def evaluate(self) -> float | None:
        if self.eval_fn is None:
            return None
        with eval_mode(self.model), self.amp.autocast():
            return float(self.eval_fn(self.model))

    def log(self, row: dict) -> None:
        self.sink.log(row)

    def train(self, resume_from_checkpoint: str | Path | None = None) -> list[dict]:
        """Run to ``max_steps``; from ``resume_from_checkpoint`` (a ``checkpoint-N`` folder) the
        run continues at step N + 1. Returns the logged rows (also ``self.history``)."""
        cfg = self.config
        torch.manual_seed(cfg.seed)
        start = 0
        state = None
        if resume_from_checkpoint is not None:
            self.check_config_change(ckpt.read_state(resume_from_checkpoint).get("config", {}))
            state = ckpt.load_checkpoint(resume_from_checkpoint, model=self.model, optimizer=self.optimizer,
                                         scheduler=self.scheduler)
            start = int(state["step"])
            self.sampler.load_state_dict(state["sampler"])
            self.load_extra_state(state.get("extra", {}))
            self.amp.load_state_dict(state.get("scaler", {}))
            self.load_extra_files(Path(resume_from_checkpoint))
        self.optimizer.zero_grad(set_to_none=True)   # no gradient left on the model reaches the first step
        self.sink.start(state["history"] if state else ())
        self.completion_log.start(start)
        self.trackers.start()
        if cfg.output_dir:
            out = Path(cfg.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / "trainer_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2))
        if state is not None:
            ckpt.set_rng_state(state["rng"])  # last: nothing above may draw from them
        elif self.eval_fn is not None:
            self.log({"step": 0, "eval/accuracy": self.evaluate()})
        self.model.train()
        try:
            for step in range(start + 1, cfg.max_steps + 1):
                self.current_step = step
                self.phase_s = {}
                t0 = time.perf_counter()
                with self.amp.autocast():  # a null context in fp32
                    row = {"step": step, **self.step()}
                row.setdefault("time/step_s", time.perf_counter() - t0)
                row.update({f"time/{k}_s": v for k, v in self.phase_s.items()})
                if self.eval_fn is not None and should_evaluate(step, cfg.max_steps, cfg.eval_every):
                    t_eval = time.perf_counter()
                    row["eval/accuracy"] = self.evaluate()
                    row["time/eval_s"] = time.perf_counter() - t_eval
                self.completion_log.flush(step)  # before the row: a dashboard shows both at once
                self.log(row)
                stop = step < cfg.max_steps and self.stop_requested()
                due = cfg.save_steps and (step % cfg.save_steps == 0 or step == cfg.max_steps)
                last = step == cfg.max_steps and cfg.save_last
                if due or ((stop or last) and cfg.output_dir):
                    self.save_checkpoint(step)
                if stop:  # asked between steps: the step ran whole, its checkpoint resumes the run
                    self.stopped_at = step
                    if not cfg.output_dir:
                        warnings.warn(f"stopped after step {step} on request; no output_dir, so no checkpoint "
                                      f"to resume from", stacklevel=2)
                    break
        finally:
            self.trackers.close()
        return self.history

    def save_checkpoint(self, step: int) -> Path:
        """``output_dir/checkpoint-<step>/`` (see ``core.checkpoint``)."""
        state = {"history": self.history, "sampler": self.sampler.state_dict(), "extra": self.extra_state(),
                 "config": dataclasses.asdict(self.config)}
        if self.amp.scaler is not None:  # fp16 only: fp32 checkpoints stay as they were
            state["scaler"] = self.amp.state_dict()
        return ckpt.save_checkpoint(self.config.output_dir, step, model=self.model, optimizer=self.optimizer,
                                    scheduler=self.scheduler, state=state, tokenizer=self.tokenizer,
                                    total_limit=self.config.save_total_limit, write_extra=self.save_extra_files)

    @property
    def schedule_depends_on_max_steps(self) -> bool:
        """Whether the learning-rate schedule is laid out over max_steps (linear decay is)."""
        return self.config.lr_scheduler_type != "constant"

    def check_config_change(self, saved: dict) -> None:
        """A resumed run reproduces the first only with the same config: refuse another max_steps
        when the schedule is laid out over it (the rest of the run would follow another schedule),
        and warn about any other difference that changes the run."""
        now = dataclasses.asdict(self.config)
        if "max_steps" in saved and saved["max_steps"] != now["max_steps"] and self.schedule_depends_on_max_steps:
            raise ValueError(
                f"the checkpoint was written by a run with max_steps={saved['max_steps']}, this run has "
                f"max_steps={now['max_steps']}: its learning-rate schedule decays over max_steps, so the resumed "
                f"steps would follow another schedule than the interrupted run's. Resume with "
                f"max_steps={saved['max_steps']} (or train with a constant schedule to extend a run)")
        harmless = {"max_steps", "eval_every", "save_steps", "save_total_limit", "save_last", "output_dir",
                    "log_completions_every", "report_to", "zero_signal_fraction", "zero_signal_steps"}
        changed = sorted(k for k in saved if k not in harmless and k in now and saved[k] != now[k])
        if changed:
            warnings.warn(f"resuming with a config that differs from the checkpoint's in {changed}: "
                          f"the run will not repeat the interrupted one", stacklevel=3)
