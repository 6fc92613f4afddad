"""The training API: ``train(config)`` runs one job, as ``sdpo-kit train`` does.

    train(config, *, advantage_fn=None, loss_fn=None, distill_fn=None, gae_fn=None, overrides=None,
          resume_from=None, dashboard=None, config_path=None, command=None, show=0) -> summary dict
    checked_run(config, overrides, pieces) -> (cfg, task)   every check that needs no model
    run_checked(cfg, task, pieces, ...)     the run itself: policy, rewards, trainer, saved model
    set_threads(n, model_name)        torch CPU threads for a run (the config's, else 1 for the tiny lab)
    ProgressPrinter(max_steps, every)  the console line of a step's reward, loss and eval accuracy
    preflight_for(cfg)                 ``models.preflight`` for a run config (device, dtype, memory estimate)
    check_answer_rules(task, rewards)  warns when a reward reads answers with another rule than the task's

``config`` is a preset's name (``"first_run"``), a YAML file's path, a dict of its sections or a ``Config``. ``advantage_fn``, ``loss_fn``,
``distill_fn`` and ``gae_fn`` are your own pieces in place of the library's (``core.pieces``; which trainer
takes which: ``grpo/pieces.py``, ``sdpo/pieces.py``, ``ppo/pieces.py``): a piece the trainer does not take,
or a setting it cannot express, is a ``ConfigError`` before the model loads; a piece that raises or
returns the wrong shape stops the run at that call (``core.pieces.PieceError``).

``train`` builds the task (``registry.make_task``), the policy (``models.load_policy``) and the rewards
(``rewards.make_reward``; model-scored rewards score with the policy itself unless their ``scorer`` says
otherwise), then the trainer that ``(algorithm, backend)`` registers (``sdpo_kit.registry``), and runs it.
Every trainer writes the same files:

    D/metrics.jsonl      one JSON row per step: step, reward/mean, reward/std, loss, ...,
                         eval/accuracy at step 0, every trainer.eval_every steps and at the end
    D/completions.jsonl  every trainer.log_completions_every steps: each sampled completion with its
                         prompt, rewards, feedback (SDPO: teacher prompt); pandas.read_json(..., lines=True)
    D/runs/, D/wandb/    with report_to tensorboard / wandb (``cli.REPORT_TO_HELP`` says how to open each)
    D/checkpoint-N/      every trainer.save_steps steps and at the last one (trainer.save_last, on by
                         default): model or adapter, optimizer, scheduler, random states, step, sampler
                         position; resume_from continues there (a run folder: its newest checkpoint)
    D/run_info.json      the run's state: running, finished or failed with the error; the command, the
                         config's path, sdpo_kit's version and commit, start and end (``core.run_info``)
    D/traceback.txt      a failed run's whole traceback
    D/model/             the trained model (safetensors) or its LoRA adapter, and the tokenizer
    D/reward_curve.png   the live plot's last frame
    D/config.yaml        the config actually run (overrides applied)

Before training it prints the preflight (``core.preflight``: on a CPU one line, on CUDA the device,
the dtype it trains in and why, free memory and a peak-memory estimate), and it ends with
``held-out accuracy: before X -> after Y (+Z)`` and the wall time. Held-out evaluation reads answers
with the task's rule within the run's completion budget (``core.config.completion_budget``). A resumed
run starts from the same starting policy (a reference model is a copy of it), loads the checkpoint, and
logs steps N+1.. as the run that was not interrupted would have.

Named ``training``, not ``train``, so the module and its function keep different names. Left out on
purpose: argument parsing (``cli.py``) and sampled (pass@k) evaluation (``sdpo.multi_turn`` counts best-of-N).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path


def set_threads(n: int, model_name: str) -> int:
    """torch CPU threads: the config's count; else 1 for the tiny lab (its matmuls are too small
    to split: one thread runs the demo faster than two), all cores up to 4 otherwise.

    ``OMP_NUM_THREADS``, when the environment sets it, caps the count: whoever set it is sharing the
    cores (CI runs two notebooks at once on 2 cores with ``OMP_NUM_THREADS=1``), and a process that
    takes more threads than its share waits on OpenMP threads the other process keeps off the cores,
    and a real-model step then takes many times longer."""
    import torch

    n = n or (1 if model_name == "tiny-lab" else min(4, os.cpu_count() or 1))
    cap = os.environ.get("OMP_NUM_THREADS", "")
    if cap.isdigit() and int(cap) > 0:
        n = min(n, int(cap))
    torch.set_num_threads(n)
    return n


class ProgressPrinter:
    """A run's progress: on a terminal a tqdm bar over the steps (reward, loss and eval accuracy beside it, each
    evaluation also as a line); elsewhere (a log, a notebook) a line every ``every`` steps and on every row
    with an eval."""

    def __init__(self, max_steps: int, every: int, terminal: bool | None = None):
        from sdpo_kit.core.progress import on_terminal

        self.max_steps, self.every = max_steps, max(1, every)
        self.bar = None
        if on_terminal() if terminal is None else terminal:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=max_steps, desc="train", unit="step", dynamic_ncols=True)

    def __call__(self, row: dict) -> None:
        step, acc = row.get("step", 0), row.get("eval/accuracy")
        parts = [f"step {step:>4}/{self.max_steps}"]
        if "reward/mean" in row:
            parts.append(f"reward {row['reward/mean']:.3f} +- {row.get('reward/std', 0.0):.3f}")
            parts.append(f"loss {row.get('loss', float('nan')):+.4f}")
        if acc is not None:
            parts.append(f"eval acc {acc:.3f}")
        if self.bar is not None:
            if "reward/mean" in row:
                self.bar.n = step
                self.bar.set_postfix_str("  ".join(parts[1:]))
            if acc is not None:
                self.bar.write("  ".join(parts))
            if step >= self.max_steps and acc is not None:
                self.bar.close()
        elif acc is not None or step % self.every == 0:
            print("  ".join(parts), flush=True)


def preflight_for(cfg) -> str:
    """``models.preflight`` for a run config: a step's completions, budget, teacher, the model's LoRA
    and 4-bit settings, and the precision the backend trains in (the TRL preset's on the TRL backend)."""
    from sdpo_kit.core.config import completion_budget
    from sdpo_kit.models import preflight
    from sdpo_kit.registry import get_algorithm

    tc, m = cfg.trainer, cfg.model
    completions = getattr(tc, "batch_size", None) or tc.prompts_per_step * getattr(tc, "num_generations", 1)
    mixed_precision = getattr(tc, "mixed_precision", "auto")
    if cfg.backend == "trl" and mixed_precision == "auto":
        from sdpo_kit.core.trl_base import resolve_preset

        args = resolve_preset(tc.preset)
        mixed_precision = "fp16" if args.get("fp16") else "bf16" if args.get("bf16") else "no"
    return preflight(m.name, completions=completions, completion_len=completion_budget(tc),
                     teacher=get_algorithm(cfg.algorithm).teacher_in_step(tc),
                     lora=m.lora, load_in_4bit=m.load_in_4bit, mixed_precision=mixed_precision)


def check_answer_rules(task, reward_funcs) -> None:
    """Warn when a reward reads answers with another rule than the task's, which held-out evaluation
    uses: the run would be paid for one thing and measured on another."""
    import warnings

    rule = getattr(task, "rule", None)
    for fn in reward_funcs:
        other = getattr(fn, "answer_rule", None)
        if rule is not None and other is not None and other != rule:
            warnings.warn(f"reward {getattr(fn, '__name__', fn)!r} reads answers with rule {other!r}, held-out "
                          f"evaluation with the task's {rule!r}: set task.answer_rule to the rule you mean, and "
                          "drop the reward's own", stacklevel=2)


def train(config, *, advantage_fn=None, loss_fn=None, distill_fn=None, gae_fn=None, overrides: dict | None = None,
          resume_from: str | None = None, dashboard=None, config_path: str | None = None,
          command: str | None = None, show: int = 0) -> dict:
    """Run one training job from ``config``: a preset's name, a YAML path, a dict or a ``Config``.

    ``resume_from``: a checkpoint folder, or a run folder (its newest checkpoint), to continue from.
    ``advantage_fn``, ``loss_fn``, ``distill_fn``, ``gae_fn``: your own pieces in place of the library's
    (module docstring). ``command``: what started the run, for ``run_info.json`` (the CLI gives its command
    line; default ``sdpo_kit.train('CONFIG')``). ``show``: print that many held-out questions with the reply before
    training and after (greedy, the evaluation's budget).

    ``dashboard``: a ``viz.dashboard.Dashboard`` to show the run in (a notebook's live plots, progress and
    completions); it then draws ``reward_curve.png`` in place of the run's own plot.

    Every check that needs no model (the config, your pieces, the task's file, your reward and answer rule)
    runs before the output folder is made: a ``ConfigError`` leaves no folder behind. From then on
    ``run_info.json`` says the run's state; an error marks it failed (``core.run_info``) and is raised again.

    Returns a summary: ``before`` / ``after`` held-out accuracy, ``train_s``, ``eval_s``,
    ``total_s``, ``s_per_step`` (training loop without evals), ``output_dir``, ``history``
    (the metric rows) and the trained ``model`` and ``tokenizer``.
    """
    from sdpo_kit.core.config import ConfigError, dump_config
    from sdpo_kit.core.distributed import is_main
    from sdpo_kit.core.run_info import RunInfo, resume_checkpoint

    t_start = time.perf_counter()
    if config_path is None:
        config_path = str(config) if isinstance(config, (str, os.PathLike)) else "<dict>"
    pieces = {k: v for k, v in dict(advantage_fn=advantage_fn, loss_fn=loss_fn, distill_fn=distill_fn,
                                    gae_fn=gae_fn).items() if v is not None}
    cfg, task = checked_run(config, overrides, pieces)
    if resume_from is not None:
        try:
            resume_from = str(resume_checkpoint(resume_from))
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not is_main():   # one of several processes (torchrun): the main one writes the run's files
        return run_checked(cfg, task, pieces, resume_from=resume_from, config_path=config_path, t_start=t_start)
    dump_config(cfg, out / "config.yaml")
    info = RunInfo(out, command or f"sdpo_kit.train({config_path!r})", config_path, resume_from)
    try:
        summary = run_checked(cfg, task, pieces, resume_from=resume_from, dashboard=dashboard, config_path=config_path,
                              t_start=t_start, show=show)
    except BaseException as e:
        e.traceback_file = info.failed(e)   # the CLI prints where it went
        raise
    info.finished(summary)
    return summary


def checked_run(config, overrides, pieces: dict):
    """(cfg, task): the config loaded and every check that needs no model passed (a ``ConfigError`` says which
    failed): the pieces the trainer takes, the task and its file, whether it can feed the algorithm, and your
    own reward and answer rule called once on the first training rows (``rewards.precheck``)."""
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.core.pieces import refusals
    from sdpo_kit.registry import get_algorithm, get_trainer, load_config, make_task
    from sdpo_kit.rewards.precheck import check_user_code
    from sdpo_kit.tasks.dataset import check_dataset_run

    cfg = load_config(config, overrides)
    problems = refusals(get_trainer(cfg.algorithm, cfg.backend).learner_pieces, cfg.trainer, pieces)
    if problems:
        raise ConfigError(f"{cfg.algorithm}/{cfg.backend}: " + "; ".join(problems))
    task = make_task(**cfg.task)
    try:
        check_dataset_run(task, get_algorithm(cfg.algorithm).dataset_refusal,
                          getattr(cfg.trainer, "prompts_per_step", 1))
    except ValueError as e:
        raise ConfigError(f"task: {e}") from None
    check_user_code(cfg.reward, task, task.splits()[0])
    return cfg, task


def replies_to(model, tokenizer, rows: list[dict], max_new_tokens: int) -> list[str]:
    """Greedy replies to ``rows``' prompts, as held-out evaluation samples them."""
    from sdpo_kit.core.utils import eval_mode
    from sdpo_kit.tasks.base import greedy_replies

    with eval_mode(model):
        return greedy_replies(model, tokenizer, rows, max_new_tokens=max_new_tokens)


def before_and_after(task, rows: list[dict], before: list[str], after: list[str]) -> str:
    """Each question with its reply before training and after, marked right or wrong by the task's rule."""
    from sdpo_kit.text.shown import one_line, question_text

    lines = [f"{len(rows)} held-out questions, before and after training:"]
    for row, b, a in zip(rows, before, after):
        mark = {True: "right", False: "wrong"}
        expected = row[task.answer_column]
        lines += [f"  Q: {one_line(question_text(row['prompt']))}   (answer {expected})",
                  f"     before ({mark[bool(task.is_correct(b, expected))]}): {one_line(b, 100)}",
                  f"     after  ({mark[bool(task.is_correct(a, expected))]}): {one_line(a, 100)}"]
    return "\n".join(lines)


def rewards_for(cfg, model, tokenizer, task) -> tuple[list, list | None]:
    """(reward functions, their weights or None when all are 1) from the config's ``reward`` entries;
    model-scored rewards (inverse_loss, supervised) score with the policy unless their ``scorer`` says otherwise."""
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.rewards import make_reward

    weights = [r.get("weight", 1.0) for r in cfg.reward]
    specs = [{k: v for k, v in r.items() if k != "weight"} for r in cfg.reward]
    try:
        reward_funcs = make_reward(specs, model=model, tokenizer=tokenizer, task=task)
    except ValueError as e:  # unknown type / option: a config problem, reported as one
        raise ConfigError(f"reward: {e}") from e
    check_answer_rules(task, reward_funcs)
    return reward_funcs, None if all(w == 1.0 for w in weights) else weights


def run_checked(cfg, task, pieces: dict, *, resume_from=None, dashboard=None, config_path: str = "<dict>",
                t_start: float | None = None, show: int = 0) -> dict:
    """Train a checked config (``checked_run``) into its output folder: load the policy and rewards, build the
    registered trainer, run it, save the model; returns ``train``'s summary. Under a launcher's several
    processes only the main one prints, plots, evaluates and saves (``core.distributed``)."""
    from sdpo_kit.core.checkpoint import save_model
    from sdpo_kit.core.config import completion_budget
    from sdpo_kit.core.distributed import is_main, world_size
    from sdpo_kit.core.pieces import describe
    from sdpo_kit.core.utils import seed_everything
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import get_trainer, panels_for
    from sdpo_kit.viz.plots import LivePlot

    t_start = time.perf_counter() if t_start is None else t_start
    entry, tc, out = get_trainer(cfg.algorithm, cfg.backend), cfg.trainer, Path(cfg.output_dir)
    main = is_main()
    say = print if main else (lambda *a, **k: None)   # the other processes stay quiet
    threads = set_threads(cfg.threads, cfg.model.name)
    seed_everything(tc.seed)
    resumed = f" resume_from={resume_from}" if resume_from else ""
    resumed += f" processes={world_size()}" if world_size() > 1 else ""
    say(f"sdpo-kit train {config_path}: algorithm={cfg.algorithm} backend={cfg.backend} model={cfg.model.name} "
          f"reward={[r['type'] for r in cfg.reward]} steps={tc.max_steps} threads={threads}{resumed} -> {out}",
          flush=True)
    say(f"preflight: {preflight_for(cfg)}", flush=True)
    for name, fn in pieces.items():
        say(f"{name}: yours, {describe(fn)}", flush=True)

    train_rows, heldout = task.splits()
    model, tokenizer = load_policy(
        cfg.model.name, lora=cfg.model.lora, load_in_4bit=cfg.model.load_in_4bit,
        max_seq_length=cfg.model.max_seq_length, trust_remote_code=cfg.model.trust_remote_code,
        lab_config=lab_config_for(cfg, task), dtype=cfg.model.dtype, fast_inference=cfg.model.fast_inference,
    )
    reward_funcs, reward_weights = rewards_for(cfg, model, tokenizer, task)
    eval_s = [0.0]  # time spent evaluating, kept out of s/step
    # held-out evaluation reads answers with the task's rule (the rewards' too) within the run's completion budget
    eval_tokens = completion_budget(tc)

    def eval_fn(m):
        t0 = time.perf_counter()
        acc = task.evaluate(m, tokenizer, heldout, max_new_tokens=eval_tokens)
        eval_s[0] += time.perf_counter() - t0
        return acc

    def plot_for(png):
        return LivePlot(panels_for(cfg.algorithm), png_path=png, every=max(1, min(tc.eval_every or 10, 25)))

    if dashboard is not None:   # its plot is the run's: one live figure, written where the run's would be
        dashboard.plot.png_path = out / "reward_curve.png"
        dashboard.max_steps = dashboard.max_steps or tc.max_steps
        plot = dashboard
    else:
        plot = plot_for(out / "reward_curve.png")
    printer = ProgressPrinter(tc.max_steps, every=max(1, tc.max_steps // 20))
    ran: list[dict] = []  # the training rows this run logs (a resumed run's earlier rows are not sent again)
    callbacks = [plot, printer] if main else []
    trainer = entry.build_trainer(model, tokenizer, reward_funcs, train_rows, tc, eval_fn=eval_fn if main else None,
                                  callbacks=[*callbacks, lambda r: ran.append(r) if "loss" in r else None],
                                  reward_weights=reward_weights, **pieces)
    before = replies_to(model, tokenizer, heldout[:show], eval_tokens) if show and main else None
    t_train = time.perf_counter()  # from here on: the training loop only
    history = entry.run_trainer(trainer, resume_from)
    train_s = time.perf_counter() - t_train
    if dashboard is not None:
        dashboard.close()
    elif main:
        if resume_from:  # the live plot saw this run's steps only; the saved curve shows the whole run
            plot.close()
            plot = plot_for(out / "reward_curve.png")
            for row in history:
                plot.update(row)
        plot.save(out / "reward_curve.png")
        plot.close()
    if main:
        shutil.rmtree(out / "model", ignore_errors=True)   # an earlier run's files (an adapter, a full model) go
        save_model(model, out / "model", tokenizer)

    accs = [r["eval/accuracy"] for r in history if r.get("eval/accuracy") is not None]
    steps_run = len(ran)
    summary = {
        "before": accs[0] if accs else None, "after": accs[-1] if accs else None,
        "train_s": train_s, "eval_s": eval_s[0], "total_s": time.perf_counter() - t_start,
        # wall time of the training loop without the evaluations, per step run here
        "s_per_step": (train_s - eval_s[0]) / steps_run if steps_run > 0 else None,
        "output_dir": str(out), "history": history, "model": model, "tokenizer": tokenizer,
    }
    if before is not None:
        say(before_and_after(task, heldout[:show], before, replies_to(model, tokenizer, heldout[:show], eval_tokens)))
    if accs:
        say(f"held-out accuracy: before {accs[0]:.3f} -> after {accs[-1]:.3f} "
              f"({accs[-1] - accs[0]:+.3f})", flush=True)
    per_step = f", {summary['s_per_step']:.3f} s/step without eval" if steps_run > 0 else ""
    say(f"time: {summary['total_s']:.1f} s total, {train_s:.1f} s training{per_step}; "
          f"wrote {out}/metrics.jsonl, {out}/model, {out}/reward_curve.png", flush=True)
    return summary
