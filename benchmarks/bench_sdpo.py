"""SDPO on the tiny lab: against GRPO, per step against TRL's own SDPOTrainer, and at test time.

    python benchmarks/bench_sdpo.py [--seeds 0 1 2] [--steps 300] [--speed-steps 20] [--tt-rows 200] [--jobs J]
                                    [--resume] [--out FILE]

Part 1, learning (scratch backend, the same warm start, budget, seeds and knobs):
    grpo            configs/sdpo.yaml's trainer knobs with algorithm grpo (exact-match reward)
    sdpo            configs/sdpo.yaml: self-distillation from successful siblings only
    sdpo_feedback   configs/sdpo_feedback.yaml: plus the checker's feedback in the reprompt
    sdpo_lr_1e-4    configs/sdpo.yaml at learning_rate 1e-4 (a third of GRPO's step size)
    sdpo_base_teacher  configs/sdpo.yaml with teacher_model_kind base (the frozen warm start)
held-out greedy accuracy at every evaluation, wall time, and the first step at which each run
reaches GRPO's final accuracy (same seed).

Part 2, speed (TRL backend, evaluation off, first 5 steps dropped): seconds per step of our
``SDPOTrainer(GRPOTrainer)``, TRL's ``trl.experimental.sdpo.SDPOTrainer`` and ``GRPOTrainer`` on
the same knobs.

Part 3, the teacher (``sdpo.quality`` on the held-out rows, the configs' templates): the warm
start's accuracy from the plain prompt, shown the answer as a sibling's, and with the checker's
feedback on its greedy failures.

Part 4, test time without training: ``multi_turn.compare_multi_turn_with_best_of_n`` on the held-out
rows the warm start gets wrong: multi-turn reprompting (one sample a round, 4 rounds, the checker's
feedback in the reprompt) vs best-of-4, the same number of samples (with 8 a round, plain sampling
already finds almost every tiny-lab answer in round 1, which would measure nothing).

Part 5, test-time SDPO (``at_test_time``): on the hard held-out rows (``hard_rows``: under 10%
of 32 samples right), the discovery rate within k attempts, k = 1 .. 64, of best-of-k, multi-turn
reprompting and test-time SDPO (batches of 8, one SDPO step after each failed batch), all at 64
attempts. Writes ``benchmarks/results/sdpo.json``. The runs of part 1 go through ``runner.run_all`` (``--jobs``,
``--resume``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import yaml
from _common import ROOT, median, parse_args, results_path, write_results
from lab import SDPO_ONLY  # the trainer keys only SDPO has (SDPOFields), dropped for grpo
from runner import add_runner_args, journal_path, run_all

OURS = ("distillation_micro_batch_size", "distillation_loss_scale")   # SDPOFields' own knobs, not TRL's


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())


def as_grpo(data: dict) -> dict:
    """The same run with algorithm grpo: the SDPO-only keys dropped, the reward exact match."""
    return {**data, "algorithm": "grpo", "reward": {"type": "exact_match"},
            "trainer": {k: v for k, v in data["trainer"].items() if k not in SDPO_ONLY}}


def train(data: dict, overrides: dict) -> dict:
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.training import train as run

    return run(config_from_dict(data, overrides), config_path="configs/sdpo.yaml")


def time_trl_sdpo(data: dict, steps: int) -> list[float]:
    """Per-step wall times of TRL's own SDPOTrainer on the config's knobs (tiny lab, CPU)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import TrainerCallback
    from trl.experimental.sdpo import SDPOConfig, SDPOTrainer

    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task
    from sdpo_kit.rewards import make_reward

    cfg = config_from_dict(data)
    t = cfg.trainer
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    stamps = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

    keys = {f: getattr(t, f) for f in SDPO_ONLY if f not in OURS}
    with tempfile.TemporaryDirectory() as out:
        args = SDPOConfig(output_dir=out, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                          logging_strategy="no", max_steps=steps,
                          per_device_train_batch_size=t.prompts_per_step * t.num_generations,
                          num_generations=t.num_generations, max_completion_length=t.max_completion_length,
                          learning_rate=t.learning_rate, temperature=t.temperature,
                          lr_scheduler_type=t.lr_scheduler_type, seed=t.seed, **keys)
        import datasets

        trainer = SDPOTrainer(model=model, reward_funcs=make_reward(cfg.reward, task=task), args=args,
                              train_dataset=datasets.Dataset.from_list(task.splits()[0]), processing_class=tok,
                              callbacks=[Clock()])
        import torch

        torch.set_num_threads(1)
        stamps.append(time.perf_counter())
        trainer.train()
    return [b - a for a, b in zip(stamps, stamps[1:])]


def methods() -> dict:
    """Each method's run config: GRPO, SDPO, SDPO with feedback, and two ablations of ``configs/sdpo.yaml``
    (notebook 05 explains them): a third of the step size, a frozen teacher."""
    sdpo = load("sdpo")
    return {"grpo": as_grpo(sdpo), "sdpo": sdpo, "sdpo_feedback": load("sdpo_feedback"),
            "sdpo_lr_1e-4": {**sdpo, "trainer": {**sdpo["trainer"], "learning_rate": 1.0e-4}},
            "sdpo_base_teacher": {**sdpo, "trainer": {**sdpo["trainer"], "teacher_model_kind": "base"}}}


def run(spec: tuple) -> dict:
    """One training run ``(method, seed, steps)``: held-out accuracy at every evaluation."""
    name, seed, steps = spec
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = train(methods()[name], {"trainer.seed": seed, "trainer.max_steps": steps, "output_dir": out})
        wall = time.perf_counter() - t0
    evals = [(r["step"], r["eval/accuracy"]) for r in s["history"] if r.get("eval/accuracy") is not None]
    return {"method": name, "seed": seed, "evals": evals, "acc_before": s["before"], "acc_after": s["after"],
            "wall_s": wall}


def cache_warm_starts() -> None:
    """Every method's warm start built (and cached) here, before two processes could race to build one."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task

    for data in methods().values():
        cfg = config_from_dict(data)
        load_policy("tiny-lab", lab_config=lab_config_for(cfg, make_task(**cfg.task)))


def learning(args) -> list[dict]:
    """Part 1: every method on every seed, each run with the first evaluation at which it reaches GRPO's final
    accuracy (same seed)."""
    names = list(methods())
    if args.jobs > 1:
        cache_warm_starts()
    journal = journal_path(results_path("sdpo", args.out).stem, args.resume)
    runs = run_all(run, [(name, seed, args.steps) for seed in args.seeds for name in names], jobs=args.jobs,
                   journal=journal,
                   show=lambda r: print(f"{r['method']} seed {r['seed']}: {r['acc_before']:.3f} -> "
                                        f"{r['acc_after']:.3f} ({r['wall_s']:.1f} s)", flush=True))
    for r in runs:  # the first evaluation at which the run reaches GRPO's final accuracy (same seed)
        target = next(g["acc_after"] for g in runs if g["method"] == "grpo" and g["seed"] == r["seed"])
        r["steps_to_grpo_final"] = next((step for step, acc in r["evals"] if step > 0 and acc >= target), None)
    return runs


def step_seconds(sdpo: dict, steps: int) -> dict:
    """Part 2: seconds per step on the TRL backend (evaluation off, the first 5 steps dropped) of our
    SDPOTrainer, GRPOTrainer and TRL's own SDPOTrainer."""
    speed = {}
    trainers = (("ours_SDPOTrainer", {**sdpo, "backend": "trl"}),
                ("GRPOTrainer", {**as_grpo(sdpo), "backend": "trl"}))
    for name, data in trainers:
        with tempfile.TemporaryDirectory() as out:
            s = train(data, {"trainer.max_steps": steps, "trainer.eval_every": 0, "output_dir": out})
        times = [r["time/step_s"] for r in s["history"] if r.get("step", 0) > 5 and "time/step_s" in r]
        speed[name] = {"median_s": median(times), "times_s": times}
    trl_times = time_trl_sdpo(sdpo, steps)[5:]
    speed["trl_SDPOTrainer"] = {"median_s": median(trl_times), "times_s": trl_times}
    return speed


def untrained(feedback: dict, tt_rows: int) -> dict:
    """Parts 3 to 5, on the warm start without training: test time (multi-turn against best-of-n), test-time
    discovery on the hard rows, and the teacher."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task
    from sdpo_kit.rewards import feedback_reward
    from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS, discovery_curves, hard_rows
    from sdpo_kit.sdpo.multi_turn import compare_multi_turn_with_best_of_n

    cfg = config_from_dict(feedback)
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    tpl = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    heldout = task.splits()[1][:tt_rows]
    test_time = compare_multi_turn_with_best_of_n(model, tok, task, heldout, feedback_reward(), n=1, rounds=4,
                                                  temperature=cfg.trainer.temperature, seed=0, **tpl)
    hard = hard_rows(model, tok, task, heldout, feedback_reward(), samples=32, below=0.1,
                     temperature=cfg.trainer.temperature)
    discovery = discovery_curves(model, tok, task, hard, feedback_reward(), budgets=[1, 2, 4, 8, 16, 32, 64],
                                 batch_size=8, temperature=cfg.trainer.temperature, seed=0, **tpl)
    # what the warm start does with the teacher's context, in the configs' templates (the SDPO page's reasons)
    from sdpo_kit.sdpo.quality import teacher_quality

    teacher = teacher_quality(model, tok, task, task.splits()[1], **tpl)
    return {"test_time": test_time, "discovery": discovery, "teacher": teacher}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--speed-steps", type=int, default=20)
    ap.add_argument("--tt-rows", type=int, default=200)
    add_runner_args(ap, "sdpo")
    args = parse_args(ap)
    sdpo, feedback = load("sdpo"), load("sdpo_feedback")
    runs = learning(args)
    speed = step_seconds(sdpo, args.speed_steps)
    rest = untrained(feedback, args.tt_rows)
    config = {"configs": ["configs/sdpo.yaml", "configs/sdpo_feedback.yaml"], "steps": args.steps,
              "seeds": args.seeds, "speed_steps": args.speed_steps, "tt_rows": args.tt_rows}
    write_results("sdpo", out=args.out, config=config, runs=runs, summary={"speed": speed, **rest})

if __name__ == "__main__":
    main()
