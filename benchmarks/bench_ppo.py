"""Teacher-student PPO on the tiny lab: PPO alone, distillation alone, and both; and a learned reward.

    python benchmarks/bench_ppo.py [--seeds 0 1 2] [--steps 60] [--rm-steps 40] [--jobs J] [--resume] [--out FILE]

Part 1 (configs/teacher_student_ppo.yaml, the same student, teacher, budget and seeds):
    ppo           kd_coef 0: PPO on the exact-match reward alone
    kd            ppo_coef 0: distillation from the teacher alone (no reward in the loss)
    teacher_ppo   both (the config as written)
held-out greedy accuracy at every evaluation, wall time, s/step, and the share of the
student-to-teacher gap each closes (the aim: teacher-student PPO closes at least half within
3 CPU-minutes).

Part 2: the build times of the teacher (a longer warm start) and of the learned reward model,
each in a fresh cache directory, and the reward model's held-out agreement with exact match on the
student's own samples.

Part 3, the learned reward: PPO alone on the reward model instead of the checker (seed 0): its
raw score and the true held-out accuracy over steps, to see whether they part ways (reward-model
over-optimisation). Writes ``benchmarks/results/ppo.json``. The runs of part 1 go through ``runner.run_all``
(``--jobs``, ``--resume``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import yaml
from _common import ROOT, parse_args, results_path, write_results
from runner import add_runner_args, journal_path, run_all

VARIANTS = {"ppo": {"trainer.kd_coef": 0.0}, "kd": {"trainer.ppo_coef": 0.0}, "teacher_ppo": {}}


def train(data: dict, overrides: dict) -> dict:
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.training import train as run

    return run(config_from_dict(data, overrides), config_path="configs/teacher_student_ppo.yaml")


def build_times() -> dict:
    """Seconds to build the teacher and the reward model from nothing (a fresh cache directory)."""
    import torch

    from sdpo_kit.lab.model import LabConfig, warm_start
    from sdpo_kit.rewards.learned import RewardModelConfig, build_reward_model

    data = yaml.safe_load((ROOT / "configs" / "teacher_student_ppo.yaml").read_text())
    out, old = {}, os.environ.get("SDPO_KIT_CACHE")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["SDPO_KIT_CACHE"] = cache
        try:
            torch.set_num_threads(1)
            t0 = time.perf_counter()
            warm_start(LabConfig(**data["trainer"]["teacher_lab"]), verbose=False)
            out["teacher_build_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            build_reward_model(RewardModelConfig(), verbose=False)   # includes the student's warm start it starts from
            out["reward_model_build_s"] = time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("SDPO_KIT_CACHE")
            else:
                os.environ["SDPO_KIT_CACHE"] = old
    return out


def accuracies_and_agreement(data: dict) -> dict:
    """Held-out greedy accuracy of student and teacher; the reward model's agreement with exact match
    on 4 samples per held-out question from the student (temperature 1, as PPO samples)."""
    import torch

    from sdpo_kit.core.sampling import sample
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import make_task
    from sdpo_kit.rewards.learned import RewardModelConfig, agreement, build_reward_model, sequence_classifier_reward

    task = make_task(**{k: v for k, v in data["task"].items()})
    heldout = task.splits()[1]
    student, tok = load_policy("tiny-lab")
    teacher, _ = load_policy("tiny-lab", lab_config=data["trainer"]["teacher_lab"])
    rm, rm_tok = build_reward_model(RewardModelConfig())
    torch.manual_seed(0)
    ro = sample(student, tok, [r["prompt"] for r in heldout], max_new_tokens=4, temperature=1.0, num_return_sequences=4)
    agree = agreement(sequence_classifier_reward(rm, rm_tok), task, [r for r in heldout for _ in range(4)], ro.texts)
    return {"student_acc": task.evaluate(student, tok, heldout), "teacher_acc": task.evaluate(teacher, tok, heldout),
            "reward_model": agree}


def run(spec: tuple) -> dict:
    """One run of part 1, ``(method, seed, steps, student_acc, gap)``: held-out accuracy at every evaluation, and
    the share of the student-to-teacher ``gap`` it closes (the two measured once, by ``main``)."""
    name, seed, steps, student_acc, gap = spec
    data = yaml.safe_load((ROOT / "configs" / "teacher_student_ppo.yaml").read_text())
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = train(data, {**VARIANTS[name], "trainer.seed": seed, "trainer.max_steps": steps, "output_dir": out})
        wall = time.perf_counter() - t0
    evals = [(r["step"], r["eval/accuracy"]) for r in s["history"] if r.get("eval/accuracy") is not None]
    gap_closed = (s["after"] - student_acc) / gap if gap > 0 else None
    return {"method": name, "seed": seed, "evals": evals, "acc_before": s["before"], "acc_after": s["after"],
            "wall_s": wall, "s_per_step": s["s_per_step"], "gap_closed": gap_closed}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rm-steps", type=int, default=40)
    add_runner_args(ap, "ppo")
    args = parse_args(ap)
    data = yaml.safe_load((ROOT / "configs" / "teacher_student_ppo.yaml").read_text())

    builds = build_times()
    ref = accuracies_and_agreement(data)
    gap = ref["teacher_acc"] - ref["student_acc"]
    specs = [(name, seed, args.steps, ref["student_acc"], gap) for seed in args.seeds for name in VARIANTS]
    journal = journal_path(results_path("ppo", args.out).stem, args.resume)
    runs = run_all(run, specs, jobs=args.jobs, journal=journal,
                   show=lambda r: print(f"{r['method']} seed {r['seed']}: {r['acc_before']:.3f} -> "
                                        f"{r['acc_after']:.3f} ({r['wall_s']:.1f} s)", flush=True))

    with tempfile.TemporaryDirectory() as out:   # part 3: the learned reward, PPO alone
        s = train(data, {"reward": [{"type": "reward_model"}], "trainer.kd_coef": 0.0,
                         "trainer.max_steps": args.rm_steps, "trainer.eval_every": 5, "output_dir": out})
    rm_curve = [{"step": r["step"], "score_raw": r.get("reward/score_raw"), "acc": r.get("eval/accuracy")}
                for r in s["history"] if "eval/accuracy" in r or "reward/score_raw" in r]

    config = {"config": "configs/teacher_student_ppo.yaml", "steps": args.steps, "seeds": args.seeds,
              "rm_steps": args.rm_steps}
    write_results("ppo", out=args.out, config=config, runs=runs,
                  summary={**ref, **builds, "gap": gap, "rm_curve": rm_curve})


if __name__ == "__main__":
    main()
