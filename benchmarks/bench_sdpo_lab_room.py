"""Goal 2.2 on a warm start that leaves GRPO room *and* has a teacher that reads (issue 17).

    python benchmarks/bench_sdpo_lab_room.py [--sft-steps N] [--dial C ...] [--methods M ...] [--seeds S ...]
                                             [--tune-seeds S ...] [--lr-grid LR ...] [--steps N] [--jobs J]
                                             [--out FILE]

The skill lab's own warm start (``configs/sdpo_lab.yaml``: 2000 plain SFT steps) leaves GRPO little
room (``bench_sdpo_lab_signal.py``), and the warm starts of ``bench_sdpo_lab_headroom.py`` that leave
it more (1000 or 1500 plain steps, context steps at half of them) have no teacher that reads. This
script separates the two: a smaller plain budget (``--sft-steps``, default 1500) with the context steps
(``--dial``, the skill lab's dial, ``model.lab.context_steps``) set apart from it, up to the whole budget.

Part 1, per dial: the warm start's teacher on the held-out split (``sdpo.teacher_quality``, as in
``bench_sdpo_lab.py``'s dial table).

Part 2, at the highest dial given: ``bench_sdpo_lab.py``'s protocol, unchanged: every method from the
same warm start with the same prompts, group size, completion budget and steps; each method's learning
rate picked from ``--lr-grid`` by its median final held-out accuracy on ``--tune-seeds``, then reported
on ``--seeds``; held-out greedy accuracy every ``eval_every`` steps.

Writes ``benchmarks/results/sdpo_lab_room.json`` in ``bench_sdpo_lab.py``'s shape (``runs`` with
``method``, ``dial``, ``seed``, ``final_acc``, ``acc_by_step``; ``summary.teacher`` / ``lr`` / ``tuning``;
``config.sft_steps``), so ``report_sdpo_lab`` reads it the same way, and prints a table.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import machine, median, table, write_results
from bench_sdpo_lab import METHODS, method_config


def lab_config(method: str, sft_steps: int, dial: int) -> dict:
    """``method``'s run config (``bench_sdpo_lab.method_config``) from the warm start with ``sft_steps``
    plain SFT steps and ``dial`` context steps (joined to the last ``dial`` of them, the lab's mix)."""
    if not 0 <= dial <= sft_steps:
        raise SystemExit(f"--dial takes context steps from 0 to --sft-steps ({sft_steps}), got {dial}")
    data = method_config(method)
    data["model"]["lab"] = {**data["model"]["lab"], "sft_steps": sft_steps, "context_steps": dial}
    return data


def run(method: str, sft_steps: int, dial: int, seed: int, steps: int, lr: float) -> dict:
    """One training run (``sdpo_kit.cli.train``) in a temporary folder; its held-out accuracy by step."""
    from sdpo_kit.cli import train
    from sdpo_kit.registry import config_from_dict

    with tempfile.TemporaryDirectory() as out:
        cfg = config_from_dict(lab_config(method, sft_steps, dial), {
            "trainer.seed": seed, "trainer.max_steps": steps, "trainer.learning_rate": lr, "output_dir": out})
        t0 = time.perf_counter()
        s = train(cfg, config_path="benchmarks/bench_sdpo_lab_room.py")
        wall = time.perf_counter() - t0
    acc = [[r["step"], r["eval/accuracy"]] for r in s["history"] if r.get("eval/accuracy") is not None]
    return {"method": method, "dial": dial, "sft_steps": sft_steps, "seed": seed, "lr": lr, "steps": steps,
            "start_acc": s["before"], "final_acc": s["after"], "acc_by_step": acc, "wall_s": round(wall, 1)}


def _run(spec: tuple) -> dict:
    return run(*spec)


def run_all(specs: list[tuple], jobs: int, label: str) -> list[dict]:
    """``run(*spec)`` for each spec, results in order, on ``jobs`` processes (one torch thread each)."""
    def show(r):
        print(f"{label} {r['sft_steps']}+{r['dial']} {r['method']} lr {r['lr']:g} seed {r['seed']}: "
              f"{r['start_acc']:.3f} -> {r['final_acc']:.3f} ({r['wall_s']} s)", flush=True)
        return r

    if jobs <= 1:
        return [show(run(*spec)) for spec in specs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        return [show(r) for r in pool.map(_run, specs)]


def teacher_row(sft_steps: int, dial: int) -> dict:
    """Build (or load) one warm start and measure its teacher on the held-out split."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.lab.tasks import make_task
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.sdpo.teacher_quality import teacher_quality

    cfg = config_from_dict(lab_config("sdpo", sft_steps, dial))
    task = make_task(**cfg.task)
    t0 = time.perf_counter()
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    templates = {k: getattr(cfg.trainer, k) for k in ("reprompt_template", "solution_template", "feedback_template")}
    q = teacher_quality(model, tok, task, task.splits()[1], **templates)
    return {**q, "warm_start_s": round(time.perf_counter() - t0, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sft-steps", type=int, default=1500, help="the plain SFT budget (the lab's is 2000)")
    ap.add_argument("--dial", type=int, nargs="+", default=[1000, 1250, 1500],
                    help="context steps per warm start (the teacher table); training runs at the highest")
    ap.add_argument("--methods", nargs="+", default=["grpo", "sdpo", "sdpo_feedback"], choices=METHODS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--tune-seeds", type=int, nargs="+", default=[100, 101, 102])
    ap.add_argument("--lr-grid", type=float, nargs="+", default=[1e-5, 3e-5, 1e-4, 3e-4])
    ap.add_argument("--steps", type=int, default=200, help="training steps (the lab's budget)")
    ap.add_argument("--jobs", type=int, default=1, help="training runs at once, one process each (one torch thread)")
    ap.add_argument("--out", default=None, help="results file (default benchmarks/results/sdpo_lab_room.json)")
    args = ap.parse_args()
    if set(args.seeds) & set(args.tune_seeds):
        raise SystemExit(f"seeds {sorted(set(args.seeds) & set(args.tune_seeds))} are both tuning and reporting seeds")
    dials = sorted(set(args.dial))
    for d in dials:
        lab_config("grpo", args.sft_steps, d)                   # bad dials fail here, before any warm start
    teacher = {}
    for d in dials:
        teacher[str(d)] = teacher_row(args.sft_steps, d)
        print(f"{args.sft_steps}+{d}: {teacher[str(d)]}", flush=True)

    top, lrs = dials[-1], {}
    tuning = run_all([(m, args.sft_steps, top, s, args.steps, lr) for m in args.methods for lr in args.lr_grid
                      for s in args.tune_seeds], args.jobs, "tune")
    for m in args.methods:
        scores = {lr: median([r["final_acc"] for r in tuning if r["method"] == m and r["lr"] == lr])
                  for lr in args.lr_grid}
        print(f"tune {m}: median final by lr {scores}", flush=True)
        lrs[m] = max(scores, key=lambda lr: (scores[lr], -lr))    # ties: the smaller step (as bench_sdpo_lab)
    runs = run_all([(m, args.sft_steps, top, s, args.steps, lrs[m]) for m in args.methods for s in args.seeds],
                   args.jobs, "run")

    print(f"\nmachine: {machine()}\n")
    print(table(["plain + context steps", "plain", "demo", "feedback", "token win demo", "token win feedback"],
                [[f"{args.sft_steps}+{d}", q["plain_acc"], q["demo_acc"], q["feedback_acc"], q["token_win_demo"],
                  q["token_win_feedback"]] for d, q in teacher.items()]))
    print(table(["method", "lr", "start", "final (median)", "per seed"],
                [[m, f"{lrs[m]:g}", median([r["start_acc"] for r in runs if r["method"] == m]),
                  median([r["final_acc"] for r in runs if r["method"] == m]),
                  ", ".join(f"{r['final_acc']:.3f}" for r in runs if r["method"] == m)] for m in args.methods]))
    summary = {"start_acc": {d: q["plain_acc"] for d, q in teacher.items()}, "teacher": teacher, "lr": lrs,
               "tuning": tuning}
    name = Path(args.out).stem if args.out else "sdpo_lab_room"
    write_results(name, config={"sft_steps": args.sft_steps, "seeds": args.seeds, "dials": dials,
                                "methods": args.methods, "steps": args.steps, "tune_seeds": args.tune_seeds,
                                "lr_grid": args.lr_grid, "jobs": args.jobs},
                  runs=runs, summary=summary)


if __name__ == "__main__":
    main()
