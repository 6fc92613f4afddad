"""VAPOR on the tiny lab: does the preference term help? And what does it cost per step?

    python benchmarks/bench_vapor.py [--seeds 0 1 2] [--steps 300] [--speed-steps 30] [--jobs J] [--resume] [--out FILE]

Part 1, learning: ``configs/vapor.yaml`` (scratch backend) for each seed and three variants on
the same budget:

    grpo_span     VAPOR's surrogate with log P = 0: GRPO on the verifiable span only
                  (``vapor_variant=additive, preference_weight=0``)
    as_specified  VAPOR as this project's design specifies it: h = v x P inside the clip
    additive      the repaired form: GRPO on the span + 1.0 x DPO's -log sigmoid(log P)

and, per run, held-out greedy accuracy before / after and the held-out preference margin
(mean log pi(chosen) - log pi(rejected) over the preference spans of the 200 held-out pairs,
and the fraction of pairs preferred the right way), before / after.

Part 2, speed: seconds per step of TRL's ``VAPORTRLTrainer`` (results key ``VAPORTrainer``) vs plain ``GRPOTrainer``
on the same config (TRL backend, evaluation off, first 5 steps dropped): the preference forwards are the
added cost. Writes ``benchmarks/results/vapor.json``. The runs of part 1 go through ``runner.run_all``
(``--jobs``, ``--resume``).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import yaml
from _common import ROOT, median, parse_args, results_path, write_results
from runner import add_runner_args, journal_path, run_all

VARIANTS = {
    "grpo_span": {"trainer.vapor_variant": "additive", "trainer.preference_weight": 0.0},
    "as_specified": {"trainer.vapor_variant": "as_specified"},
    "additive": {"trainer.vapor_variant": "additive", "trainer.preference_weight": 1.0},
}
VAPOR_ONLY = ("verifiable_term_split", "preference_term_split", "preference_beta", "vapor_variant",
              "preference_weight")
CONFIG = "configs/vapor.yaml"


def train(data: dict, overrides: dict) -> dict:
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.training import train as run

    return run(config_from_dict(data, overrides), config_path=CONFIG)


def heldout_margin(model, tokenizer, cfg) -> dict:
    from sdpo_kit.registry import make_task
    from sdpo_kit.vapor.parts import preference_margin

    heldout = make_task(**cfg["task"]).splits()[1]
    return preference_margin(model, tokenizer, heldout, tuple(cfg["trainer"]["preference_term_split"]))


def run(spec: tuple) -> dict:
    """One run of part 1, ``(variant, seed, steps, margin_before, pref_acc_before)``: held-out accuracy and
    preference margin before and after (the start's margin measured once, by ``main``)."""
    variant, seed, steps, margin_before, pref_acc_before = spec
    data = yaml.safe_load((ROOT / CONFIG).read_text())
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        s = train(data, {**VARIANTS[variant], "trainer.seed": seed, "trainer.max_steps": steps, "output_dir": out})
        wall = time.perf_counter() - t0
    after = heldout_margin(s["model"], s["tokenizer"], data)
    return {"variant": variant, "seed": seed, "acc_before": s["before"], "acc_after": s["after"],
            "margin_before": margin_before, "margin_after": after["margin"],
            "pref_acc_before": pref_acc_before, "pref_acc_after": after["accuracy"], "wall_s": wall}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--speed-steps", type=int, default=30)
    add_runner_args(ap, "vapor")
    args = parse_args(ap)
    data = yaml.safe_load((ROOT / CONFIG).read_text())

    from sdpo_kit.models import load_policy

    start, tok = load_policy("tiny-lab", lab_config={"task": data["task"]["name"], **data["model"].get("lab", {})})
    before = heldout_margin(start, tok, data)   # the warm start, cached before any run
    specs = [(v, seed, args.steps, before["margin"], before["accuracy"]) for seed in args.seeds for v in VARIANTS]
    runs = run_all(run, specs, jobs=args.jobs, journal=journal_path(results_path("vapor", args.out).stem, args.resume),
                   show=lambda r: print(f"{r['variant']} seed {r['seed']}: {r['acc_before']:.3f} -> "
                                        f"{r['acc_after']:.3f} ({r['wall_s']:.1f} s)", flush=True))

    speed = {}
    for name, algorithm in (("VAPORTrainer", "vapor"), ("GRPOTrainer", "grpo")):
        d = {**data, "algorithm": algorithm, "backend": "trl"}
        if algorithm == "grpo":
            d["trainer"] = {k: v for k, v in data["trainer"].items() if k not in VAPOR_ONLY}  # same rows and knobs
        with tempfile.TemporaryDirectory() as out:
            s = train(d, {"trainer.max_steps": args.speed_steps, "trainer.eval_every": 0, "output_dir": out})
        times = [r["time/step_s"] for r in s["history"] if r.get("step", 0) > 5 and "time/step_s" in r]
        speed[name] = {"median_s": median(times), "times_s": times}
    ratio = speed["VAPORTrainer"]["median_s"] / speed["GRPOTrainer"]["median_s"]

    write_results("vapor", out=args.out, config={"config": CONFIG, "steps": args.steps, "seeds": args.seeds,
                                   "variants": VARIANTS, "speed_steps": args.speed_steps},
                  runs=runs, summary={"before": before, "speed": speed, "vapor_over_grpo_s_per_step": ratio})


if __name__ == "__main__":
    main()
