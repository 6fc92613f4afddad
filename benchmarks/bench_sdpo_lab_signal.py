"""Why GRPO stalls in the skill lab: the learning signal in a group of G samples, measured.

    python benchmarks/bench_sdpo_lab_signal.py [--dial D ...] [--seeds S ...] [--steps N] [--lr LR]
                                               [--samples K] [--train-rows N] [--jobs J] [--resume] [--out FILE]

GRPO learns only from mixed groups: a group whose G samples are all right or all wrong has zero
advantages and gives no gradient. So, per dial setting, on the warm start and after a GRPO run of
``bench_sdpo_lab``'s recipe (``--steps`` steps at ``--lr``, default the learning rate its tuning picked),
on the held-out split and on as many training rows, with p a row's success rate over ``--samples``
samples at the training temperature:
- greedy accuracy (what ``bench_sdpo_lab`` reports) and sampled accuracy, mean p (what the reward sees);
- the shares of rows never solved (p = 0), always solved (p = 1), and in between;
- the expected share of mixed groups of G, the mean over rows of 1 - p^G - (1 - p)^G;
- greedy accuracy by the number of carries in the sum (where the wrong answers are).

Writes ``benchmarks/results/sdpo_lab_signal.json`` (``runs``: one row per dial, seed and stage) and
prints a table; the GRPO runs (one per dial and seed, measured where they trained) go through ``runner.run_all``
(``--jobs``, ``--resume``). It trains nothing but GRPO and reads no other results file except, for the default
learning rate, ``benchmarks/results/sdpo_lab.json``.
"""

from __future__ import annotations

import argparse
import json
import re

from _common import RESULTS, median, parse_args, results_path, write_results
from lab import dial_values, method_config, train_run, warm_start_for
from runner import add_runner_args, journal_path, run_all


def carries(operands: list[int]) -> int:
    """How many digit places of the sum carry into the next one (``carries([95, 7]) == 2``)."""
    n, carry, width = 0, 0, max(len(str(x)) for x in operands)
    for place in range(width):
        total = carry + sum(x // 10**place % 10 for x in operands)
        carry = total // 10
        n += carry > 0
    return n


def operands_of(row: dict) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", row["prompt"][-1]["content"])]


def signal(model, tok, task, rows: list[dict], *, samples: int, group: int, temperature: float) -> dict:
    """The measures in the module docstring on ``rows``."""
    from sdpo_kit.rewards import feedback_reward
    from sdpo_kit.sdpo.at_test_time import success_rates

    p = success_rates(model, tok, task, rows, feedback_reward(style=task.feedback_style), samples=samples,
                      temperature=temperature, seed=0)
    greedy = [task.is_correct(c, r[task.answer_column]) for c, r in
              zip(_greedy(model, tok, task, rows), rows)]
    by_carries: dict[int, list[bool]] = {}
    for r, ok in zip(rows, greedy):
        by_carries.setdefault(carries(operands_of(r)), []).append(ok)
    n = len(rows)
    return {"n": n, "greedy_acc": sum(greedy) / n, "sampled_acc": sum(p) / n,
            "never": sum(x == 0 for x in p) / n, "always": sum(x == 1 for x in p) / n,
            "mixed_rows": sum(0 < x < 1 for x in p) / n,
            "mixed_groups": sum(1 - x**group - (1 - x)**group for x in p) / n,
            "greedy_by_carries": {str(k): [sum(v) / len(v), len(v)] for k, v in sorted(by_carries.items())}}


def _greedy(model, tok, task, rows):
    from sdpo_kit.core.sampling import generate_completions

    return generate_completions(model, tok, [r["prompt"] for r in rows], max_new_tokens=task.max_completion_tokens())


def tuned_lr() -> float:
    path = RESULTS / "sdpo_lab.json"
    lr = json.loads(path.read_text()).get("lr", {}).get("grpo") if path.exists() else None
    if lr is None:
        raise SystemExit(f"no GRPO learning rate in {path}: run bench_sdpo_lab.py first or pass --lr")
    return float(lr)


def sets_and_kw(task, cfg, samples: int, train_rows: int) -> tuple[dict, dict]:
    """The rows measured (the held-out split, and as many training rows) and ``signal``'s keywords."""
    train_split, heldout = task.splits()
    tr = cfg.trainer
    return ({"heldout": heldout, "train": train_split[:train_rows]},
            {"samples": samples, "group": tr.num_generations, "temperature": tr.temperature})


def warm_rows(dial: int, samples: int, train_rows: int) -> list[dict]:
    """The measures of the warm start at ``dial`` on both sets."""
    model, tok, task, cfg = warm_start_for(dial)
    sets, kw = sets_and_kw(task, cfg, samples, train_rows)
    return [{"dial": dial, "seed": None, "stage": "warm start", "split": name, **signal(model, tok, task, rows, **kw)}
            for name, rows in sets.items()]


def after_grpo(spec: tuple) -> dict:
    """One GRPO run ``(dial, seed, steps, lr, samples, train_rows)`` from the dial's warm start, measured on both
    sets after it: ``{"rows": [heldout, train]}``."""
    dial, seed, steps, lr, samples, train_rows = spec
    _, _, task, cfg = warm_start_for(dial)
    sets, kw = sets_and_kw(task, cfg, samples, train_rows)
    s, wall = train_run("grpo", dial, seed, steps, lr, config_path="benchmarks/bench_sdpo_lab_signal.py")
    wall = round(wall, 1)
    rewards = [r["reward/mean"] for r in s["history"] if "reward/mean" in r]
    k = max(1, len(rewards) // 4)
    return {"rows": [{"dial": dial, "seed": seed, "stage": f"after GRPO {steps}", "split": name, "wall_s": wall,
                      "reward_first_quarter": sum(rewards[:k]) / k, "reward_last_quarter": sum(rewards[-k:]) / k,
                      **signal(s["model"], s["tokenizer"], task, rows, **kw)} for name, rows in sets.items()]}


def show_first_row(run: dict) -> None:
    """A finished GRPO run, by its first row (``after_grpo``'s)."""
    first = run["rows"][0]
    print(f"dial {first['dial']} seed {first['seed']}: {first}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dial", nargs="+", default=["min", "max"], help="dial settings, or min / max")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the lab config's max_steps)")
    ap.add_argument("--lr", type=float, default=None, help="GRPO learning rate (default: bench_sdpo_lab's tuned one)")
    ap.add_argument("--samples", type=int, default=32, help="samples per row for its success rate p")
    ap.add_argument("--train-rows", type=int, default=200, help="training rows measured beside the held-out split")
    add_runner_args(ap, "sdpo_lab_signal")
    args = parse_args(ap)
    if args.samples < 1 or args.train_rows < 1:
        raise SystemExit("--samples and --train-rows must be >= 1")
    steps = args.steps or method_config("grpo")["trainer"]["max_steps"]
    lr = args.lr if args.lr is not None else tuned_lr()
    dials, runs = dial_values(args.dial), []
    journal = journal_path(results_path("sdpo_lab_signal", args.out).stem, args.resume)
    for d in dials:   # a dial's warm start measured (and built, cached) before its runs
        runs += warm_rows(d, args.samples, args.train_rows)
        specs = [(d, seed, steps, lr, args.samples, args.train_rows) for seed in args.seeds]
        trained = run_all(after_grpo, specs, jobs=args.jobs, journal=journal, show=show_first_row)
        runs += [row for r in trained for row in r["rows"]]

    rows = []
    for d in sorted({r["dial"] for r in runs}):
        for stage in dict.fromkeys(r["stage"] for r in runs):
            for split in ("heldout", "train"):
                mine = [r for r in runs if (r["dial"], r["stage"], r["split"]) == (d, stage, split)]
                if mine:
                    rows.append([d, stage, split] + [median([r[k] for r in mine]) for k in
                                ("greedy_acc", "sampled_acc", "never", "mixed_rows", "always", "mixed_groups")])
    write_results("sdpo_lab_signal", out=args.out,
                  config={"dials": dials, "seeds": args.seeds, "steps": steps, "lr": lr,
                          "samples": args.samples, "train_rows": args.train_rows},
                  runs=runs, summary={"table": rows})


if __name__ == "__main__":
    main()
