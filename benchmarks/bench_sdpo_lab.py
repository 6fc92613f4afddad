"""SDPO where its premise holds: the skill lab's dial, measured.

    python benchmarks/bench_sdpo_lab.py [--seeds S ...] [--dial D ...] [--methods M ...] [--steps N] [--out FILE]
                                        [--tune-seeds S ...] [--lr-grid LR ...] [--lr METHOD=LR ...] [--no-runs]
                                        [--sft-steps N] [--runs-at every|top]
                                        [--discovery] [--budgets K ...] [--discovery-rows N]

The lab: ``long_addition`` (two 4-digit operands; a 4-5 digit answer) with digit feedback that names
the wrong places (``tasks/feedback.py``), and a warm start whose in-context skill is set by the dial,
``LabConfig.context_steps`` (``lab/skill.py``): SFT batches of SDPO's own teacher prompts joined to the
last context_steps of a fixed budget of plain steps (``context_mix: joint``). ``--dial`` takes step counts from
``DIALS`` or ``min`` / ``max``.
The recipe is ``configs/sdpo_lab.yaml`` (TRL's SDPO defaults); ``sdpo_paper`` runs ``configs/sdpo_paper.yaml``.

Part 1, per dial: ``sdpo.quality`` of the warm start on the held-out split (plain accuracy,
teacher accuracy with a sibling's success, with feedback on its own failed attempt, and the share of
wrong tokens where the teacher puts more mass on the right token than the student).

Part 2, per dial, method and seed: a scratch-backend run from that warm start, held-out greedy
accuracy every ``eval_every`` steps. Every method gets the same warm start, prompts, group size,
completion budget and steps; its learning rate is picked from ``--lr-grid`` by the median final
accuracy on ``--tune-seeds`` (at the top of the dial) and then reported on ``--seeds``, so no method is
judged on seeds it was tuned on (``--lr METHOD=LR`` pins one instead). Methods: ``grpo``; ``sdpo``
(successful siblings only); ``sdpo_feedback`` (and the digit feedback, TRL's placement);
``sdpo_feedback_only_without_solution``; credit ``sdpo_sequence`` / ``sdpo`` (token) / ``sdpo_topk`` /
``sdpo_full_logits``; ``sdpo_paper``; teachers ``sdpo_frozen`` / ``sdpo_live`` (``sdpo``'s is the EMA);
``sdpo_loss_third`` (the loss times 1/3 at the same learning rate; every SDPO run logs its update norm).

A warm start other than the config's: ``--sft-steps N`` sets its plain SFT budget (the context steps, the dial,
are joined to the last of them, so each dial is at most N), and ``--runs-at top`` trains at the highest dial
only (the teacher table still covers every dial): ``sdpo_lab_room.json`` is 1500 plain steps, dials 1000 to
1500, runs at 1500 (``experiments.py``), where GRPO has more room than from the lab's own 2000.

Part 3 (``--discovery``), at the lowest and highest dial: on the held-out rows the warm start solves in
under 10% of 32 samples, the discovery rate within k attempts of best-of-k, multi-turn reprompting and
test-time SDPO (``sdpo/at_test_time.py``), batches of 8, all at max(k) attempts.

Writes ``{"runs": [{"method", "dial", "seed", "final_acc", "acc_by_step": [[step, acc], ...]}],
"start_acc": {dial: acc}, "teacher": {dial: {...}}, "lr": {method: lr}, "tuning": [...], "discovery": {dial: ...}}``
in the results file's ``runs`` / ``summary`` (``benchmarks/results/sdpo_lab.json`` by default) and prints a table.
"""

from __future__ import annotations

import argparse

from _common import parse_args, parse_pins, results_path, write_results
from lab import BASE_CONFIG, DIALS, METHODS, base, dial_values, pick_lrs, run_all, teacher_table, warm_start_for
from runner import add_runner_args, journal_path

from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS  # the teacher prompt's template keywords


def discovery(dials: list[int], budgets: list[int], batch_size: int, max_rows: int) -> dict:
    """Part 3: best-of-k vs multi-turn reprompting vs test-time SDPO on each dial's hard held-out rows."""
    from sdpo_kit.rewards import feedback_reward
    from sdpo_kit.sdpo.at_test_time import discovery_curves, hard_rows

    out = {}
    for d in dials:
        model, tok, task, cfg = warm_start_for(d)
        tr = cfg.trainer
        templates = {k: getattr(tr, k) for k in TEMPLATE_KEYS}
        reward = feedback_reward(style=task.feedback_style)
        hard = hard_rows(model, tok, task, task.splits()[1], reward, samples=32, below=0.1,
                         temperature=tr.temperature)
        out[str(d)] = discovery_curves(model, tok, task, hard[:max_rows], reward, budgets=budgets,
                                       batch_size=batch_size, temperature=tr.temperature, seed=0, **templates)
        out[str(d)]["hard_of_heldout"] = [len(hard), len(task.splits()[1])]
        print(f"dial {d}: discovery on {len(hard[:max_rows])} hard rows:",
              {m: v["discovery"] for m, v in out[str(d)]["methods"].items()}, flush=True)
    return out


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--dial", nargs="+", help=f"dial settings (context SFT steps) from {DIALS}, or min / max")
    ap.add_argument("--methods", nargs="+", default=["grpo", "sdpo", "sdpo_feedback"], choices=METHODS)
    ap.add_argument("--steps", type=int, default=None, help=f"training steps (default: {BASE_CONFIG}'s max_steps)")
    add_runner_args(ap, "sdpo_lab")
    ap.add_argument("--tune-seeds", type=int, nargs="+", default=[100, 101, 102])
    # from 1e-5: bench_sdpo_lab_headroom.py measured GRPO climbing only at 1e-5 to 1e-4 and falling at 3e-4 from
    # every warm start; 1e-3 (the old grid's top) took every method to 0.000 in tuning, so it is left out
    ap.add_argument("--lr-grid", type=float, nargs="+", default=[1e-5, 3e-5, 1e-4, 3e-4])
    ap.add_argument("--lr", nargs="+", default=[], help="METHOD=LR: pin a method's learning rate (no tuning)")
    ap.add_argument("--no-runs", action="store_true", help="no training runs (the teacher table, and --discovery)")
    ap.add_argument("--sft-steps", type=int, default=None, help="the warm start's plain SFT budget (default: the "
                    "config's, 2000); each dial is at most this")
    ap.add_argument("--runs-at", choices=("every", "top"), default="every", help="train at every dial, or at the "
                    "highest only")
    ap.add_argument("--discovery", action="store_true", help="part 3: test-time discovery curves at the lowest and "
                    "highest dial given")
    ap.add_argument("--budgets", type=int, nargs="+", default=[8, 16, 32, 64, 128], help="attempts k for part 3")
    ap.add_argument("--discovery-rows", type=int, default=40, help="at most this many hard rows per dial in part 3")
    return ap


def tune_and_run(args, dials: list[int], lab: dict | None, pinned: dict, journal) -> tuple[list, list, dict]:
    """Part 2: each method's learning rate (pinned, or tuned on ``--tune-seeds`` at the top dial), then its runs
    on ``--seeds``: ``(runs, tuning, lrs)``."""
    top = max(dials)
    lrs = {m: pinned[m] for m in args.methods if m in pinned}
    to_tune = [m for m in args.methods if m not in pinned]
    tuning = run_all([(m, top, s, args.steps, lr, lab) for m in to_tune for lr in args.lr_grid
                      for s in args.tune_seeds], args.jobs, "tune", journal)
    lrs.update(pick_lrs(tuning, to_tune, args.lr_grid))
    runs = run_all([(m, d, s, args.steps, lrs[m], lab) for d in ([top] if args.runs_at == "top" else dials)
                    for m in args.methods for s in args.seeds], args.jobs, "run", journal)
    return runs, tuning, lrs


def main():
    ap = arguments()
    args = parse_args(ap)
    args.steps = args.steps or base()["trainer"]["max_steps"]
    overlap = set(args.seeds) & set(args.tune_seeds)
    if overlap:
        raise SystemExit(f"seeds {sorted(overlap)} are both tuning and reporting seeds")
    dials = dial_values(args.dial)
    lab = None if args.sft_steps is None else {"sft_steps": args.sft_steps}
    bad = [d for d in dials if lab and not 0 <= d <= lab["sft_steps"]]
    if bad:   # context steps are joined to the last ``dial`` of the plain steps: fail before any warm start
        raise SystemExit(f"--dial takes context steps from 0 to --sft-steps ({args.sft_steps}), got {bad}")
    pinned = parse_pins(args.lr, METHODS)

    journal = journal_path(results_path("sdpo_lab", args.out).stem, args.resume)
    teacher = teacher_table(dials, lab)
    runs, tuning, lrs = ([], [], {}) if args.no_runs else tune_and_run(args, dials, lab, pinned, journal)

    found = discovery(sorted({min(dials), max(dials)}), args.budgets, 8, args.discovery_rows) if args.discovery else {}
    start_acc = {d: q["plain_acc"] for d, q in teacher.items()}
    summary = {"start_acc": start_acc, "teacher": teacher, "lr": lrs, "tuning": tuning, "discovery": found}
    write_results("sdpo_lab", out=args.out,
                  config={**(lab or {}), "seeds": args.seeds, "dials": dials, "methods": args.methods,
                          "steps": args.steps, "tune_seeds": args.tune_seeds, "lr_grid": args.lr_grid,
                          "pinned_lr": pinned, "base": BASE_CONFIG, "budgets": args.budgets, "jobs": args.jobs,
                          **({"runs_at": "top"} if args.runs_at == "top" else {})},
                  runs=runs, summary=summary,
                  extra={"start_acc": start_acc, "teacher": teacher, "lr": lrs})   # the contract's top-level keys

if __name__ == "__main__":
    main()
