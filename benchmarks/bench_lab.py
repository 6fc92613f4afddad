"""The tiny lab's warm start: time, held-out accuracy, and whether it copies from context.

    python benchmarks/bench_lab.py [--copy-steps 0 300]

For each ``LabConfig(copy_steps=N)`` it trains the warm start from scratch (one thread, into a
temporary cache) and measures held-out greedy accuracy on the plain task, and on the same
held-out questions with a solution shown in the prompt (``tasks.HINT_TEMPLATE``): the correct
sum (copying or computing both work) or a random number (only copying works). The SDPO track's
reprompted teacher needs the copy skill. Writes ``benchmarks/results/lab.json``.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

from _common import parse_args, write_results


def hinted(rows, task, rng, random_solution: bool):
    from sdpo_kit.tasks import HINT_TEMPLATE

    out = []
    for r in rows:
        sol = str(rng.randrange(100)) if random_solution else r["answer"]
        q = HINT_TEMPLATE.format(question=r["prompt"][-1]["content"], solution=task.format_answer(sol))
        out.append({"prompt": [{"role": "user", "content": q}], "answer": sol})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copy-steps", type=int, nargs="+", default=[0, 300])
    args = parse_args(ap)

    from sdpo_kit import make_task
    from sdpo_kit.lab.model import LabConfig, warm_start

    rows = []
    for n in args.copy_steps:
        cfg = LabConfig(copy_steps=n)
        with tempfile.TemporaryDirectory() as cache:
            os.environ["SDPO_KIT_CACHE"] = cache
            t0 = time.perf_counter()
            model, tok = warm_start(cfg, verbose=False)
            secs = time.perf_counter() - t0
        task = make_task(cfg.task, digits=cfg.digits, terms=cfg.terms, n_eval=cfg.n_eval, seed=cfg.seed)
        _, heldout = task.splits()
        rng = random.Random(1)
        rows.append([n, secs, task.evaluate(model, tok, heldout),
                     task.evaluate(model, tok, hinted(heldout, task, rng, False)),
                     task.evaluate(model, tok, hinted(heldout, task, rng, True))])
        print(f"copy_steps {n}: warm start {secs:.0f} s, held-out {rows[-1][2]:.3f}, with the right hint "
              f"{rows[-1][3]:.3f}, a random one {rows[-1][4]:.3f}", flush=True)
    write_results("lab", config={"copy_steps": args.copy_steps},
                  runs=[{"copy_steps": r[0], "warm_start_s": r[1], "heldout_acc": r[2], "acc_right_hint": r[3],
                         "acc_random_hint": r[4]} for r in rows], summary={})


if __name__ == "__main__":
    main()
