"""The ``sdpo-kit`` command line.

    sdpo-kit train CONFIG.yaml [--backend scratch|trl] [--max-steps N] [--output-dir D]
                               [--set section.key=value ...]

``train`` loads the config (``sdpo_kit.config``), the policy (``models.load_policy``), the
task splits and the rewards (``rewards.make_reward``; model-scored rewards score with the
policy itself, as the seed does), then runs the scratch GRPO loop or TRL's GRPOTrainer.
Both backends write the same files:

    D/metrics.jsonl      one JSON row per step: step, reward/mean, reward/std, loss, ...,
                         eval/accuracy at step 0, every trainer.eval_every steps and at the end
    D/model/             the trained model (safetensors) or its LoRA adapter, and the tokenizer
    D/reward_curve.png   the live plot's last frame
    D/config.yaml        the config actually run (overrides applied)

and end with ``held-out accuracy: before X -> after Y (+Z)`` and the wall time.

Left out on purpose: evaluation-only and export sub-commands (later tracks add them).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import yaml


def _parse_set(items) -> dict:
    out = {}
    for item in items or ():
        if "=" not in item:
            raise SystemExit(f"--set expects section.key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    return out


def _set_threads(n: int, model_name: str) -> int:
    """torch CPU threads: the config's count; else 1 for the tiny lab (its matmuls are too small
    to split: on 2 cores one thread ran the demo 2.5x faster than two), all cores up to 4 otherwise."""
    import torch

    n = n or (1 if model_name == "tiny-lab" else min(4, os.cpu_count() or 1))
    torch.set_num_threads(n)
    return n


def _seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass


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


def _save_policy(model, tokenizer, path: Path) -> None:
    """Full weights (safetensors) for a plain model; only the adapter for a PEFT model."""
    from transformers.utils import logging as hf_logging

    path.mkdir(parents=True, exist_ok=True)
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar in the run's output
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)


def train(cfg, *, config_path: str = "<dict>") -> dict:
    """Run one training job from a ``Config``.

    Returns a summary: ``before`` / ``after`` held-out accuracy, ``train_s``, ``eval_s``,
    ``total_s``, ``s_per_step`` (training loop without evals), ``output_dir``, ``history``
    (the metric rows) and the trained ``model`` and ``tokenizer``.
    """
    from .config import ConfigError, dump_config
    from .models import load_policy
    from .plotting import LivePlot
    from .rewards import make_reward
    from .tasks import make_task

    t_start = time.perf_counter()
    tc = cfg.trainer
    threads = _set_threads(tc.threads, cfg.model.name)
    _seed_everything(tc.seed)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, out / "config.yaml")
    print(f"sdpo-kit train {config_path}: backend={tc.backend} model={cfg.model.name} "
          f"reward={[r['type'] for r in cfg.reward]} steps={tc.max_steps} threads={threads} -> {out}",
          flush=True)

    task_kwargs = {k: v for k, v in vars(cfg.task).items() if k != "name"}
    task = make_task(cfg.task.name, **task_kwargs)
    train_rows, heldout = task.splits()
    lab = None
    if cfg.model.name == "tiny-lab":  # warm-start on the task being trained (cached per recipe)
        lab = {"task": cfg.task.name, "digits": cfg.task.digits, "terms": cfg.task.terms, **cfg.model.lab}
        if cfg.task.n_eval > lab.get("n_eval", 200) or cfg.task.seed != lab.get("seed", 0):
            print("warning: task.n_eval / task.seed differ from the warm start's; held-out problems "
                  "may have been seen in its SFT (set model.lab.n_eval / model.lab.seed to match)")
    model, tokenizer = load_policy(
        cfg.model.name, lora=cfg.model.lora, load_in_4bit=cfg.model.load_in_4bit,
        max_seq_length=cfg.model.max_seq_length, trust_remote_code=cfg.model.trust_remote_code,
        lab_config=lab, dtype=cfg.model.dtype,
    )
    weights = [r.get("weight", 1.0) for r in cfg.reward]
    specs = [{k: v for k, v in r.items() if k != "weight"} for r in cfg.reward]
    # model-scored rewards (inverse_loss, supervised) score with the policy itself, as in the seed
    try:
        reward_funcs = make_reward(specs, model=model, tokenizer=tokenizer, task=task)
    except ValueError as e:  # unknown type / option: a config problem, reported as one
        raise ConfigError(f"reward: {e}") from e
    reward_weights = None if all(w == 1.0 for w in weights) else weights

    eval_s = [0.0]  # time spent evaluating, kept out of s/step

    def eval_fn(m):
        t0 = time.perf_counter()
        acc = task.evaluate(m, tokenizer, heldout)
        eval_s[0] += time.perf_counter() - t0
        return acc

    plot = LivePlot(png_path=out / "reward_curve.png", every=max(1, min(tc.eval_every or 10, 25)))
    printer = ProgressPrinter(tc.max_steps, every=max(1, tc.max_steps // 20))
    if tc.backend == "scratch":
        from .trainers.grpo import GRPOConfig, GRPOLoop

        loop = GRPOLoop(model, tokenizer, reward_funcs, train_rows,
                        GRPOConfig(**tc.grpo_kwargs(), share_prompt=tc.share_prompt, output_dir=str(out)), eval_fn=eval_fn,
                        callbacks=[plot, printer], reward_weights=reward_weights)
        t_train = time.perf_counter()  # from here on: the training loop only
        history = loop.train()
    else:
        from .trainers.trl_grpo import build_trl_grpo_trainer

        trainer = build_trl_grpo_trainer(
            model, tokenizer, reward_funcs, train_rows, preset=tc.preset, eval_fn=eval_fn,
            output_dir=out, callbacks=[plot, printer], verbose=False, reward_weights=reward_weights,
            **{**tc.grpo_kwargs(), **tc.trl_args},
        )
        t_train = time.perf_counter()
        trainer.train()
        history = trainer.metrics_callback.history
    train_s = time.perf_counter() - t_train
    plot.save(out / "reward_curve.png")
    plot.close()
    _save_policy(model, tokenizer, out / "model")

    accs = [r["eval/accuracy"] for r in history if r.get("eval/accuracy") is not None]
    steps = max((r["step"] for r in history), default=0)
    summary = {
        "before": accs[0] if accs else None, "after": accs[-1] if accs else None,
        "train_s": train_s, "eval_s": eval_s[0], "total_s": time.perf_counter() - t_start,
        # wall time of the training loop without the evaluations, per optimizer step
        "s_per_step": (train_s - eval_s[0]) / steps if steps else None,
        "output_dir": str(out), "history": history, "model": model, "tokenizer": tokenizer,
    }
    if accs:
        print(f"held-out accuracy: before {accs[0]:.3f} -> after {accs[-1]:.3f} "
              f"({accs[-1] - accs[0]:+.3f})", flush=True)
    per_step = f", {summary['s_per_step']:.3f} s/step without eval" if steps else ""
    print(f"time: {summary['total_s']:.1f} s total, {train_s:.1f} s training{per_step}; "
          f"wrote {out}/metrics.jsonl, {out}/model, {out}/reward_curve.png", flush=True)
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sdpo-kit", description="RL post-training of LMs: GRPO and friends.")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train a policy from a YAML config")
    tr.add_argument("config", help="path to a YAML config (see configs/)")
    tr.add_argument("--backend", choices=["scratch", "trl"], help="override trainer.backend")
    tr.add_argument("--max-steps", type=int, help="override trainer.max_steps")
    tr.add_argument("--output-dir", help="override output_dir")
    tr.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                    help="override any config key, e.g. --set trainer.eval_every=10 (repeatable)")
    return parser


def main(argv=None) -> int:
    from .config import ConfigError, load_config

    args = build_parser().parse_args(argv)
    overrides = _parse_set(args.set)
    if args.backend:
        overrides["trainer.backend"] = args.backend
    if args.max_steps is not None:
        overrides["trainer.max_steps"] = args.max_steps
    if args.output_dir:
        overrides["output_dir"] = args.output_dir
    try:
        cfg = load_config(args.config, overrides)
        train(cfg, config_path=args.config)
    except ConfigError as e:
        print(f"sdpo-kit: config error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
