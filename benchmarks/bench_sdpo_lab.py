"""SDPO where its premise holds: the skill lab's dial, measured (issue 17's experiments).

    python benchmarks/bench_sdpo_lab.py [--seeds S ...] [--dial D ...] [--methods M ...] [--steps N] [--out FILE]
                                        [--tune-seeds S ...] [--lr-grid LR ...] [--lr METHOD=LR ...] [--no-runs]

The lab: ``long_addition`` (two 4-digit operands; a 4-5 digit answer) with digit feedback that names
the wrong places (``lab/feedback.py``), and a warm start whose in-context skill is set by the dial,
``LabConfig.context_steps`` (``lab/skill.py``): SFT steps on SDPO's own teacher prompts, interleaved
with a fixed budget of plain steps. ``--dial`` takes step counts from ``DIALS`` or ``min`` / ``max``.

Part 1, per dial: ``sdpo.teacher_quality`` of the warm start on the held-out split (plain accuracy,
teacher accuracy with a sibling's success, with feedback on its own failed attempt, and the share of
wrong tokens where the teacher puts more mass on the right token than the student).

Part 2, per dial, method and seed: a scratch-backend run from that warm start, held-out greedy
accuracy every ``eval_every`` steps. Every method gets the same warm start, prompts, group size,
completion budget and steps; its learning rate is picked from ``--lr-grid`` by the median final
accuracy on ``--tune-seeds`` (at the top of the dial) and then reported on ``--seeds``, so no method is
judged on seeds it was tuned on (``--lr METHOD=LR`` pins one instead).

Writes ``{"runs": [{"method", "dial", "seed", "final_acc", "acc_by_step": [[step, acc], ...]}],
"start_acc": {dial: acc}, "teacher": {dial: {...}}, "lr": {method: lr}, "tuning": [...]}`` in the
results file's ``runs`` / ``summary`` (``benchmarks/results/sdpo_lab.json`` by default) and prints a table.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from pathlib import Path

from _common import machine, median, table, write_results
from bench_sdpo import SDPO_ONLY  # the SDPO-only trainer keys, dropped for grpo

# the dial: SFT steps on teacher prompts (0: the model never saw one)
DIALS = [0, 300, 1000]
PLAIN_SFT_STEPS = 2000
LAB = {"max_position_embeddings": 256, "sft_steps": PLAIN_SFT_STEPS, "copy_fraction": 0.0, "n_eval": 200}
BASE = {
    "algorithm": "sdpo", "backend": "scratch",
    "model": {"name": "tiny-lab", "lab": LAB},
    "task": {"name": "long_addition", "n_eval": 200, "seed": 0},
    "reward": {"type": "feedback"},           # exact match; the digit feedback is read only by the teachers that use it
    "trainer": {"max_steps": 200, "prompts_per_step": 16, "num_generations": 8, "learning_rate": 3.0e-4,
                "lr_scheduler_type": "constant", "temperature": 1.0, "max_completion_length": 7,
                "distillation_mode": "sampled_token", "distillation_alpha": 1.0, "distillation_weight": 1.0,
                "teacher_model_kind": "ema", "teacher_update_rate": 0.05, "success_reward_threshold": 1.0,
                "include_environment_feedback": False, "eval_every": 25, "seed": 0},
    "output_dir": "runs/sdpo_lab",
}



def method_config(method: str) -> dict:
    """The run config of ``method`` (the dial and the learning rate are set per run)."""
    data = copy.deepcopy(BASE)
    t = data["trainer"]
    if method == "grpo":
        data["algorithm"] = "grpo"
        data["trainer"] = {k: v for k, v in t.items() if k not in SDPO_ONLY}
    elif method == "sdpo":                        # successful siblings only
        pass
    elif method == "sdpo_feedback":               # plus feedback, TRL's placement (with a demonstration too)
        t["include_environment_feedback"] = True
    elif method == "sdpo_feedback_only_without_solution":   # feedback only where no sibling succeeded
        t.update(include_environment_feedback=True, environment_feedback_only_without_solution=True)
    elif method == "sdpo_topk":                   # logit-level: top-100 with a tail bucket
        t.update(distillation_mode="topk_logits", distillation_topk=100, distillation_add_tail=True)
    elif method == "sdpo_full_logits":
        t.update(distillation_mode="full_logits")
    elif method == "sdpo_frozen":
        t["teacher_model_kind"] = "base"
    elif method == "sdpo_live":
        t["teacher_model_kind"] = "live"
    else:
        raise SystemExit(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    return data


METHODS = ("grpo", "sdpo", "sdpo_feedback", "sdpo_feedback_only_without_solution", "sdpo_topk", "sdpo_full_logits",
           "sdpo_frozen", "sdpo_live")


def dial_values(raw: list[str] | None) -> list[int]:
    if not raw:
        return list(DIALS)
    out = []
    for d in raw:
        value = {"min": DIALS[0], "max": DIALS[-1]}.get(d, d)
        try:
            out.append(int(value))
        except ValueError:
            raise SystemExit(f"--dial takes step counts or min / max, got {d!r}") from None
    return out


def run(method: str, dial: int, seed: int, steps: int, lr: float) -> dict:
    """One training run; its held-out accuracy by step."""
    from sdpo_kit.cli import train
    from sdpo_kit.registry import config_from_dict

    data = method_config(method)
    data["model"]["lab"] = {**data["model"]["lab"], "context_steps": dial}
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = train(config_from_dict(data, {"trainer.seed": seed, "trainer.max_steps": steps,
                                          "trainer.learning_rate": lr, "output_dir": out}),
                  config_path="benchmarks/bench_sdpo_lab.py")
        wall = time.perf_counter() - t0
    acc = [[r["step"], r["eval/accuracy"]] for r in s["history"] if r.get("eval/accuracy") is not None]
    return {"method": method, "dial": dial, "seed": seed, "lr": lr, "steps": steps, "start_acc": s["before"],
            "final_acc": s["after"], "acc_by_step": acc, "wall_s": round(wall, 1)}


def teacher_table(dials: list[int]) -> dict:
    from sdpo_kit.lab.model import LabConfig, warm_start
    from sdpo_kit.lab.tasks import make_task
    from sdpo_kit.sdpo.teacher_quality import teacher_quality

    task = make_task(BASE["task"]["name"], n_eval=BASE["task"]["n_eval"], seed=BASE["task"]["seed"])
    out = {}
    for d in dials:
        t0 = time.perf_counter()
        cfg = LabConfig(task=BASE["task"]["name"], digits=task.digits, terms=task.terms, **{**LAB, "context_steps": d})
        model, tok = warm_start(cfg)
        out[str(d)] = {**teacher_quality(model, tok, task, task.splits()[1]), "warm_start_s": round(time.perf_counter() - t0, 1)}
        print(f"dial {d}: {out[str(d)]}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--dial", nargs="+", help=f"dial settings (context SFT steps) from {DIALS}, or min / max")
    ap.add_argument("--methods", nargs="+", default=["grpo", "sdpo", "sdpo_feedback"], choices=METHODS)
    ap.add_argument("--steps", type=int, default=BASE["trainer"]["max_steps"])
    ap.add_argument("--out", default=None, help="results file (default benchmarks/results/sdpo_lab.json)")
    ap.add_argument("--tune-seeds", type=int, nargs="+", default=[100, 101, 102])
    ap.add_argument("--lr-grid", type=float, nargs="+", default=[1e-4, 3e-4, 1e-3])
    ap.add_argument("--lr", nargs="+", default=[], help="METHOD=LR: pin a method's learning rate (no tuning)")
    ap.add_argument("--no-runs", action="store_true", help="part 1 only: the dial's teacher table")
    args = ap.parse_args()
    overlap = set(args.seeds) & set(args.tune_seeds)
    if overlap:
        raise SystemExit(f"seeds {sorted(overlap)} are both tuning and reporting seeds")
    dials = dial_values(args.dial)
    pinned = {}
    for item in args.lr:
        name, _, value = item.partition("=")
        if name not in METHODS or not value:
            raise SystemExit(f"--lr takes METHOD=LR with METHOD from {METHODS}, got {item!r}")
        pinned[name] = float(value)

    teacher = teacher_table(dials)
    runs, tuning, lrs = [], [], {}
    if not args.no_runs:
        top = max(dials)
        for method in args.methods:
            if method in pinned:
                lrs[method] = pinned[method]
                continue
            scores = {}
            for lr in args.lr_grid:
                finals = [run(method, top, s, args.steps, lr) for s in args.tune_seeds]
                tuning += finals
                scores[lr] = median([r["final_acc"] for r in finals])
                print(f"tune {method} lr {lr:g}: median final {scores[lr]:.3f}", flush=True)
            lrs[method] = max(scores, key=lambda lr: (scores[lr], -lr))   # ties: the smaller step
        for d in dials:
            for method in args.methods:
                for s in args.seeds:
                    runs.append(run(method, d, s, args.steps, lrs[method]))
                    r = runs[-1]
                    print(f"dial {d} {method} seed {s}: {r['start_acc']:.3f} -> {r['final_acc']:.3f} ({r['wall_s']} s)",
                          flush=True)

    print(f"\nmachine: {machine()}\n")
    print(table(["dial", "plain", "demo", "feedback", "right-token share", "token win demo", "token win feedback"],
                [[d, q["plain_acc"], q["demo_acc"], q["feedback_acc"], q["right_token_frac"], q["token_win_demo"],
                  q["token_win_feedback"]] for d, q in teacher.items()]))
    if runs:
        rows = []
        for d in dials:
            for m in args.methods:
                mine = [r for r in runs if r["dial"] == d and r["method"] == m]
                rows.append([d, m, lrs[m], median([r["final_acc"] for r in mine]),
                             ", ".join(f"{r['final_acc']:.3f}" for r in mine)])
        print(table(["dial", "method", "lr", "final (median)", "per seed"], rows))
    start_acc = {d: q["plain_acc"] for d, q in teacher.items()}
    summary = {"start_acc": start_acc, "teacher": teacher, "lr": lrs, "tuning": tuning}
    name = Path(args.out).stem if args.out else "sdpo_lab"
    path = write_results(name, config={"seeds": args.seeds, "dials": dials, "methods": args.methods,
                                       "steps": args.steps, "tune_seeds": args.tune_seeds, "lr_grid": args.lr_grid,
                                       "pinned_lr": pinned, "base": BASE}, runs=runs, summary=summary)
    payload = json.loads(path.read_text())      # the contract's top-level keys, beside write_results' own
    payload.update(start_acc=start_acc, teacher=teacher, lr=lrs)
    path.write_text(json.dumps(payload, indent=1) + "\n")
    if args.out and Path(args.out).resolve() != path.resolve():
        Path(args.out).write_text(path.read_text())


if __name__ == "__main__":
    main()
