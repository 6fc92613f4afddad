"""The ``sdpo-kit`` command line.

    sdpo-kit train CONFIG.yaml [--backend scratch|trl] [--max-steps N] [--output-dir D]
                               [--resume-from D0/checkpoint-N] [--report-to none|tensorboard|trackio|wandb]
                               [--set section.key=value ...]

``train`` loads the config (``sdpo_kit.registry.load_config``), the policy (``models.load_policy``), the
task splits and the rewards (``rewards.make_reward``; model-scored rewards score with the
policy itself unless their ``scorer`` says otherwise), then builds the trainer that ``(algorithm, backend)``
registers (``sdpo_kit.registry``) and runs it. Every trainer writes the same files:

    D/metrics.jsonl      one JSON row per step: step, reward/mean, reward/std, loss, ...,
                         eval/accuracy at step 0, every trainer.eval_every steps and at the end
    D/completions.jsonl  every trainer.log_completions_every steps: each sampled completion with its
                         prompt, rewards, feedback (SDPO: teacher prompt); pandas.read_json(..., lines=True)
    D/runs/, D/wandb/    with --report-to tensorboard / wandb (REPORT_TO_HELP says how to open each)
    D/checkpoint-N/      every trainer.save_steps steps (model or adapter, optimizer, scheduler,
                         random states, step, sampler position); --resume-from continues there
    D/model/             the trained model (safetensors) or its LoRA adapter, and the tokenizer
    D/reward_curve.png   the live plot's last frame
    D/config.yaml        the config actually run (overrides applied)

Before training it prints the preflight (``core.preflight``: on a CPU one line, on CUDA the device,
the dtype it trains in and why, free memory and a peak-memory estimate), and it ends with
``held-out accuracy: before X -> after Y (+Z)`` and the wall time. A resumed run
starts from the same starting policy (a reference model is a copy of it), loads the
checkpoint, and logs steps N+1.. as the run that was not interrupted would have.

``sdpo-kit eval RUN_DIR_OR_MODEL --config CFG`` prints held-out accuracy with the config's task, answer rule and
completion budget (``deploy/evaluate.py``): a base model, a run and its export, measured alike.
``sdpo-kit export RUN_DIR`` writes a LoRA adapter, a merged model or GGUF (``deploy/export.py``);
``sdpo-kit export-verl CONFIG --out DIR`` the same run for verl (``deploy/verl.py``).

Left out on purpose: sampled (pass@k) evaluation; ``sdpo.multi_turn`` counts best-of-N.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import yaml

REPORT_TO_HELP = ("experiment tracker(s), TRL's names (trainer.report_to; default none): "
                  "tensorboard -> OUTPUT_DIR/runs, open with `tensorboard --logdir OUTPUT_DIR/runs`; "
                  "trackio -> local database, open with `trackio show`; "
                  "wandb -> wandb's settings (WANDB_MODE=offline: OUTPUT_DIR/wandb, then `wandb sync`). "
                  "Comma-separate several")


def parse_set(items) -> dict:
    """``--set section.key=value`` pairs as ``load_config`` overrides, values read as YAML (the CLI's
    and the examples' syntax)."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise SystemExit(f"--set expects section.key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    return out


def _set_threads(n: int, model_name: str) -> int:
    """torch CPU threads: the config's count; else 1 for the tiny lab (its matmuls are too small
    to split: one thread runs the demo faster than two), all cores up to 4 otherwise."""
    import torch

    n = n or (1 if model_name == "tiny-lab" else min(4, os.cpu_count() or 1))
    torch.set_num_threads(n)
    return n


class ProgressPrinter:
    """Prints a line every ``every`` steps and on every row with an eval."""

    def __init__(self, max_steps: int, every: int):
        self.max_steps, self.every = max_steps, max(1, every)

    def __call__(self, row: dict) -> None:
        step, acc = row.get("step", 0), row.get("eval/accuracy")
        parts = [f"step {step:>4}/{self.max_steps}"]
        if "reward/mean" in row:
            parts.append(f"reward {row['reward/mean']:.3f} +- {row.get('reward/std', 0.0):.3f}")
            parts.append(f"loss {row.get('loss', float('nan')):+.4f}")
        if acc is not None:
            parts.append(f"eval acc {acc:.3f}")
        if acc is not None or step % self.every == 0:
            print("  ".join(parts), flush=True)


def preflight_for(cfg) -> str:
    """``models.preflight`` for a run config: a step's completions, budget, teacher, the model's LoRA
    and 4-bit settings, and the precision the backend trains in (the TRL preset's on the TRL backend)."""
    from sdpo_kit.models import preflight

    tc, m = cfg.trainer, cfg.model
    completions = getattr(tc, "batch_size", None) or tc.prompts_per_step * getattr(tc, "num_generations", 1)
    mixed_precision = getattr(tc, "mixed_precision", "auto")
    if cfg.backend == "trl" and mixed_precision == "auto":
        from sdpo_kit.core.trl_base import resolve_preset

        args = resolve_preset(tc.preset)
        mixed_precision = "fp16" if args.get("fp16") else "bf16" if args.get("bf16") else "no"
    return preflight(m.name, completions=completions, completion_len=getattr(tc, "max_completion_length", 256),
                     teacher=cfg.algorithm in ("sdpo", "ppo") or bool(getattr(tc, "beta", 0.0)),
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


def train(cfg, *, config_path: str = "<dict>", resume_from: str | None = None, dashboard=None) -> dict:
    """Run one training job from a ``Config`` (from ``resume_from``, a checkpoint folder, if given).

    ``dashboard``: a ``core.dashboard.Dashboard`` to show the run in (a notebook's live plots, progress and
    completions); it then draws ``reward_curve.png`` in place of the run's own plot.

    Returns a summary: ``before`` / ``after`` held-out accuracy, ``train_s``, ``eval_s``,
    ``total_s``, ``s_per_step`` (training loop without evals), ``output_dir``, ``history``
    (the metric rows) and the trained ``model`` and ``tokenizer``.
    """
    from sdpo_kit.core.checkpoint import save_model
    from sdpo_kit.core.config import ConfigError, dump_config
    from sdpo_kit.core.plotting import LivePlot, panels_for
    from sdpo_kit.core.utils import seed_everything
    from sdpo_kit.lab.dataset_task import check_dataset_run
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import get_trainer, make_task
    from sdpo_kit.rewards import make_reward

    t_start = time.perf_counter()
    tc = cfg.trainer
    threads = _set_threads(cfg.threads, cfg.model.name)
    seed_everything(tc.seed)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, out / "config.yaml")
    resumed = f" resume_from={resume_from}" if resume_from else ""
    print(f"sdpo-kit train {config_path}: algorithm={cfg.algorithm} backend={cfg.backend} model={cfg.model.name} "
          f"reward={[r['type'] for r in cfg.reward]} steps={tc.max_steps} threads={threads}{resumed} -> {out}",
          flush=True)
    print(f"preflight: {preflight_for(cfg)}", flush=True)

    task = make_task(**cfg.task)
    try:
        check_dataset_run(task, cfg.algorithm, getattr(tc, "prompts_per_step", 1))   # before a model loads
    except ValueError as e:
        raise ConfigError(f"task: {e}") from None
    train_rows, heldout = task.splits()
    model, tokenizer = load_policy(
        cfg.model.name, lora=cfg.model.lora, load_in_4bit=cfg.model.load_in_4bit,
        max_seq_length=cfg.model.max_seq_length, trust_remote_code=cfg.model.trust_remote_code,
        lab_config=lab_config_for(cfg, task), dtype=cfg.model.dtype, fast_inference=cfg.model.fast_inference,
    )
    weights = [r.get("weight", 1.0) for r in cfg.reward]
    specs = [{k: v for k, v in r.items() if k != "weight"} for r in cfg.reward]
    # model-scored rewards (inverse_loss, supervised) get the policy as their scorer (scorer="policy", their default)
    try:
        reward_funcs = make_reward(specs, model=model, tokenizer=tokenizer, task=task)
    except ValueError as e:  # unknown type / option: a config problem, reported as one
        raise ConfigError(f"reward: {e}") from e
    reward_weights = None if all(w == 1.0 for w in weights) else weights

    check_answer_rules(task, reward_funcs)
    eval_s = [0.0]  # time spent evaluating, kept out of s/step
    # held-out evaluation reads answers with the task's rule (the rewards' too) within the run's completion budget
    eval_tokens = getattr(tc, "max_completion_length", None)

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
    entry = get_trainer(cfg.algorithm, cfg.backend)
    trainer = entry.build_trainer(model, tokenizer, reward_funcs, train_rows, tc, eval_fn=eval_fn,
                                  callbacks=[plot, printer, lambda r: ran.append(r) if "loss" in r else None],
                                  reward_weights=reward_weights)
    t_train = time.perf_counter()  # from here on: the training loop only
    history = entry.run_trainer(trainer, resume_from)
    train_s = time.perf_counter() - t_train
    if dashboard is not None:
        dashboard.close()
    else:
        if resume_from:  # the live plot saw this run's steps only; the saved curve shows the whole run
            plot.close()
            plot = plot_for(out / "reward_curve.png")
            for row in history:
                plot.update(row)
        plot.save(out / "reward_curve.png")
        plot.close()
    shutil.rmtree(out / "model", ignore_errors=True)   # an earlier run's files (an adapter, a full model) must not stay
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
    if accs:
        print(f"held-out accuracy: before {accs[0]:.3f} -> after {accs[-1]:.3f} "
              f"({accs[-1] - accs[0]:+.3f})", flush=True)
    per_step = f", {summary['s_per_step']:.3f} s/step without eval" if steps_run > 0 else ""
    print(f"time: {summary['total_s']:.1f} s total, {train_s:.1f} s training{per_step}; "
          f"wrote {out}/metrics.jsonl, {out}/model, {out}/reward_curve.png", flush=True)
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sdpo-kit", description="RL post-training of LMs: GRPO and friends.")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train a policy from a YAML config")
    tr.add_argument("config", help="path to a YAML config (see configs/)")
    tr.add_argument("--backend", help="override backend (scratch | trl)")
    tr.add_argument("--max-steps", type=int, help="override trainer.max_steps")
    tr.add_argument("--output-dir", help="override output_dir")
    tr.add_argument("--resume-from", metavar="DIR/checkpoint-N",
                    help="continue a run from one of its checkpoints (trainer.save_steps writes them)")
    tr.add_argument("--report-to", metavar="NAME[,NAME]", help=REPORT_TO_HELP)
    tr.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                    help="override any config key, e.g. --set trainer.eval_every=10 (repeatable)")
    ev = sub.add_parser("eval", help="held-out accuracy of a run, an export or a model on a config's task")
    ev.add_argument("target", help="a run directory (sdpo-kit train's output_dir), an export folder, or a model name")
    ev.add_argument("--config", required=True, help="the YAML config whose task, answer rule and completion budget to use")
    ev.add_argument("--set", action="append", metavar="KEY=VALUE", default=[], help="override any config key")
    ex = sub.add_parser("export", help="export a trained run: LoRA adapter or merged model (sdpo_kit.deploy.export)")
    ex.add_argument("run_dir", help="a directory `sdpo-kit train` wrote (config.yaml + model/)")
    ex.add_argument("--format", default="lora", help="lora | merged | merged_4bit | gguf")
    ex.add_argument("--output-dir", help="where to write it (default RUN_DIR/export-FORMAT)")
    ex.add_argument("--dtype", default="fp16", help="merged weights: fp16 | bf16 | fp32")
    ex.add_argument("--quant", default="f16", help="gguf: f32 | f16 | q8_0")
    ex.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    ve = sub.add_parser("export-verl", help="a config's task, reward and settings as a verl run (sdpo_kit.deploy.verl)")
    ve.add_argument("config", help="path to a YAML config (algorithm grpo or ppo)")
    ve.add_argument("--out", required=True, help="folder for train/val.parquet, reward.py, model/, run_verl.sh")
    ve.add_argument("--n-gpus-per-node", type=int, default=1)
    ve.add_argument("--nnodes", type=int, default=1)
    ve.add_argument("--max-prompt-length", type=int, help="default: measured on the exported prompts (tiny lab), else 512")
    ve.add_argument("--micro-batch-size-per-gpu", type=int, default=8)
    ve.add_argument("--no-check", action="store_true", help="do not compose/validate with verl even if it is importable")
    ve.add_argument("--set", action="append", metavar="KEY=VALUE", default=[], help="override any config key")
    ve.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    return parser


def export_verl_main(args) -> int:
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.deploy.verl import export_verl
    from sdpo_kit.deploy.verl_config import VerlExportError
    from sdpo_kit.registry import load_config

    try:
        cfg = load_config(args.config, parse_set(args.set))
        out = export_verl(cfg, args.out, n_gpus_per_node=args.n_gpus_per_node, nnodes=args.nnodes,
                          max_prompt_length=args.max_prompt_length,
                          micro_batch_size_per_gpu=args.micro_batch_size_per_gpu,
                          check=False if args.no_check else None, overwrite=args.overwrite, config_name=args.config)
    except (ConfigError, VerlExportError) as e:
        print(f"sdpo-kit export-verl: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out['out_dir']}: {', '.join(out['files'])}")
    for u in out["unmapped"]:
        print(f"  not in verl's config: {u}")
    if out["checked_with_verl"]:
        print("  composed against verl's ppo_trainer config and passed its validate_config")
    else:
        why = "--no-check" if args.no_check else "verl is not importable here (make test-verl checks in .venv-verl)"
        print(f"  not checked against verl: {why}")
    print(f"  run on a GPU machine: bash {out['out_dir']}/run_verl.sh")
    return 0


def export_main(args) -> int:
    from sdpo_kit.deploy.export import ExportError, export

    try:
        out = export(args.run_dir, args.format, args.output_dir, dtype=args.dtype, quant=args.quant,
                     overwrite=args.overwrite)
    except ExportError as e:
        print(f"sdpo-kit export: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def eval_main(args) -> int:
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.deploy.evaluate import evaluate
    from sdpo_kit.deploy.run_model import ExportError
    from sdpo_kit.registry import load_config

    try:
        cfg = load_config(args.config, parse_set(args.set))
        _set_threads(cfg.threads, cfg.model.name)
        print(evaluate(args.target, cfg).line())
    except (ConfigError, ExportError, ValueError) as e:
        print(f"sdpo-kit eval: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv=None) -> int:
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.registry import load_config

    args = build_parser().parse_args(argv)
    if args.command == "eval":
        return eval_main(args)
    if args.command == "export":
        return export_main(args)
    if args.command == "export-verl":
        return export_verl_main(args)
    overrides = parse_set(args.set)
    if args.backend:
        overrides["backend"] = args.backend
    if args.max_steps is not None:
        overrides["trainer.max_steps"] = args.max_steps
    if args.output_dir:
        overrides["output_dir"] = args.output_dir
    if args.report_to:
        names = [n.strip() for n in args.report_to.split(",") if n.strip()]
        overrides["trainer.report_to"] = names[0] if len(names) == 1 else names
    try:
        cfg = load_config(args.config, overrides)
        if args.resume_from and not Path(args.resume_from).is_dir():
            raise ConfigError(f"--resume-from {args.resume_from}: no such checkpoint folder")
        train(cfg, config_path=args.config, resume_from=args.resume_from)
    except ConfigError as e:
        print(f"sdpo-kit: config error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
