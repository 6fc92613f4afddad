"""Why every `make demo` seed ends at the same held-out accuracy: which problems no seed learns, and why.

    python benchmarks/bench_demo_plateau.py [--seeds 0 1 2 3 4]

Runs ``configs/demo.yaml`` once per seed (as ``run.py demo`` does) and records, for every one of the
200 held-out problems, the warm start's greedy answer, how often the warm start samples the right
answer at the run's temperature (``--samples`` draws, what GRPO's groups see), and each trained
model's greedy answer. Then it groups the problems: learned by every seed, by none, by some; right
before and after, right before and lost. For each group: the sum's size, how many training problems
share its sum, the greedy answer's distance from the right one, the warm start's sampled success
rate, and the share of answers holding a digit the warm start never writes in its greedy answers to
1000 training problems. Writes ``benchmarks/results/demo_plateau.json``; the tiny lab's docs page
explains the plateau from it.
"""

from __future__ import annotations

import argparse
import collections
import tempfile

import torch
from _common import median, parse_args, run_config, table, write_results


@torch.no_grad()
def greedy_answers(model, tok, rows, max_new_tokens: int) -> list[str]:
    from sdpo_kit.core.sampling import generate_completions

    return generate_completions(model, tok, [r["prompt"] for r in rows], max_new_tokens=max_new_tokens)


def describe(group: list[int], rows, before, after_by_seed, train_sums, sampled, sampled_after, unwritten) -> dict:
    """Size, frequency in training and distance of a group of held-out problems."""
    if not group:
        return {"n": 0}
    sums = [int(rows[i]["answer"]) for i in group]

    def dist(ans, i):
        try:
            return abs(int(ans.strip().split("\n")[0]) - int(rows[i]["answer"]))
        except ValueError:
            return None
    last = after_by_seed[-1]
    return {"n": len(group), "two_digit_share": sum(s >= 10 for s in sums) / len(sums),
            "median_sum": median(sums), "median_train_count": median([train_sums[s] for s in sums]),
            "median_distance_after": median([dist(last[i], i) for i in group]),
            "median_distance_before": median([dist(before[i], i) for i in group]),
            "sampled_success_before": sum(sampled[i] for i in group) / len(group),
            "sampled_success_after": sum(sampled_after[i] for i in group) / len(group),
            "unwritten_digit_share": sum(bool(set(rows[i]["answer"]) & unwritten) for i in group) / len(group)}


def sampled_success(model, tok, task, heldout, *, budget: int, temperature: float, samples: int,
                    unwritten: set) -> tuple[list[float], float]:
    """Per held-out problem, the share of ``samples`` draws at the run's ``temperature`` that are right; and the
    share of sampled answers holding a digit the warm start never writes (``unwritten``)."""
    from sdpo_kit.core.sampling import sample

    torch.manual_seed(0)
    ro = sample(model, tok, [r["prompt"] for r in heldout], max_new_tokens=budget,
                temperature=temperature, num_return_sequences=samples)
    hits = [task.is_correct(t, heldout[k // samples]["answer"]) for k, t in enumerate(ro.texts)]
    digit_rate = sum(bool(set(t.strip()) & unwritten) for t in ro.texts) / len(ro.texts)
    return [sum(hits[i * samples:(i + 1) * samples]) / samples for i in range(len(heldout))], digit_rate


def train_seeds(args, task, heldout, budget: int, sample_after) -> tuple[list, list, list[float], float]:
    """``args.config`` trained once per seed: each seed's greedy answers on ``heldout`` and whether each is right,
    and ``sample_after(model)`` (``sampled_success``) of the first seed's trained model."""
    after_by_seed, right_by_seed, sampled_after, digit_rate_after = [], [], None, None
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as out:
            s = run_config(args.config, {"trainer.seed": seed, "output_dir": out})
        if sampled_after is None:   # the first seed's trained model, sampled as the warm start was
            sampled_after, digit_rate_after = sample_after(s["model"])
        answers = greedy_answers(s["model"], s["tokenizer"], heldout, budget)
        after_by_seed.append(answers)
        right_by_seed.append([task.is_correct(a, r["answer"]) for a, r in zip(answers, heldout)])
        print(f"seed {seed}: {sum(right_by_seed[-1])} of {len(heldout)} right after "
              f"(run's own evaluation: {s['after']:.3f})", flush=True)
    return after_by_seed, right_by_seed, sampled_after, digit_rate_after


def group_problems(right_before: list[bool], right_by_seed: list[list[bool]]) -> tuple[dict, list[int]]:
    """The held-out problems by what training did to them, and those every seed gets right."""
    n = len(right_before)
    all_seeds = [i for i in range(n) if all(r[i] for r in right_by_seed)]
    no_seed = [i for i in range(n) if not any(r[i] for r in right_by_seed)]
    some = [i for i in range(n) if i not in all_seeds and i not in no_seed]
    groups = {
        "right before and after (every seed)": [i for i in all_seeds if right_before[i]],
        "learned (every seed)": [i for i in all_seeds if not right_before[i]],
        "never right": [i for i in no_seed if not right_before[i]],
        "lost (right before, no seed after)": [i for i in no_seed if right_before[i]],
        "some seeds": some,
    }
    return groups, all_seeds


def count_by_sum(heldout, right_before: list[bool], all_seeds: list[int], train_sums) -> dict:
    """Per right answer (a sum): held-out problems, right before, right after on every seed, training problems."""
    by_sum = {}
    for i, r in enumerate(heldout):
        row = by_sum.setdefault(int(r["answer"]), {"n": 0, "before": 0, "after_every_seed": 0, "train": 0})
        row["n"] += 1
        row["before"] += right_before[i]
        row["after_every_seed"] += i in all_seeds
    for total, row in by_sum.items():
        row["train"] = train_sums[total]
    return by_sum


def print_tables(summary: dict, by_sum: dict, never_right: list[int], heldout, before, after_by_seed) -> None:
    unwritten, digit_rate = summary["unwritten_digits"], summary["unwritten_digit_rate"]
    rows = [[k, v["n"], v.get("median_train_count"), v.get("median_distance_before"), v.get("median_distance_after"),
             v.get("sampled_success_before"), v.get("sampled_success_after"), v.get("unwritten_digit_share")]
            for k, v in summary["groups"].items()]
    print("\n" + table(["held-out problems", "n", "median train problems with that sum", "median |error| before",
                        "median |error| after", "sampled success before", "after (first seed)",
                        "answer holds an unwritten digit"], rows))
    print(f"\nthe {summary['n']} greedy answers are identical across all seeds on "
          f"{summary['identical_greedy_answer_across_seeds']} problems; sampled answers holding a digit in "
          f"{unwritten}: {digit_rate['before']:.3f} before, {digit_rate['after']:.3f} after\n")
    print(table(["sum", "held-out", "right before", "right after (every seed)", "train problems"],
                [[k, v["n"], v["before"], v["after_every_seed"], v["train"]] for k, v in sorted(by_sum.items())]))
    for i in never_right[:12]:
        print(f"  never right: {heldout[i]['prompt'][-1]['content']:<8} answer {heldout[i]['answer']:>3}  "
              f"before {before[i]!r}  after {[a[i] for a in after_by_seed]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--samples", type=int, default=32, help="samples per held-out problem from the warm start")
    args = parse_args(ap)

    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import load_config, make_task

    cfg = load_config(args.config)
    task = make_task(**cfg.task)
    train, heldout = task.splits()
    budget = cfg.trainer.max_completion_length
    train_sums = collections.Counter(int(r["answer"]) for r in train)
    start, tok = load_policy(cfg.model.name)
    before = greedy_answers(start, tok, heldout, budget)
    right_before = [task.is_correct(a, r["answer"]) for a, r in zip(before, heldout)]
    written = set("".join(a.strip() for a in greedy_answers(start, tok, train[:1000], budget)))
    unwritten = set("0123456789") - written

    def sample_from(model) -> tuple[list[float], float]:   # the warm start's tokenizer, before and after
        return sampled_success(model, tok, task, heldout, budget=budget, temperature=cfg.trainer.temperature,
                               samples=args.samples, unwritten=unwritten)

    sampled, digit_rate_before = sample_from(start)
    print(f"digits the warm start never writes (greedy, 1000 training problems): {sorted(unwritten)}", flush=True)
    after_by_seed, right_by_seed, sampled_after, digit_rate_after = train_seeds(args, task, heldout, budget,
                                                                                sample_from)
    # "before" / "after": share of sampled answers holding a digit the warm start never writes
    digit_rate = {"before": digit_rate_before, "after": digit_rate_after}
    groups, all_seeds = group_problems(right_before, right_by_seed)
    by_sum = count_by_sum(heldout, right_before, all_seeds, train_sums)
    n = len(heldout)
    same_answers = sum(len({a[i] for a in after_by_seed}) == 1 for i in range(n))
    summary = {"n": n, "right_before": sum(right_before), "right_after_by_seed": [sum(r) for r in right_by_seed],
               "by_sum": {k: by_sum[k] for k in sorted(by_sum)}, "unwritten_digits": sorted(unwritten),
               "samples": args.samples, "temperature": cfg.trainer.temperature, "unwritten_digit_rate": digit_rate,
               "identical_greedy_answer_across_seeds": same_answers,
               "groups": {k: describe(v, heldout, before, after_by_seed, train_sums, sampled, sampled_after, unwritten)
                          for k, v in groups.items()}}
    print_tables(summary, by_sum, groups["never right"], heldout, before, after_by_seed)
    runs = [{"question": r["prompt"][-1]["content"], "answer": r["answer"], "before": before[i],
             "sampled_success_before": sampled[i], "sampled_success_after": sampled_after[i],
             "after": [a[i] for a in after_by_seed]} for i, r in enumerate(heldout)]
    write_results("demo_plateau", config={"config": args.config, "seeds": args.seeds}, runs=runs, summary=summary)

if __name__ == "__main__":
    main()
