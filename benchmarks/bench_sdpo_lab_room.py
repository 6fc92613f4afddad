"""How soon SDPO reaches GRPO's final accuracy, from a warm start that leaves GRPO room *and* has a teacher
that reads.

    python benchmarks/bench_sdpo_lab_room.py [--sft-steps N] [--dial C ...] [--methods M ...] [--seeds S ...]
                                             [--tune-seeds S ...] [--lr-grid LR ...] [--steps N] [--jobs J]
                                             [--out FILE]

The skill lab's own warm start (``configs/sdpo_lab.yaml``: 2000 plain SFT steps) leaves GRPO little
room (``bench_sdpo_lab_signal.py``), and the warm starts of ``bench_sdpo_lab_headroom.py`` that leave
it more (1000 or 1500 plain steps, context steps at half of them) have no teacher that reads. This
script separates the two: a smaller plain budget (``--sft-steps``, default 1500) with the context steps
(``--dial``, the skill lab's dial, ``model.lab.context_steps``) set apart from it, up to the whole budget. The runs,
the tuning and the teacher table are ``bench_sdpo_lab.py``'s own, with ``sft_steps`` over the config's.

Part 1, per dial: the warm start's teacher on the held-out split (``sdpo.teacher_quality``, as in
``bench_sdpo_lab.py``'s dial table).

Part 2, at the highest dial given: ``bench_sdpo_lab.py``'s protocol, unchanged: every method from the
same warm start with the same prompts, group size, completion budget and steps; each method's learning
rate picked from ``--lr-grid`` by its median final held-out accuracy on ``--tune-seeds``, then reported
on ``--seeds``; held-out greedy accuracy every ``eval_every`` steps.

Writes ``benchmarks/results/sdpo_lab_room.json`` in ``bench_sdpo_lab.py``'s shape (``runs`` with
``method``, ``dial``, ``seed``, ``final_acc``, ``acc_by_step``; ``summary.teacher`` / ``lr`` / ``tuning``;
``config.sft_steps``), so ``reports.sdpo_lab`` reads it the same way, and prints a table.
"""

from __future__ import annotations

import argparse

from _common import machine, median, parse_args, results_path, table, write_results
from lab import METHODS, pick_lrs, run_all, teacher_row
from runner import add_runner_args, journal_path


def check_dial(sft_steps: int, dial: int) -> None:
    """Context steps are joined to the last ``dial`` of the ``sft_steps`` plain steps (the lab's mix)."""
    if not 0 <= dial <= sft_steps:
        raise SystemExit(f"--dial takes context steps from 0 to --sft-steps ({sft_steps}), got {dial}")


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
    add_runner_args(ap, "sdpo_lab_room")
    args = parse_args(ap)
    if set(args.seeds) & set(args.tune_seeds):
        raise SystemExit(f"seeds {sorted(set(args.seeds) & set(args.tune_seeds))} are both tuning and reporting seeds")
    dials = sorted(set(args.dial))
    for d in dials:
        check_dial(args.sft_steps, d)                           # bad dials fail here, before any warm start
    lab, here = {"sft_steps": args.sft_steps}, "benchmarks/bench_sdpo_lab_room.py"
    teacher = {}
    for d in dials:
        teacher[str(d)] = teacher_row(d, lab)
        print(f"{args.sft_steps}+{d}: {teacher[str(d)]}", flush=True)

    top = dials[-1]
    journal = journal_path(results_path("sdpo_lab_room", args.out).stem, args.resume)
    tuning = run_all([(m, top, s, args.steps, lr, lab, here) for m in args.methods for lr in args.lr_grid
                      for s in args.tune_seeds], args.jobs, "tune", journal)
    lrs = pick_lrs(tuning, args.methods, args.lr_grid)
    runs = run_all([(m, top, s, args.steps, lrs[m], lab, here) for m in args.methods for s in args.seeds],
                   args.jobs, "run", journal)

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
    write_results("sdpo_lab_room", out=args.out,
                  config={"sft_steps": args.sft_steps, "seeds": args.seeds, "dials": dials, "methods": args.methods,
                          "steps": args.steps, "tune_seeds": args.tune_seeds, "lr_grid": args.lr_grid,
                          "jobs": args.jobs},
                  runs=runs, summary=summary)


if __name__ == "__main__":
    main()
