"""How many functions the code lab's held-out accuracy stands on, per warm start.

    python benchmarks/bench_code_lab_heldout.py [--variant V ...] [--out FILE]

The held-out split is a few hundred prompts but only a fifth of the task's functions (18 of 90 at one
digit): each function is asked with several shown inputs. A greedy model that knows a function tends
to answer all its prompts right, and one that does not, none, so the accuracy moves in steps of about
one function's share, and a warm start's accuracy may rest on a handful of functions. For each
variant's warm start (``code_lab.VARIANTS``, at its top dial) this scores every held-out prompt
greedily and counts, per function, the prompts answered right. No training: about 10 s a variant.

Writes ``code_lab_heldout.json``: ``runs`` one per variant (``rows``, ``functions``, ``accuracy``,
``right_by_function`` {answer: [right, asked]}, ``functions_right`` (a right answer on any prompt),
``top_function_share`` (the share of the right answers the best-known function gives) and
``one_function`` (the accuracy one function's prompts are worth, on average)).
"""

from __future__ import annotations

import argparse

from _common import parse_args, write_results
from code_lab import VARIANTS, method_config


def heldout_by_function(variant: str) -> dict:
    """The greedy held-out answers of ``variant``'s warm start, counted per function."""
    from sdpo_kit.core.sampling import generate_completions
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict, make_task

    dial = max(VARIANTS[variant]["dials"])
    cfg = config_from_dict(method_config("grpo", dial, variant))
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    held = task.splits()[1]
    said = generate_completions(model, tok, [r["prompt"] for r in held], do_sample=False,
                                max_new_tokens=cfg.trainer.max_completion_length)
    scores = task.reward(None, said, [r["answer"] for r in held])
    by: dict[str, list[int]] = {}
    for r, s in zip(held, scores):
        right_asked = by.setdefault(r["answer"], [0, 0])
        right_asked[0] += int(s == 1.0)
        right_asked[1] += 1
    right = sum(v[0] for v in by.values())
    ranked = dict(sorted(by.items(), key=lambda kv: (-kv[1][0], kv[0])))
    return {"variant": variant, "dial": dial, "rows": len(held), "functions": len(by),
            "accuracy": round(right / len(held), 4), "right_by_function": ranked,
            "functions_right": sum(v[0] > 0 for v in by.values()),
            "top_function_share": round(max(v[0] for v in by.values()) / right, 4) if right else None,
            "one_function": round(1 / len(by), 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", nargs="+", default=sorted(VARIANTS), choices=sorted(VARIANTS))
    ap.add_argument("--out", default=None, help="where to write (default: benchmarks/results/code_lab_heldout.json)")
    args = parse_args(ap)
    runs = [heldout_by_function(v) for v in args.variant]
    write_results("code_lab_heldout", out=args.out, config={"variants": args.variant}, runs=runs,
                  summary={r["variant"]: {k: r[k] for k in ("accuracy", "functions", "functions_right",
                                                            "top_function_share", "one_function")} for r in runs})


if __name__ == "__main__":
    main()
