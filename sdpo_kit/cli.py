"""The ``sdpo-kit`` command line: a thin argparse front of the library.

    sdpo-kit train PRESET_OR_CONFIG.yaml [--backend scratch|trl] [--max-steps N] [--output-dir D] [--show N]
                               [--resume-from RUN_DIR | RUN_DIR/checkpoint-N] [--report-to tensorboard|...] [--set ...]
    sdpo-kit eval RUN_DIR_OR_MODEL [--config CFG] [--show N] [--out FILE] [--set ...]
    sdpo-kit export RUN_DIR [--format lora|merged|merged_4bit|gguf]
    sdpo-kit export-verl CONFIG --out DIR
    sdpo-kit presets

A config is a preset's name (``first_run``, ``demo``: ``sdpo-kit presets`` lists them, shipped in the package)
or a YAML file's path.

``train`` loads the config (``sdpo_kit.registry.load_config``) and hands it to ``sdpo_kit.training.train``,
which builds and runs the registered trainer and says which files it writes (``run_info.json`` tells the run's
state). ``eval`` prints held-out accuracy with the config's task, answer rule and completion budget
(``deploy/evaluate.py``): a base model, a run and its export, measured alike; it writes every reply to
``eval.jsonl``. ``export`` writes a LoRA adapter, a merged model or GGUF (``deploy/export.py``); ``export-verl``
the same run for verl (``deploy/verl.py``).

A config error, or your own reward or answer rule failing its first call (before any model loads), exits
with status 2 and one line naming it; an error during training, with status 1 and one line saying where its
traceback went. Which paths are relative to what: docs/cli.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sdpo-kit", description="RL post-training of LMs: GRPO and friends.")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train a policy from a YAML config")
    tr.add_argument("config", help="a preset's name (sdpo-kit presets lists them) or a YAML config's path")
    tr.add_argument("--backend", help="override backend (scratch | trl)")
    tr.add_argument("--max-steps", type=int, help="override trainer.max_steps")
    tr.add_argument("--output-dir", help="override output_dir")
    tr.add_argument("--resume-from", metavar="RUN_DIR | RUN_DIR/checkpoint-N",
                    help="continue a run from one of its checkpoints (trainer.save_steps writes them)")
    tr.add_argument("--show", type=int, default=0, metavar="N",
                    help="print N held-out questions with the reply before training and after")
    tr.add_argument("--report-to", metavar="NAME[,NAME]", help=REPORT_TO_HELP)
    tr.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                    help="override any config key, e.g. --set trainer.eval_every=10 (repeatable)")
    ev = sub.add_parser("eval", help="held-out accuracy of a run, an export or a model on a config's task")
    ev.add_argument("target", help="a run directory (sdpo-kit train's output_dir), an export folder, or a model name")
    ev.add_argument("--config", help="a preset or YAML config whose task, answer rule and completion budget to use "
                    "(default: the run folder's config.yaml)")
    ev.add_argument("--show", type=int, default=0, metavar="N",
                    help="print N held-out questions: the reply, the answer read, the expected one, right or wrong")
    ev.add_argument("--out", help="where to write one JSON row per question (default: RUN_DIR/eval.jsonl)")
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
    sub.add_parser("presets", help="the shipped configs, a line each (train one by name: sdpo-kit train first_run)")
    return parser


def presets_main() -> int:
    from sdpo_kit.presets import preset_names, preset_summary

    names = preset_names()
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {preset_summary(name)}")
    return 0


def export_verl_main(args) -> int:
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.deploy.verl import export_report, export_verl
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
    print(export_report(out, args.no_check))
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
    from sdpo_kit.deploy.evaluate import evaluate, run_config
    from sdpo_kit.deploy.run_model import ExportError
    from sdpo_kit.registry import load_config
    from sdpo_kit.training import set_threads

    try:
        cfg = load_config(args.config or run_config(args.target), parse_set(args.set))
        set_threads(cfg.threads, cfg.model.name)
        result = evaluate(args.target, cfg, out=args.out)
    except (ConfigError, ExportError, ValueError) as e:
        print(f"sdpo-kit eval: {e}", file=sys.stderr)
        return 2
    print(result.report(args.show))
    return 0


def main(argv=None) -> int:
    from sdpo_kit.core.checkpoint import CHECKPOINT_RE
    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.core.run_info import one_line
    from sdpo_kit.registry import load_config
    from sdpo_kit.training import train

    args = build_parser().parse_args(argv)
    if args.command == "eval":
        return eval_main(args)
    if args.command == "export":
        return export_main(args)
    if args.command == "export-verl":
        return export_verl_main(args)
    if args.command == "presets":
        return presets_main()
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
    if args.resume_from and not args.output_dir and not CHECKPOINT_RE.match(Path(args.resume_from).name):
        overrides["output_dir"] = args.resume_from   # a run folder continues in place: one metrics.jsonl
    try:
        cfg = load_config(args.config, overrides)
        train(cfg, config_path=args.config, resume_from=args.resume_from, show=args.show,
              command=" ".join(["sdpo-kit", *map(shlex.quote, sys.argv[1:] if argv is None else argv)]))
    except ConfigError as e:
        print(f"sdpo-kit: config error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except Exception as e:   # the run folder's run_info.json says failed; its traceback.txt has the rest
        where = getattr(e, "traceback_file", None)
        print(f"sdpo-kit: {one_line(e)}" + (f" (traceback: {where})" if where else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
