"""What the tiny model learns from code feedback: the lab's code task, measured.

    python benchmarks/bench_code_lab.py [--variant top|starving] [--seeds S ...] [--dial D ...] [--methods M ...]
                                        [--steps N] [--tune-seeds S ...] [--lr-grid LR ...] [--lr METHOD=LR ...]
                                        [--jobs J] [--out FILE] [--no-runs] [--discovery] [--discovery-seeds S ...]

The task is ``lab_code`` (``sdpo_kit/tasks/code.py``): three values of a hidden affine f in the
prompt, an expression in x as the answer, run by the code reward's sandbox against six call tests;
the feedback is LiveCodeBench's form (the input, output and expected value of up to two failing
tests, or a crash's error), never the expression. The recipe is ``configs/sdpo_code_lab.yaml``; its
warm start's dial (``model.lab.context_steps``) teaches the model to read SDPO's teacher prompt.

Variants (``VARIANTS``): ``top``, the config's warm start (plain accuracy about 0.4, the teacher
reading the tests' feedback about 0.8); ``starving``, a warm start stopped earlier on the plain task
while its context steps still teach it to read, sampled in groups of 4, so about half the groups
hold no success: GRPO has no signal on an all-fail group, and a teacher reading the tests' output
has one.

Part 1, per dial: ``sdpo.quality`` of the warm start on the held-out functions (plain
accuracy; the teacher with a sibling's right expression; with the tests' feedback on its own
wrong attempt; token wins), and one feedback text and teacher prompt as the trainer builds them.

Part 2, at the top dial: per method and seed, a scratch-backend run from that warm start, held-out
greedy accuracy every ``eval_every`` steps, and greedy accuracy on the training functions before and
after (``train_start_acc``, ``train_final_acc``: the held-out split has 18 functions, the training split 72,
so a run can fit the functions it trains on and lose the ones it never sees), and the share of held-out
prompts answered with a training function's expression (``heldout_as_training_fn_start`` / ``_final``).
Methods (``METHODS``): ``grpo``; ``sdpo`` (successful siblings only); ``sdpo_feedback`` (and the tests'
feedback, TRL's placement); ``blend`` (both losses, ``(1 - w) GRPO + w SDPO`` with feedback, TRL's
``distillation_weight`` w = 0.5). Every method gets the same warm start, prompts, group size, completion
budget and steps; its learning rate is picked from ``--lr-grid`` by the median final accuracy on
``--tune-seeds`` and reported on ``--seeds`` (``--lr METHOD=LR`` pins one instead). Each run also keeps its
share of all-fail groups, of rows with a teacher, and its update norm: what a method had to learn from. Four
methods take more than one sitting on 2 cores: the same command with ``--resume`` continues a cut-short
invocation from its journal (``runner.py``).

Part 3 (``--discovery``), at the top dial: test-time discovery on the held-out functions the warm
start solves in under 10% of 32 plain samples (at most ``--discovery-rows``): the share of them
solved within k attempts by best-of-k, multi-turn reprompting with the tests' feedback, and
test-time SDPO with the feedback-reading teacher (``sdpo/at_test_time.py``; its default rate, or with
``--tts-lr-grid`` the best on hard TRAINING functions at a third of max(k) attempts),
batches of 8, each method given max(k) attempts, once per ``--discovery-seeds``; 95% intervals
bootstrap the rows, and ``attempts_to_match`` is the fewest attempts at which a method's rate
reaches best-of-k's at max(k).

Writes ``code_lab.json`` (``code_lab_starving.json`` for the starving variant) with ``runs``
(method, dial, seed, lr, start_acc, final_acc, acc_by_step, ...) and ``summary`` (teacher per dial,
the chosen learning rates, the tuning runs, the discovery curves) and prints a table; the report
(``reports/code.py``) reads from the runs the steps each method takes to reach GRPO's median final
accuracy, the seeds that end above their start and the training reward's trend.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import runner
from _common import median, parse_args, parse_pins, results_path, write_results
from code_lab import BLEND_WEIGHT, CONFIG, METHODS, VARIANTS, method_config  # the code lab's variants and methods
from lab import pick_lrs  # the skill lab's lr pick
from runner import add_runner_args, journal_path

TRAIN_PROBE = 200    # training rows scored before and after each run (they hold all 72 training functions)


def mean_of(history: list[dict], key: str) -> float | None:
    vals = [r[key] for r in history if r.get(key) is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def fit_probe(model, tok, cfg) -> tuple[float, float]:
    """(greedy accuracy on the first ``TRAIN_PROBE`` TRAINING rows, which hold every training function;
    the share of held-out prompts whose greedy answer is a TRAINING function's expression). The first
    says what a run fits, the second whether held-out prompts get a memorised training answer instead
    of their own; the held-out accuracy says what carries over to functions never seen."""
    from sdpo_kit.core.sampling import generate_completions
    from sdpo_kit.registry import make_task
    from sdpo_kit.tasks.code import expression

    task = make_task(**cfg.task)
    train, held = task.splits()
    budget = cfg.trainer.max_completion_length
    acc = task.evaluate(model, tok, train[:TRAIN_PROBE], max_new_tokens=budget)
    seen = {r["answer"] for r in train}
    said = generate_completions(model, tok, [r["prompt"] for r in held], max_new_tokens=budget)
    return acc, round(sum(expression(t) in seen for t in said) / len(held), 4)


def run(spec: tuple) -> dict:
    """One training run ``(method, dial, seed, steps, lr, variant)``; its held-out accuracy by step and
    its accuracy on training functions before and after."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task
    from sdpo_kit.training import train

    method, dial, seed, steps, lr, variant = spec
    over = {"trainer.seed": seed, "trainer.max_steps": steps, "trainer.learning_rate": lr}
    with tempfile.TemporaryDirectory() as out:
        cfg = config_from_dict(method_config(method, dial, variant), {**over, "output_dir": out})
        t0 = time.perf_counter()
        s = train(cfg, config_path="benchmarks/bench_code_lab.py")
        wall = time.perf_counter() - t0
        train_after, recalled_after = fit_probe(*load_policy(str(Path(out) / "model")), cfg)
    warm = load_policy("tiny-lab", lab_config=lab_config_for(cfg, make_task(**cfg.task)))
    train_before, recalled_before = fit_probe(*warm, cfg)
    h = s["history"]
    acc = [[r["step"], r["eval/accuracy"]] for r in h if r.get("eval/accuracy") is not None]
    reward = [[r["step"], round(r["reward/mean"], 4)] for r in h if "reward/mean" in r]
    return {"method": method, "variant": variant, "dial": dial, "seed": seed, "lr": lr, "steps": steps,
            "start_acc": s["before"], "final_acc": s["after"], "acc_by_step": acc, "reward_by_step": reward,
            "train_start_acc": train_before, "train_final_acc": train_after,
            "heldout_as_training_fn_start": recalled_before, "heldout_as_training_fn_final": recalled_after,
            "zero_std_groups": mean_of(h, "stats/frac_zero_std"),
            "teacher_coverage": mean_of(h, "sdpo/teacher_coverage"),
            "success_group_frac": mean_of(h, "sdpo/success_group_frac"), "update_norm": mean_of(h, "sdpo/update_norm"),
            "wall_s": round(wall, 1)}


def run_all(specs: list[tuple], jobs: int, label: str = "run", journal=None) -> list[dict]:
    """``run`` for each spec, results in order; ``jobs`` processes (one torch thread each); the runs the
    ``journal`` holds are kept (``runner.run_all``)."""
    def show(r):
        print(f"{label} {r['variant']} dial {r['dial']} {r['method']} lr {r['lr']:g} seed {r['seed']}: "
              f"{r['start_acc']:.3f} -> {r['final_acc']:.3f} ({r['wall_s']} s)", flush=True)

    return runner.run_all(run, specs, jobs=jobs, show=show, journal=journal)


def teacher_part(dial: int, variant: str = "top") -> dict:
    """Part 1 at one dial: teacher quality on the held-out split, and one wrong attempt's feedback
    with the teacher prompt built from it (the trainer's templates)."""
    from sdpo_kit.core.sampling import generate_completions
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task
    from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS
    from sdpo_kit.sdpo.quality import teacher_quality
    from sdpo_kit.text.reprompt import reprompt

    t0 = time.perf_counter()
    cfg = config_from_dict(method_config("sdpo_feedback", dial, variant))
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    warm_s = time.perf_counter() - t0
    templates = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    held = task.splits()[1]
    out = {**teacher_quality(model, tok, task, held, **templates), "warm_start_s": round(warm_s, 1)}
    tried = generate_completions(model, tok, [r["prompt"] for r in held[:32]],
                                 max_new_tokens=task.max_completion_tokens())
    scored = task.scored(tried, [r["answer"] for r in held[:32]])
    i = next((i for i, s in enumerate(scored) if s["score"] == 0.0 and s["feedback"]), None)
    if i is not None:
        out["example"] = {"prompt": held[i]["prompt"][-1]["content"], "attempt": tried[i].strip(),
                          "feedback": scored[i]["feedback"],
                          "teacher_prompt": reprompt(held[i]["prompt"], None, scored[i]["feedback"],
                                                     **templates)[-1]["content"]}
    print(f"{variant} dial {dial}: {out}", flush=True)
    return out


def tune_tts_lr(model, tok, task, reward, rows: list[dict], grid: list[float], budgets: list[int], **kw) -> dict:
    """Test-time SDPO's learning rate from ``grid``: its discovery on ``rows`` (hard TRAINING functions, never the
    held-out ones it is reported on; seed 100) at the largest budget within a third of max(budgets), ties to the
    smaller rate. Returns {"lr", "by_lr": {lr: discovery curve}, "rows"}."""
    from sdpo_kit.sdpo.at_test_time import discovery_curves

    K3 = max([k for k in budgets if 3 * k <= max(budgets)] or [min(budgets)])
    by_lr = {}
    for lr in grid:
        res = discovery_curves(model, tok, task, rows, reward, budgets=budgets, batch_size=8, seed=100,
                               methods=("test_time_sdpo",), learning_rate=lr, **kw)
        by_lr[lr] = res["methods"]["test_time_sdpo"]["discovery"]
        print(f"tune test-time SDPO lr {lr:g} on {len(rows)} hard training functions: {by_lr[lr]}", flush=True)
    at = budgets.index(K3)
    best = max(grid, key=lambda lr: (by_lr[lr][at], -lr))
    return {"lr": best, "by_lr": {str(k): v for k, v in by_lr.items()}, "rows": len(rows), "picked_at_k": K3}


def discovery_part(dial: int, variant: str, seeds: list[int], budgets: list[int], max_rows: int,
                   tts_lr_grid: list[float] | None = None) -> dict:
    """Part 3 (module docstring): discovery curves per seed on the hard held-out rows, pooled; with
    ``tts_lr_grid``, test-time SDPO's rate tuned first on hard training functions (``tune_tts_lr``)."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task
    from sdpo_kit.rewards import make_reward
    from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS, discovery_curves, hard_rows

    cfg = config_from_dict(method_config("sdpo_feedback", dial, variant))
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    reward = make_reward({"type": "feedback"}, task=task)[0]
    templates = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    held = task.splits()[1]
    hard = hard_rows(model, tok, task, held, reward, samples=32, below=0.1, temperature=cfg.trainer.temperature)
    rows = hard[:max_rows]
    print(f"discovery: {len(hard)} of {len(held)} held-out rows under 10%; {len(rows)} used", flush=True)
    tuned, extra = {}, {}
    if tts_lr_grid:
        train = task.splits()[0][:len(held)]
        hard_train = hard_rows(model, tok, task, train, reward, samples=32, below=0.1, seed=100,
                               temperature=cfg.trainer.temperature)[:max_rows]
        tuned = tune_tts_lr(model, tok, task, reward, hard_train, tts_lr_grid, budgets,
                            temperature=cfg.trainer.temperature, **templates)
        extra = {"learning_rate": tuned["lr"]}
    per_seed = {}
    for seed in seeds:
        t0 = time.perf_counter()
        per_seed[str(seed)] = discovery_curves(model, tok, task, rows, reward, budgets=budgets, batch_size=8,
                                               temperature=cfg.trainer.temperature, seed=1000 * seed, **templates,
                                               **extra)
        print(f"discovery seed {seed} ({time.perf_counter() - t0:.0f} s):",
              {m: v["discovery"] for m, v in per_seed[str(seed)]["methods"].items()}, flush=True)
    return {"hard_of_heldout": [len(hard), len(held)], "rows": len(rows), "budgets": budgets,
            "per_seed": per_seed, "pooled": pool_discovery(per_seed, budgets), "tts_tuning": tuned}


def rate(firsts: list, k: int) -> float:
    return sum(f is not None and f <= k for f in firsts) / max(1, len(firsts))


def pool_discovery(per_seed: dict, budgets: list[int], draws: int = 2000) -> dict:
    """Per method: the discovery rate at each k over every (seed, row) run, a 95% interval from
    resampling the rows (each row keeps its seeds), and the fewest attempts (1..max k) at which the
    pooled rate reaches best-of-k's at max k, with its share of max k."""
    import random

    seeds = list(per_seed)
    methods = list(per_seed[seeds[0]]["methods"])
    n = len(per_seed[seeds[0]]["methods"][methods[0]]["first_success"])
    firsts = {m: [[per_seed[s]["methods"][m]["first_success"][i] for s in seeds] for i in range(n)] for m in methods}
    K, rng = max(budgets), random.Random(0)
    picks = [[rng.randrange(n) for _ in range(n)] for _ in range(draws)] if n else []
    flat = {m: [f for row in firsts[m] for f in row] for m in methods}
    target = rate(flat.get("best_of_k", []), K) if "best_of_k" in flat else None
    out = {"target": target, "methods": {}}
    for m in methods:
        curve, lo, hi = [], [], []
        for k in budgets:
            curve.append(rate(flat[m], k))
            boots = sorted(rate([f for i in pick for f in firsts[m][i]], k) for pick in picks) or [float("nan")]
            lo.append(boots[int(0.025 * len(boots))])
            hi.append(boots[min(len(boots) - 1, int(0.975 * len(boots)))])
        match = None if target is None else next((k for k in range(1, K + 1) if rate(flat[m], k) >= target and
                                                  rate(flat[m], k) > 0), None)
        out["methods"][m] = {"discovery": curve, "ci95": [lo, hi], "attempts_to_match": match,
                             "share_of_max": None if match is None else match / K}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="top")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--dial", type=int, nargs="+", default=None, help="context SFT steps of the warm start "
                    "(default: the variant's)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the variant's)")
    ap.add_argument("--tune-seeds", type=int, nargs="+", default=[100, 101, 102])
    ap.add_argument("--lr-grid", type=float, nargs="+", default=[1e-5, 3e-5, 1e-4])
    ap.add_argument("--lr", nargs="+", default=[], help="METHOD=LR: pin a method's learning rate (no tuning)")
    add_runner_args(ap, "code_lab (code_lab_starving for --variant starving)")
    ap.add_argument("--no-runs", action="store_true", help="no training runs (the teacher table, and --discovery)")
    ap.add_argument("--discovery", action="store_true", help="part 3: test-time discovery at the top dial")
    ap.add_argument("--discovery-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--discovery-rows", type=int, default=60, help="at most this many hard held-out rows")
    ap.add_argument("--budgets", type=int, nargs="+", default=[8, 16, 32, 64, 128], help="attempts k for part 3")
    ap.add_argument("--tts-lr-grid", type=float, nargs="+", default=None, help="part 3: tune test-time SDPO's rate "
                    "on hard training functions first (default: its library default, untuned)")
    args = parse_args(ap)
    v = VARIANTS[args.variant]
    args.out = args.out or f"{v['results']}.json"   # a bare name: benchmarks/results/
    dials = args.dial or v["dials"]
    if any(d < 0 for d in dials):
        raise SystemExit("--dial takes step counts >= 0")
    if set(args.seeds) & set(args.tune_seeds):
        raise SystemExit(f"seeds {sorted(set(args.seeds) & set(args.tune_seeds))} are both tuning and reporting seeds")
    pinned = parse_pins(args.lr, METHODS)
    steps = args.steps or method_config("grpo", 0, args.variant)["trainer"]["max_steps"]

    journal = journal_path(results_path("code_lab", args.out).stem, args.resume)
    teacher = {str(d): teacher_part(d, args.variant) for d in dials}
    top = max(dials)
    to_tune = [] if args.no_runs else [m for m in args.methods if m not in pinned]
    tuning = run_all([(m, top, s, steps, lr, args.variant) for m in to_tune for lr in args.lr_grid
                      for s in args.tune_seeds], args.jobs, "tune", journal)
    lrs = {**{m: pinned[m] for m in args.methods if m in pinned}, **pick_lrs(tuning, to_tune, args.lr_grid)}
    runs = [] if args.no_runs else run_all([(m, top, s, steps, lrs[m], args.variant) for m in args.methods
                                            for s in args.seeds], args.jobs, "run", journal)
    found = (discovery_part(top, args.variant, args.discovery_seeds, args.budgets, args.discovery_rows,
                            args.tts_lr_grid) if args.discovery else {})

    finals = {m: median([r["final_acc"] for r in runs if r["method"] == m]) for m in (args.methods if runs else [])}
    summary = {"teacher": teacher, "lr": lrs, "tuning": tuning, "discovery": found,
               "final_median": {f"{top}/{m}": acc for m, acc in finals.items()}}
    write_results("code_lab", out=args.out,
                  config={"variant": args.variant, "seeds": args.seeds, "dials": dials, "run_dials": [top],
                          "methods": args.methods, "steps": steps, "base": CONFIG, "variant_fields": v,
                          "tune_seeds": args.tune_seeds, "lr_grid": args.lr_grid, "pinned_lr": pinned,
                          "blend_weight": BLEND_WEIGHT, "jobs": args.jobs, "discovery_seeds": args.discovery_seeds,
                          "budgets": args.budgets, "discovery_rows": args.discovery_rows,
                          "tts_lr_grid": args.tts_lr_grid},
                  runs=runs, summary=summary)


if __name__ == "__main__":
    main()
