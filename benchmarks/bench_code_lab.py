"""What the tiny model learns from code feedback: the lab's code task, measured.

    python benchmarks/bench_code_lab.py [--seeds S ...] [--dial D ...] [--methods M ...] [--steps N]
                                        [--jobs J] [--out FILE]

The task is ``lab_code`` (``sdpo_kit/lab/code_task.py``): three values of a hidden affine f in the
prompt, an expression in x as the answer, run by the code reward's sandbox against six call tests;
the feedback is LiveCodeBench's form (the input, output and expected value of up to two failing
tests, or a crash's error), never the expression. The recipe is ``configs/sdpo_code_lab.yaml``; its
warm start's dial (``model.lab.context_steps``) teaches the model to read SDPO's teacher prompt.

Part 1, per dial: ``sdpo.teacher_quality`` of the warm start on the held-out functions (plain
accuracy; the teacher with a sibling's right expression; with the tests' feedback on its own
wrong attempt; token wins), and one feedback text and teacher prompt as the trainer builds them.

Part 2, at the top dial (every dial with ``--runs-at-every-dial``), per method and seed: a
scratch-backend run from that warm start, held-out
greedy accuracy every ``eval_every`` steps. Methods: ``grpo``; ``sdpo`` (successful siblings only);
``sdpo_feedback`` (and the tests' feedback, TRL's placement). Every method gets the same warm start,
prompts, group size, completion budget, steps and the config's learning rate (3e-4, the skill lab's;
no method is tuned here).

Writes ``benchmarks/results/code_lab.json`` (``runs``: method, dial, seed, start_acc, final_acc,
acc_by_step; ``summary``: teacher per dial, the example) and prints a table.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from _common import machine, median, out_help, table, write_results
from bench_sdpo import SDPO_ONLY  # the SDPO-only trainer keys, dropped for grpo

CONFIG = "configs/sdpo_code_lab.yaml"
DIALS = [0, 1000]       # context SFT steps: none, and the config's
METHODS = ("grpo", "sdpo", "sdpo_feedback")


def method_config(method: str, dial: int) -> dict:
    """The run config of ``method`` at one dial setting."""
    from sdpo_kit.core.config import read_config_file

    data = read_config_file(CONFIG)
    data["model"]["lab"] = {**data["model"]["lab"], "context_steps": dial}
    t = data["trainer"]
    if method == "grpo":
        data["algorithm"] = "grpo"
        data["trainer"] = {k: v for k, v in t.items() if k not in SDPO_ONLY}
    elif method == "sdpo":
        t["include_environment_feedback"] = False
    elif method == "sdpo_feedback":
        t["include_environment_feedback"] = True
    else:
        raise SystemExit(f"unknown method {method!r}; choose from {METHODS}")
    return data


def run(spec: tuple) -> dict:
    """One training run ``(method, dial, seed, steps)``; its held-out accuracy by step."""
    from sdpo_kit.cli import train
    from sdpo_kit.registry import config_from_dict

    method, dial, seed, steps = spec
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = train(config_from_dict(method_config(method, dial), {"trainer.seed": seed, "trainer.max_steps": steps,
                                                                 "output_dir": out}),
                  config_path="benchmarks/bench_code_lab.py")
        wall = time.perf_counter() - t0
    acc = [[r["step"], r["eval/accuracy"]] for r in s["history"] if r.get("eval/accuracy") is not None]
    reward = [[r["step"], round(r["reward/mean"], 4)] for r in s["history"] if "reward/mean" in r]
    return {"method": method, "dial": dial, "seed": seed, "steps": steps, "start_acc": s["before"],
            "final_acc": s["after"], "acc_by_step": acc, "reward_by_step": reward, "wall_s": round(wall, 1)}


def run_all(specs: list[tuple], jobs: int) -> list[dict]:
    """``run`` for each spec, results in order; ``jobs`` processes (one torch thread each)."""
    def show(r):
        print(f"dial {r['dial']} {r['method']} seed {r['seed']}: {r['start_acc']:.3f} -> {r['final_acc']:.3f} "
              f"({r['wall_s']} s)", flush=True)

    if jobs <= 1:
        out = [run(spec) for spec in specs]
        for r in out:
            show(r)
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        out = list(pool.map(run, specs))
    for r in out:
        show(r)
    return out


def teacher_part(dial: int) -> dict:
    """Part 1 at one dial: teacher quality on the held-out split, and one wrong attempt's feedback
    with the teacher prompt built from it (the trainer's templates)."""
    from sdpo_kit.core.sampling import generate_completions
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.lab.tasks import make_task
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.sdpo.reprompt import reprompt
    from sdpo_kit.sdpo.teacher_quality import teacher_quality
    from sdpo_kit.sdpo.test_time_training import TEMPLATE_KEYS

    t0 = time.perf_counter()
    cfg = config_from_dict(method_config("sdpo_feedback", dial))
    task = make_task(**cfg.task)
    model, tok = load_policy("tiny-lab", lab_config=lab_config_for(cfg, task))
    warm_s = time.perf_counter() - t0
    templates = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    held = task.splits()[1]
    out = {**teacher_quality(model, tok, task, held, **templates), "warm_start_s": round(warm_s, 1)}
    tried = generate_completions(model, tok, [r["prompt"] for r in held[:32]], max_new_tokens=task.max_completion_tokens())
    scored = task.scored(tried, [r["answer"] for r in held[:32]])
    i = next((i for i, s in enumerate(scored) if s["score"] == 0.0 and s["feedback"]), None)
    if i is not None:
        out["example"] = {"prompt": held[i]["prompt"][-1]["content"], "attempt": tried[i].strip(),
                          "feedback": scored[i]["feedback"],
                          "teacher_prompt": reprompt(held[i]["prompt"], None, scored[i]["feedback"],
                                                     **templates)[-1]["content"]}
    print(f"dial {dial}: {out}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--dial", type=int, nargs="+", default=DIALS, help="context SFT steps of the warm start")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--steps", type=int, default=None, help=f"training steps (default: {CONFIG}'s max_steps)")
    ap.add_argument("--runs-at-every-dial", action="store_true", help="training runs at every --dial (default: the top)")
    ap.add_argument("--jobs", type=int, default=1, help="training runs at once, one process each")
    ap.add_argument("--out", default=None, help=out_help("code_lab"))
    args = ap.parse_args()
    if any(d < 0 for d in args.dial):
        raise SystemExit("--dial takes step counts >= 0")
    steps = args.steps or method_config("grpo", 0)["trainer"]["max_steps"]

    teacher = {str(d): teacher_part(d) for d in args.dial}
    run_dials = sorted(args.dial) if args.runs_at_every_dial else [max(args.dial)]
    runs = run_all([(m, d, s, steps) for d in run_dials for m in args.methods for s in args.seeds], args.jobs)

    print(f"\nmachine: {machine()}\n")
    print(table(["dial", "plain", "teacher + sibling", "teacher + feedback", "token win demo", "token win feedback"],
                [[d, q["plain_acc"], q["demo_acc"], q["feedback_acc"], q["token_win_demo"], q["token_win_feedback"]]
                 for d, q in teacher.items()]))
    rows = []
    for d in run_dials:
        for m in args.methods:
            mine = [r for r in runs if r["dial"] == d and r["method"] == m]
            rows.append([d, m, median([r["start_acc"] for r in mine]), median([r["final_acc"] for r in mine]),
                         ", ".join(f"{r['final_acc']:.3f}" for r in mine)])
    print(table(["dial", "method", "start", "final (median)", "per seed"], rows))
    summary = {"teacher": teacher,
               "final_median": {f"{d}/{m}": row[3] for (d, m), row in
                                zip([(d, m) for d in run_dials for m in args.methods], rows)}}
    write_results("code_lab", out=args.out,
                  config={"seeds": args.seeds, "dials": args.dial, "run_dials": run_dials, "methods": args.methods,
                          "steps": steps, "base": CONFIG, "jobs": args.jobs},
                  runs=runs, summary=summary)


if __name__ == "__main__":
    main()
