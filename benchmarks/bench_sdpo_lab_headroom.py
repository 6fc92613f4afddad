"""Does GRPO climb in the skill lab when the warm start leaves it headroom?

    python benchmarks/bench_sdpo_lab_headroom.py [--sft-steps N ...] [--widths W ...] [--lrs LR ...]
                                                 [--seeds S ...] [--steps N] [--jobs J] [--out FILE]

How many steps SDPO needs to reach GRPO's final accuracy (``bench_sdpo_lab.py``) means something only
where GRPO still improves. On the lab's recipe (``configs/sdpo_lab.yaml``: 2000 plain SFT steps) it
does not (``bench_sdpo_lab_signal.py``). So this script varies what the warm start leaves to learn:
the plain SFT budget (``model.lab.sft_steps``; the context steps stay at half of it, the top dial's
share, 1000 of 2000) and optionally the model's width (``hidden_size``, the MLP three times as wide),
and runs GRPO with the lab's recipe from each warm start at every learning rate of ``--lrs`` on every
seed, held-out greedy accuracy every ``eval_every`` steps, and avg@16 (the mean success rate over 16
samples at the training temperature, the paper's measure) at the start and the end. Nothing is tuned or
picked: every cell of the grid is reported, medians over seeds. Each warm start's teacher is measured
too (``sdpo.quality``), since that comparison needs a warm start where GRPO climbs *and* the
teacher reads its context.

Writes ``benchmarks/results/sdpo_lab_headroom.json`` (``runs``: one per warm start, learning rate and
seed, with ``acc_by_step``; ``summary.table``) and prints a table.
"""

from __future__ import annotations

import argparse
import time

import runner
from _common import median, parse_args, results_path, write_results
from lab import method_config, train_run
from runner import add_runner_args, journal_path

from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS

AVG_K = 16   # samples per held-out row for avg@k (the SDPO paper reports avg@16)


def lab_overrides(sft_steps: int, width: int) -> dict:
    """The lab's warm start with ``sft_steps`` plain steps (context steps: half of them) at ``width``."""
    return {"sft_steps": sft_steps, "sft_cycle_steps": min(500, sft_steps), "context_steps": sft_steps // 2,
            "hidden_size": width, "intermediate_size": 3 * width}


def grpo_config(sft_steps: int, width: int) -> dict:
    data = method_config("grpo")
    data["model"]["lab"] = {**data["model"]["lab"], **lab_overrides(sft_steps, width)}
    return data


def avg_at_k(model, tok, cfg, k: int = AVG_K) -> float:
    """Held-out avg@k: the mean over rows of the success rate of k samples at the training temperature."""
    from sdpo_kit.registry import make_task
    from sdpo_kit.rewards import feedback_reward
    from sdpo_kit.sdpo.at_test_time import success_rates

    task = make_task(**cfg.task)
    rates = success_rates(model, tok, task, task.splits()[1], feedback_reward(style=task.feedback_style),
                          samples=k, temperature=cfg.trainer.temperature, seed=0)
    return sum(rates) / len(rates)


def warm_start(sft_steps: int, width: int) -> dict:
    """Build (or load from the cache) one warm start; its held-out greedy accuracy, avg@k and SDPO's
    teacher measures (``sdpo.quality`` with the lab's templates: can it read a sibling's answer?)."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task
    from sdpo_kit.sdpo.quality import teacher_quality

    cfg = config_from_dict(grpo_config(sft_steps, width))
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    t, heldout = method_config("sdpo")["trainer"], task.splits()[1]
    q = teacher_quality(model, tok, task, heldout,
                        **{k: t[k] for k in TEMPLATE_KEYS})
    return {"context_steps": lab_overrides(sft_steps, width)["context_steps"],
            "greedy": task.evaluate(model, tok, heldout), "avg_at_k": avg_at_k(model, tok, cfg),
            "teacher": {k: v for k, v in q.items() if k != "example"}}


def run(spec: tuple) -> dict:
    """One GRPO run (``bench_sdpo_lab.train_run``) from the warm start ``(sft_steps, width)``."""
    from sdpo_kit.registry import config_from_dict

    sft_steps, width, lr, seed, steps = spec
    lab = lab_overrides(sft_steps, width)
    s, wall = train_run("grpo", lab.pop("context_steps"), seed, steps, lr, "benchmarks/bench_sdpo_lab_headroom.py", lab)
    cfg = config_from_dict(grpo_config(sft_steps, width))        # the run's task and temperature, for avg@k
    acc = [[r["step"], r["eval/accuracy"]] for r in s["history"] if r.get("eval/accuracy") is not None]
    return {"sft_steps": sft_steps, "width": width, "lr": lr, "seed": seed, "steps": steps,
            "start_acc": s["before"], "final_acc": s["after"], "best_acc": max(a for _, a in acc),
            "final_avg_at_k": avg_at_k(s["model"], s["tokenizer"], cfg), "acc_by_step": acc,
            "wall_s": round(wall, 1)}


def run_all(specs: list[tuple], jobs: int, journal=None) -> list[dict]:
    """``run`` for each spec, results in order, on ``jobs`` processes (one torch thread each); the runs the
    ``journal`` holds are kept (``runner.run_all``)."""
    def show(r):
        print(f"sft {r['sft_steps']} width {r['width']} lr {r['lr']:g} seed {r['seed']}: {r['start_acc']:.3f} -> "
              f"{r['final_acc']:.3f} (best {r['best_acc']:.3f}, avg@{AVG_K} {r['final_avg_at_k']:.3f}, "
              f"{r['wall_s']} s)", flush=True)

    return runner.run_all(run, specs, jobs=jobs, show=show, journal=journal)


def summarize(runs: list[dict], starts: dict) -> list[list]:
    """One row per warm start and learning rate: medians over seeds of start, final, best and final - start,
    the seeds' finals, the median curve, then avg@k at the start and the median avg@k at the end."""
    rows = []
    for key in dict.fromkeys((r["sft_steps"], r["width"], r["lr"]) for r in runs):
        mine = [r for r in runs if (r["sft_steps"], r["width"], r["lr"]) == key]
        steps = [s for s, _ in mine[0]["acc_by_step"]]
        curve = [median([dict(map(tuple, r["acc_by_step"]))[s] for r in mine]) for s in steps]
        rows.append([*key, median([r["start_acc"] for r in mine]), median([r["final_acc"] for r in mine]),
                     median([r["best_acc"] for r in mine]),
                     median([r["final_acc"] - r["start_acc"] for r in mine]),
                     ", ".join(f"{r['final_acc']:.3f}" for r in mine), list(zip(steps, curve)),
                     starts[f"{key[0]}/{key[1]}"]["avg_at_k"], median([r["final_avg_at_k"] for r in mine])])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sft-steps", type=int, nargs="+", default=[1000, 1500, 2000], help="plain SFT budgets")
    ap.add_argument("--widths", type=int, nargs="+", default=[64], help="hidden sizes (the lab's is 64)")
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-5, 3e-5, 1e-4, 3e-4], help="GRPO learning rates")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=300, help="GRPO steps (the lab's budget is 200)")
    add_runner_args(ap, "sdpo_lab_headroom")
    args = parse_args(ap)
    if min(args.sft_steps) < 2 or min(args.widths) < 4 or args.steps < 1 or min(args.lrs) <= 0 or args.jobs < 1:
        raise SystemExit("--sft-steps >= 2, --widths >= 4, --steps >= 1, --jobs >= 1 and positive --lrs, please")
    starts = {}
    for b in args.sft_steps:          # every warm start built (and cached) before any run: no two builds race
        for w in args.widths:
            t0 = time.perf_counter()
            starts[f"{b}/{w}"] = warm_start(b, w)
            print(f"warm start sft {b} width {w}: {starts[f'{b}/{w}']} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    specs = [(b, w, lr, seed, args.steps) for b in args.sft_steps for w in args.widths for lr in args.lrs
             for seed in args.seeds]
    runs = run_all(specs, args.jobs, journal_path(results_path("sdpo_lab_headroom", args.out).stem, args.resume))

    rows = summarize(runs, starts)
    write_results("sdpo_lab_headroom", out=args.out,
                  config={"sft_steps": args.sft_steps, "widths": args.widths, "lrs": args.lrs, "seeds": args.seeds,
                          "steps": args.steps, "avg_k": AVG_K, "start": starts},
                  runs=runs, summary={"table": rows})


if __name__ == "__main__":
    main()
