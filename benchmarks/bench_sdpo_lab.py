"""SDPO where its premise holds: the skill lab's dial, measured.

    python benchmarks/bench_sdpo_lab.py [--seeds S ...] [--dial D ...] [--methods M ...] [--steps N] [--out FILE]
                                        [--tune-seeds S ...] [--lr-grid LR ...] [--lr METHOD=LR ...] [--no-runs]
                                        [--discovery] [--budgets K ...] [--discovery-rows N]

The lab: ``long_addition`` (two 4-digit operands; a 4-5 digit answer) with digit feedback that names
the wrong places (``lab/feedback.py``), and a warm start whose in-context skill is set by the dial,
``LabConfig.context_steps`` (``lab/skill.py``): SFT batches of SDPO's own teacher prompts joined to the
last context_steps of a fixed budget of plain steps (``context_mix: joint``). ``--dial`` takes step counts from ``DIALS`` or ``min`` / ``max``.
The recipe is ``configs/sdpo_lab.yaml`` (TRL's SDPO defaults); ``sdpo_paper`` runs ``configs/sdpo_paper.yaml``.

Part 1, per dial: ``sdpo.teacher_quality`` of the warm start on the held-out split (plain accuracy,
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

Part 3 (``--discovery``), at the lowest and highest dial: on the held-out rows the warm start solves in
under 10% of 32 samples, the discovery rate within k attempts of best-of-k, multi-turn reprompting and
test-time SDPO (``sdpo/at_test_time.py``), batches of 8, all at max(k) attempts.

Writes ``{"runs": [{"method", "dial", "seed", "final_acc", "acc_by_step": [[step, acc], ...]}],
"start_acc": {dial: acc}, "teacher": {dial: {...}}, "lr": {method: lr}, "tuning": [...], "discovery": {dial: ...}}`` in the
results file's ``runs`` / ``summary`` (``benchmarks/results/sdpo_lab.json`` by default) and prints a table.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import runner
from _common import machine, median, parse_args, results_path, table, write_results
from bench_sdpo import SDPO_ONLY  # the SDPO-only trainer keys, dropped for grpo
from runner import add_runner_args, journal_path

from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS  # the teacher prompt's template keywords

# the dial: SFT steps on teacher prompts (0: the model never saw one); the rest of the recipe is the config's
DIALS = [0, 500, 1000]
BASE_CONFIG = "configs/sdpo_lab.yaml"       # the skill lab with TRL's SDPO defaults (token-level, alpha 1, EMA)
PAPER_CONFIG = "configs/sdpo_paper.yaml"    # the SDPO authors' recipe (lasgroup/SDPO) on the same lab


def base() -> dict:
    from sdpo_kit.core.config import read_config_file

    return read_config_file(BASE_CONFIG)


def method_config(method: str) -> dict:
    """The run config of ``method`` (the dial and the learning rate are set per run)."""
    from sdpo_kit.core.config import read_config_file

    data = base()
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
    elif method == "sdpo_sequence":               # sequence-level credit: one weight per completion
        t["distillation_mode"] = "sequence"
    elif method == "sdpo_topk":                   # logit-level: top-100 with a tail bucket
        t.update(distillation_mode="topk_logits", distillation_topk=100, distillation_add_tail=True)
    elif method == "sdpo_full_logits":
        t.update(distillation_mode="full_logits")
    elif method == "sdpo_paper":                  # the SDPO authors' recipe (configs/sdpo_paper.yaml)
        data = read_config_file(PAPER_CONFIG)
    elif method == "sdpo_frozen":
        t["teacher_model_kind"] = "base"
    elif method == "sdpo_live":
        t["teacher_model_kind"] = "live"
    elif method == "sdpo_loss_third":             # the loss times 1/3 at the same learning rate
        t["distillation_loss_scale"] = 1 / 3
    else:
        raise SystemExit(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    return data


METHODS = ("grpo", "sdpo", "sdpo_feedback", "sdpo_feedback_only_without_solution", "sdpo_sequence", "sdpo_topk",
           "sdpo_full_logits", "sdpo_paper", "sdpo_frozen", "sdpo_live", "sdpo_loss_third")


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


def lab_data(method: str, dial: int, lab: dict | None = None) -> dict:
    """``method``'s run config from the warm start at dial setting ``dial`` (``model.lab.context_steps``),
    with ``lab``'s other warm-start fields over the config's (``{"sft_steps": 1500}``, say)."""
    data = method_config(method)
    data["model"]["lab"] = {**data["model"]["lab"], **(lab or {}), "context_steps": dial}
    return data


def train_run(method: str, dial: int, seed: int, steps: int, lr: float,
              config_path: str = "benchmarks/bench_sdpo_lab.py", lab: dict | None = None) -> tuple[dict, float]:
    """``sdpo_kit.training.train`` on ``lab_data(method, dial, lab)`` with ``seed``, ``steps`` and ``lr``, in
    a temporary output folder (``config_path`` names the caller in the run's log line). Returns the
    summary (the trained model included) and the run's wall time in seconds."""
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.training import train

    data = lab_data(method, dial, lab)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = train(config_from_dict(data, {"trainer.seed": seed, "trainer.max_steps": steps,
                                          "trainer.learning_rate": lr, "output_dir": out}),
                  config_path=config_path)
        wall = time.perf_counter() - t0
    return s, wall


def run(method: str, dial: int, seed: int, steps: int, lr: float, lab: dict | None = None,
        config_path: str = "benchmarks/bench_sdpo_lab.py") -> dict:
    """One training run (``train_run``); its held-out accuracy by step, and ``lab``'s fields."""
    s, wall = train_run(method, dial, seed, steps, lr, config_path, lab)
    acc = [[r["step"], r["eval/accuracy"]] for r in s["history"] if r.get("eval/accuracy") is not None]
    norms = [[r["step"], round(r["sdpo/update_norm"], 6)] for r in s["history"] if "sdpo/update_norm" in r]
    return {"method": method, "dial": dial, **(lab or {}), "seed": seed, "lr": lr, "steps": steps,
            "start_acc": s["before"], "final_acc": s["after"], "acc_by_step": acc, "update_norm_by_step": norms,
            "wall_s": round(wall, 1)}


def _run(spec: tuple) -> dict:
    return run(*spec)


def run_all(specs: list[tuple], jobs: int, label: str, journal=None) -> list[dict]:
    """``run(*spec)`` for each spec, in order, on ``jobs`` processes (each training run uses one torch
    thread, the CLI's choice for the tiny lab; the warm starts are cached before any run starts); the runs
    the ``journal`` holds are kept (``runner.run_all``)."""
    def show(r):
        plain = f" (plain {r['sft_steps']})" if "sft_steps" in r else ""
        print(f"{label} dial {r['dial']}{plain} {r['method']} lr {r['lr']:g} seed {r['seed']}: {r['start_acc']:.3f} -> "
              f"{r['final_acc']:.3f} ({r['wall_s']} s)", flush=True)

    return runner.run_all(_run, specs, jobs=jobs, show=show, journal=journal)


def pick_lrs(tuning: list[dict], methods: list[str], grid: list[float]) -> dict:
    """Each method's learning rate: the one of ``grid`` with the best median final accuracy over its
    ``tuning`` runs (ties: the smaller step)."""
    lrs = {}
    for method in methods:
        scores = {lr: median([r["final_acc"] for r in tuning if r["method"] == method and r["lr"] == lr])
                  for lr in grid}
        print(f"tune {method}: median final by lr {scores}", flush=True)
        lrs[method] = max(scores, key=lambda lr: (scores[lr], -lr))
    return lrs


def warm_start_for(dial: int, lab: dict | None = None):
    """The warm start (model, tokenizer), the task and the config at one dial setting (``lab``: other
    warm-start fields, as in ``lab_data``)."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task

    cfg = config_from_dict(lab_data("sdpo", dial, lab))
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    return model, tok, task, cfg


def teacher_row(dial: int, lab: dict | None = None) -> dict:
    """Build (or load) one warm start and measure its teacher on the held-out split, with its build time."""
    from sdpo_kit.sdpo.teacher_quality import teacher_quality

    t0 = time.perf_counter()
    model, tok, task, cfg = warm_start_for(dial, lab)
    templates = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    return {**teacher_quality(model, tok, task, task.splits()[1], **templates),
            "warm_start_s": round(time.perf_counter() - t0, 1)}


def teacher_table(dials: list[int]) -> dict:
    out = {}
    for d in dials:
        out[str(d)] = teacher_row(d)
        print(f"dial {d}: {out[str(d)]}", flush=True)
    return out


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
        hard = hard_rows(model, tok, task, task.splits()[1], reward, samples=32, below=0.1, temperature=tr.temperature)
        out[str(d)] = discovery_curves(model, tok, task, hard[:max_rows], reward, budgets=budgets, batch_size=batch_size,
                                       temperature=tr.temperature, seed=0, **templates)
        out[str(d)]["hard_of_heldout"] = [len(hard), len(task.splits()[1])]
        print(f"dial {d}: discovery on {len(hard[:max_rows])} hard rows:",
              {m: v["discovery"] for m, v in out[str(d)]["methods"].items()}, flush=True)
    return out


def main():
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
    ap.add_argument("--discovery", action="store_true", help="part 3: test-time discovery curves at the lowest and "
                    "highest dial given")
    ap.add_argument("--budgets", type=int, nargs="+", default=[8, 16, 32, 64, 128], help="attempts k for part 3")
    ap.add_argument("--discovery-rows", type=int, default=40, help="at most this many hard rows per dial in part 3")
    args = parse_args(ap)
    args.steps = args.steps or base()["trainer"]["max_steps"]
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

    journal = journal_path(results_path("sdpo_lab", args.out).stem, args.resume)
    teacher = teacher_table(dials)
    runs, tuning, lrs = [], [], {}
    if not args.no_runs:
        top = max(dials)
        lrs.update({m: pinned[m] for m in args.methods if m in pinned})
        to_tune = [m for m in args.methods if m not in pinned]
        tuning = run_all([(m, top, s, args.steps, lr) for m in to_tune for lr in args.lr_grid for s in args.tune_seeds],
                         args.jobs, "tune", journal)
        lrs.update(pick_lrs(tuning, to_tune, args.lr_grid))
        runs = run_all([(m, d, s, args.steps, lrs[m]) for d in dials for m in args.methods for s in args.seeds],
                       args.jobs, "run", journal)

    print(f"\nmachine: {machine()}\n")
    print(table(["dial", "plain", "demo", "feedback", "right-token share", "token win demo", "token win feedback"],
                [[d, q["plain_acc"], q["demo_acc"], q["feedback_acc"], q["right_token_frac"], q["token_win_demo"],
                  q["token_win_feedback"]] for d, q in teacher.items()]))
    if runs:
        rows = []
        for d in dials:
            for m in args.methods:
                mine = [r for r in runs if r["dial"] == d and r["method"] == m]
                rows.append([d, m, f"{lrs[m]:g}", median([r["final_acc"] for r in mine]),
                             ", ".join(f"{r['final_acc']:.3f}" for r in mine)])
        print(table(["dial", "method", "lr", "final (median)", "per seed"], rows))
    found = discovery(sorted({min(dials), max(dials)}), args.budgets, 8, args.discovery_rows) if args.discovery else {}
    start_acc = {d: q["plain_acc"] for d, q in teacher.items()}
    summary = {"start_acc": start_acc, "teacher": teacher, "lr": lrs, "tuning": tuning, "discovery": found}
    write_results("sdpo_lab", out=args.out,
                  config={"seeds": args.seeds, "dials": dials, "methods": args.methods, "steps": args.steps,
                          "tune_seeds": args.tune_seeds, "lr_grid": args.lr_grid, "pinned_lr": pinned,
                          "base": BASE_CONFIG, "budgets": args.budgets, "jobs": args.jobs},
                  runs=runs, summary=summary,
                  extra={"start_acc": start_acc, "teacher": teacher, "lr": lrs})   # the contract's top-level keys


if __name__ == "__main__":
    main()
