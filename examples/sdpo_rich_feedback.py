"""SDPO with the code reward's rich test-case feedback: the teacher reads what the tests said.

    python examples/sdpo_rich_feedback.py                        # --device auto: cuda if there, else cpu
    python examples/sdpo_rich_feedback.py --device cpu [--steps 100] [--set trainer.eval_every=10 ...]
    python examples/sdpo_rich_feedback.py --device cuda [--model Qwen/Qwen2.5-Coder-1.5B-Instruct] [--steps 40]

A code reward does not only say 0 or 1: it says which test failed, with the input, the output and
the expected output (or the error of a crash), in LiveCodeBench's words. SDPO puts that text into
its teacher prompt (``include_environment_feedback``), so a wrong attempt teaches something even
when no sibling in its group got it right.

* cpu: the tiny lab's code task (``configs/sdpo_code_lab.yaml``, task ``lab_code``): the model writes
  an expression in x that the sandbox runs as ``def f(x): return (expr)`` against six call tests.
  It prints one held-out prompt, a wrong attempt, the feedback the reward returns for it and the
  teacher prompt SDPO builds, then trains through ``sdpo_kit.train`` (the warm start, cached in
  SDPO_KIT_CACHE after the first run, then 100 SDPO steps: minutes on a CPU, not benchmarked here).
* cuda: a small coder model (default Qwen/Qwen2.5-Coder-0.5B-Instruct; the 1.5B is the next size) loaded
  by ``models.load_policy`` (Unsloth in 4-bit with LoRA when installed, else transformers + PEFT),
  the 40 shipped code problems (``rewards.load_code_problems``: the reward sees half of each
  problem's tests, the evaluation all of them), the ``code`` reward and our SDPOTRLTrainer with
  the T4 preset (fp16, gradient checkpointing). Held-out pass rate before and after: one greedy
  completion per problem against every test. It prints ``models.preflight``'s memory estimate
  first. Needs the model in the local hub cache or on the network; neither the time per step nor
  the peak memory on a T4 is measured here (a step generates 8 x up to 512 tokens).

Both paths write OUTPUT_DIR/metrics.jsonl and end with ``... before X -> after Y``.
Left out on purpose: the scratch backend on CUDA and vLLM generation (``preset: t4_vllm`` does it).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import sdpo_kit as sk

ROOT = Path(__file__).resolve().parents[1]
CPU_CONFIG = ROOT / "configs" / "sdpo_code_lab.yaml"
DEFAULT_MODEL = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
GPU_STEPS = 40


def resolve_device(device: str) -> str:
    """``auto`` -> cuda when torch sees a GPU, else cpu; ``cuda`` without one is a clear exit."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA GPU here; run with --device cpu (the tiny-lab code task)")
    return device


def show_feedback_example(task, trainer_cfg, seed: int = 0) -> dict:
    """Print a held-out prompt, a wrong attempt (a near miss), the feedback the ``feedback`` reward
    returns for it and the teacher prompt SDPO builds from it; return the four texts."""
    from sdpo_kit.rewards import make_reward
    from sdpo_kit.sdpo import reprompt

    row = task.splits()[1][0]
    attempt = task.near_miss(row["answer"], random.Random(seed))
    reward = make_reward("feedback", task=task)[0]
    scored = reward([row["prompt"]], [attempt], answer=[row["answer"]])[0]
    teacher = reprompt(row["prompt"], None, scored["feedback"], reprompt_template=trainer_cfg.reprompt_template,
                       solution_template=trainer_cfg.solution_template,
                       feedback_template=trainer_cfg.feedback_template)
    texts = {"prompt": row["prompt"][-1]["content"], "attempt": attempt, "score": scored["score"],
             "feedback": scored["feedback"], "teacher_prompt": teacher[-1]["content"]}
    print("--- one held-out problem, a wrong attempt, and what SDPO's teacher reads ---")
    print(f"prompt:   {texts['prompt']}\nattempt:  {attempt}   (score {scored['score']:.0f})")
    print(f"feedback (the code reward's, LiveCodeBench's form):\n{scored['feedback']}")
    print(f"teacher prompt (reprompt_template + feedback_template):\n{texts['teacher_prompt']}\n---", flush=True)
    return texts


def cpu_run(args) -> dict:
    """The tiny-lab code task: ``configs/sdpo_code_lab.yaml`` with ``--set`` overrides, the feedback
    example, then ``training.train`` (warm start, SDPO, before/after held-out accuracy). Returns its summary."""
    from sdpo_kit import ConfigError, load_config, make_task, train

    overrides = sk.cli.parse_set(args.set)
    if args.steps is not None:
        overrides["trainer.max_steps"] = args.steps
    overrides["output_dir"] = args.output_dir or overrides.get("output_dir", "runs/example_rich_feedback_cpu")
    try:
        cfg = load_config(CPU_CONFIG, overrides)
    except ConfigError as e:
        raise SystemExit(f"config error: {e}") from None
    show_feedback_example(make_task(**cfg.task), cfg.trainer)
    summary = train(cfg, config_path=str(CPU_CONFIG))
    print(f"lab_code held-out accuracy (greedy, all six tests): before {summary['before']:.3f} -> "
          f"after {summary['after']:.3f}", flush=True)
    return summary


def gpu_training_args(output_dir: str, steps: int = GPU_STEPS, overrides: dict | None = None):
    """The ``SDPOTRLConfig`` the CUDA path trains with: the T4 preset (fp16, gradient checkpointing),
    the tests' feedback in the teacher prompt, 2 prompts x 4 completions of up to 512 tokens a step
    in micro-batches of 2 (sized for a T4's 15 GB with LoRA; ``gpu_run`` prints the estimate).
    ``overrides``: ``trainer.<field>`` keys from ``--set``."""
    from sdpo_kit import SDPOTRLConfig

    knobs = dict(max_steps=steps, prompts_per_step=2, num_generations=4, max_completion_length=512,
                 learning_rate=5e-5, temperature=1.0, eval_every=0, log_completions_every=1, seed=0,
                 output_dir=str(output_dir), preset="t4", include_environment_feedback=True,
                 success_reward_threshold=1.0, teacher_model_kind="ema", max_reprompt_len=2048,
                 distillation_micro_batch_size=2, trl_args={"gradient_accumulation_steps": 4})
    for key, value in (overrides or {}).items():
        section, _, name = key.partition(".")
        if section != "trainer" or not name:
            raise SystemExit(f"--set {key}: the CUDA path takes trainer.<field> overrides only")
        knobs[name] = value
    try:
        return SDPOTRLConfig(**knobs)
    except TypeError as e:
        raise SystemExit(f"--set: {e}") from None


def pass_rate(model, tokenizer, rows, batch_size: int = 8, max_new_tokens: int = 512) -> float:
    """Share of ``rows`` whose greedy completion passes every test (the code reward's runner)."""
    import torch

    from sdpo_kit.core import generate_completions
    from sdpo_kit.rewards import score_completions

    texts = []
    for i in range(0, len(rows), batch_size):
        with torch.no_grad():
            texts += generate_completions(model, tokenizer, [r["prompt"] for r in rows[i:i + batch_size]],
                                          max_new_tokens=max_new_tokens)
    results = score_completions(texts, [r["tests"] for r in rows])
    return sum(r.score for r in results) / len(rows)


def gpu_run(args) -> dict:
    """A small coder model on the shipped code problems with our SDPOTRLTrainer (``gpu_training_args``);
    the pass rate on every test (the reward sees half of them) at step 0 and at the end. Returns before,
    after, history, output_dir."""
    from sdpo_kit import load_policy  # load_policy before sdpo.trl: Unsloth patches TRL
    from sdpo_kit.core import train_trl
    from sdpo_kit.rewards import load_code_problems, make_reward

    config = gpu_training_args(args.output_dir or "runs/example_rich_feedback_gpu", args.steps or GPU_STEPS,
                               sk.cli.parse_set(args.set))
    # the teacher's input is its prompt (up to max_reprompt_len) plus the completion: the longest sequence
    longest = config.max_reprompt_len + config.max_completion_length
    print("preflight: " + sk.models.preflight(args.model, completions=config.prompts_per_step * config.num_generations,
                                    completion_len=config.max_completion_length, prompt_len=config.max_reprompt_len,
                                    teacher=True, lora=True, mixed_precision="fp16"), flush=True)
    # fp16 weights to match the T4 preset's fp16 training on any GPU (load_policy's default is bf16 from
    # compute capability 8.0, which a trainer set to fp16 may refuse)
    model, tokenizer = load_policy(args.model, lora=True, max_seq_length=longest, dtype="fp16")
    from sdpo_kit.sdpo import build_sdpo_from_config

    train_rows, eval_rows = load_code_problems(split="train"), load_code_problems(split="eval")
    print(f"{args.model}: {len(train_rows)} problems (the reward sees half of each one's tests), "
          f"evaluated on every test; {config.max_steps} steps of {config.prompts_per_step} x "
          f"{config.num_generations} completions -> {config.output_dir}", flush=True)
    reward = make_reward({"type": "code"})
    trainer = build_sdpo_from_config(
        model, tokenizer, reward, train_rows, config, callbacks=[sk.training.ProgressPrinter(config.max_steps, every=1)],
        eval_fn=lambda m: pass_rate(m, tokenizer, eval_rows, max_new_tokens=config.max_completion_length))
    history = train_trl(trainer, None)
    accs = [r["eval/accuracy"] for r in history if r.get("eval/accuracy") is not None]
    before, after = accs[0], accs[-1]
    print(f"pass rate on every test (the reward saw half; the problems are the training ones), greedy: "
          f"before {before:.3f} -> after {after:.3f} "
          f"({after - before:+.3f})", flush=True)
    return {"before": before, "after": after, "history": history, "output_dir": config.output_dir}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="SDPO with the code reward's rich test-case feedback")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: cuda when torch sees a GPU, else cpu (the tiny-lab code task)")
    p.add_argument("--steps", type=int, help=f"training steps (cpu: the config's 100; cuda: {GPU_STEPS})")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="cuda path: a hub id or local folder (or Qwen/Qwen2.5-Coder-1.5B-Instruct, the next size)")
    p.add_argument("--output-dir", help="where metrics.jsonl and the model go")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set trainer.eval_every=10 (repeatable; cuda: trainer.* only)")
    return p


def main(argv=None) -> dict:
    """Parse ``argv``, pick the device, run that path; returns its summary."""
    args = build_parser().parse_args(argv)
    device = resolve_device(args.device)
    print(f"sdpo_rich_feedback: device {device}", flush=True)
    return gpu_run(args) if device == "cuda" else cpu_run(args)


if __name__ == "__main__":  # pragma: no cover
    main()
