"""The real CPU model, measured: SmolLM2-135M-Instruct (``load_policy("smollm2-135m")``) on a CPU.

    python benchmarks/bench_real.py tasks [--n 100]                    -> results/real_tasks.json
    python benchmarks/bench_real.py speed [--steps 4] [--threads 2] [--runs ALGORITHM:BACKEND ...]
                                                                       -> results/real_speed.json
    python benchmarks/bench_real.py sdpo [--seeds 1 2 3] [--methods M ...] [--threads 2]    -> results/real_sdpo.json

``tasks``: held-out accuracy of every level of ``word_problems`` (``tasks/word_problems.py`` LEVELS, and the
default), greedy and sampled at the configs' temperature (0.7) and budget (48 tokens), read with the ``auto`` rule:
which setting leaves room to learn (0.2 to 0.6 greedy), and how many questions give a group some right and some wrong.

``speed``: every algorithm on every backend it has, at its real config's sizes, evaluation off, each run in a process
of its own on ``--threads`` threads: median seconds per step (the first dropped), peak resident memory, trained
tokens per second (prompts and completions times ``num_iterations``, over the step's wall time, sampling included),
and the scratch loops' timed parts (``breakdown_s``: sample, score, forward, backward with the optimizer, other).
Beside them, the limit the machine's matmul sets: a 1024 x 1024 fp32 matmul's GFLOP/s over the FLOPs a trained token
costs (4 x the parameters with LoRA: no weight gradients for the frozen base; 6 x in full), and the training pass
alone (forward, backward and AdamW on a fixed batch), which that limit bounds. ``--runs grpo:scratch grpo:trl``: a
step against TRL's, side by side. ``grpo:scratch`` samples as the config says (``trainer.sampling_dtype: auto``: a
bf16 copy of the policy on a CPU that multiplies bf16, its samples corrected in the loss; each run records what it
resolved to), ``grpo:scratch_fp32`` with the policy itself.

GRPO's learning on this model, before and after per seed, is declared as data (``experiments.py``: the sweeps
``real_learn``, the policy sampling in fp32, and ``real_learn_bf16``, a bf16 copy sampling) and run by
``python benchmarks/run.py NAME``.

``sdpo``: GRPO against SDPO from successful siblings only (this model copies a demonstration but does not read the
checker's feedback), with TRL's defaults (``configs/real_sdpo.yaml``) and the RLHF book's small-model recipe
(``configs/real_sdpo_rlhf_book.yaml``; ``sdpo_rlhf_book_t07``: at GRPO's temperature, 0.7, not the book's 0.6), all
on the same seeds and all sampling in fp32, and the teacher's head start on the held-out questions before training
(``sdpo.quality``: plain accuracy, and with the right answer as a sibling's). ``runs`` as
``bench_sdpo_lab.py`` writes them (``method``, ``dial``: the setting, ``seed``, ``final_acc``, ``acc_by_step``),
so that ``bench_sdpo_head_start.py`` reads it beside the labs.

Left out on purpose: the T4 profile (no GPU here) and any run past 30 minutes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import statistics
import tempfile
import time

import torch
from _common import git_commit, median, parse_args, results_path, run_config, write_results

CONFIGS = {"grpo": "configs/real_grpo.yaml", "sdpo": "configs/real_sdpo.yaml", "vapor": "configs/real_vapor.yaml",
           "ppo": "configs/real_ppo.yaml"}
RUNS = [("grpo", "scratch"), ("grpo", "scratch_fp32"), ("grpo", "trl"), ("sdpo", "scratch"), ("sdpo", "trl"),
        ("vapor", "scratch"), ("vapor", "trl"), ("ppo", "scratch")]   # scratch_fp32: trainer.sampling_dtype=float32
BUDGET = 48   # the real configs' max_completion_length
TEMPERATURE = 0.7   # and their sampling temperature


# --- tasks --------------------------------------------------------------------------------
def bench_tasks(n: int, samples: int) -> list[dict]:
    from sdpo_kit.core.sampling import generate_completions
    from sdpo_kit.models import load_policy
    from sdpo_kit.tasks.word_problems import LEVELS, WordProblemTask

    model, tok = load_policy("smollm2-135m", lora=False)
    settings = {**{f"level {k}": v for k, v in LEVELS.items()}, "default": {}}
    runs = []
    for label, kw in settings.items():
        task = WordProblemTask(**kw, n_eval=n)
        try:
            _, heldout = task.splits()
        except ValueError as e:   # a setting too small for n held-out problems
            runs.append({"setting": label, "kw": kw, "skipped": str(e)})
            continue
        t0 = time.perf_counter()
        greedy = task.evaluate(model, tok, heldout, max_new_tokens=BUDGET)
        torch.manual_seed(0)
        prompts = [r["prompt"] for r in heldout for _ in range(samples)]
        texts = generate_completions(model, tok, prompts, max_new_tokens=BUDGET, do_sample=True,
                                     temperature=TEMPERATURE)
        right = [task.is_correct(t, r["answer"]) for t, r in zip(texts, [r for r in heldout for _ in range(samples)])]
        sampled = sum(right) / len(right)
        per_q = [sum(right[i * samples:(i + 1) * samples]) for i in range(len(heldout))]
        mixed = sum(0 < k < samples for k in per_q) / len(heldout)
        runs.append({"setting": label, "kw": {**kw}, "n": len(heldout), "greedy": greedy, "sampled": sampled,
                     "mixed_group_frac": mixed, "samples": samples, "seconds": time.perf_counter() - t0,
                     "example": heldout[0]["prompt"][-1]["content"]})
        print(f"{label}: greedy {greedy:.3f}  sampled {sampled:.3f}  mixed groups {mixed:.2f}", flush=True)
    return runs


# --- speed --------------------------------------------------------------------------------
def matmul_gflops(threads: int, size: int = 1024, repeats: int = 20) -> float:
    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    times = []
    for i in range(repeats + 3):
        t0 = time.perf_counter()
        _ = a @ b
        elapsed = time.perf_counter() - t0
        if i >= 3:   # the first three products warm up
            times.append(elapsed)
    return 2 * size**3 / statistics.median(times) / 1e9


def training_pass(threads: int, batch: int = 8, length: int = 96, repeats: int = 5) -> dict:
    """Tokens per second of forward + backward + AdamW on a fixed (batch, length) batch, LoRA, no sampling."""
    from sdpo_kit.models import load_policy

    torch.set_num_threads(threads)
    model, _ = load_policy("smollm2-135m")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    ids = torch.randint(100, 40000, (batch, length))
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:   # the first pass warms the allocator up
            times.append(time.perf_counter() - t0)
    s_per_pass = statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    return {"batch": batch, "length": length, "s_per_pass": s_per_pass, "tokens_per_s": batch * length / s_per_pass,
            "params": params}


PARTS = ("time/sample_s", "time/score_s", "time/forward_s", "time/backward_s")   # a scratch step's timed parts


def _speed_child(algorithm, backend, steps, threads, queue):
    torch.set_num_threads(threads)
    from sdpo_kit.core.sampler_copy import resolve_sampling_dtype
    from sdpo_kit.core.sampling import encode_prompts
    from sdpo_kit.registry import load_config, make_task
    fp32 = {"trainer.sampling_dtype": "float32"} if backend.endswith("_fp32") else {}
    with tempfile.TemporaryDirectory() as out:
        s = run_config(CONFIGS[algorithm], {"backend": backend.removesuffix("_fp32"), "trainer.max_steps": steps,
                                            "trainer.eval_every": 0, "trainer.log_completions_every": 0,
                                            "output_dir": out, "threads": threads, **fp32})
    rows = [r for r in s["history"] if r.get("step", 0) > 1 and r.get("time/step_s") is not None]
    cfg = load_config(CONFIGS[algorithm], fp32)
    tc = cfg.trainer
    task = make_task(**cfg.task)
    sample = task.splits()[0][:32]
    encoded = encode_prompts(s["tokenizer"], [r["prompt"] for r in sample])
    prompt_tokens = encoded["attention_mask"].sum(1).float().mean().item()
    per_step = getattr(tc, "batch_size", None) or tc.prompts_per_step * tc.num_generations
    passes = getattr(tc, "num_iterations", None) or getattr(tc, "ppo_epochs", 1)
    completion = median([r["completion/mean_length"] for r in rows if "completion/mean_length" in r])
    parts = {k[5:-2]: median([r[k] for r in rows]) for k in PARTS if all(k in r for r in rows)}
    if parts:
        parts["other"] = median([r["time/step_s"] - sum(r[k] for k in PARTS if k in r) for r in rows])
    queue.put({"algorithm": algorithm, "backend": backend, "times_s": [r["time/step_s"] for r in rows],
               "breakdown_s": parts,
               "median_s": median([r["time/step_s"] for r in rows]), "sequences": per_step, "passes": passes,
               "prompt_tokens": prompt_tokens, "completion_tokens": completion,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "sampling_dtype": resolve_sampling_dtype(getattr(tc, "sampling_dtype", "float32"), "cpu",   # as the loop
                                                        correctable=(algorithm, backend) == ("grpo", "scratch"))[0]})


def bench_speed(steps: int, threads: int, only: list[str] | None = None) -> tuple[list[dict], dict]:
    gflops = matmul_gflops(threads)
    pass_ = training_pass(threads)
    limit = {"lora": gflops * 1e9 / (4 * pass_["params"]), "full": gflops * 1e9 / (6 * pass_["params"])}
    print(f"matmul {gflops:.1f} GFLOP/s on {threads} threads: limit {limit['lora']:.0f} tokens/s with LoRA; "
          f"training pass {pass_['tokens_per_s']:.0f} tokens/s", flush=True)
    runs, ctx = [], mp.get_context("spawn")
    for algorithm, backend in [r for r in RUNS if not only or f"{r[0]}:{r[1]}" in only]:
        queue = ctx.Queue()
        proc = ctx.Process(target=_speed_child, args=(algorithm, backend, steps, threads, queue))
        proc.start()
        run = queue.get()
        proc.join()
        tokens = run["sequences"] * (run["prompt_tokens"] + run["completion_tokens"]) * run["passes"]
        run["trained_tokens_per_s"] = tokens / run["median_s"]
        runs.append(run)
        parts = ", ".join(f"{k} {v:.2f}" for k, v in run["breakdown_s"].items())
        print(f"{algorithm}/{backend}: {run['median_s']:.1f} s/step, {run['trained_tokens_per_s']:.0f} trained "
              f"tokens/s ({run['trained_tokens_per_s'] / limit['lora']:.2f} of the limit), peak "
              f"{run['peak_rss_mb']:.0f} MB" + (f"; seconds: {parts}" if parts else ""), flush=True)
    summary = {"matmul_gflops": gflops, "limit_tokens_per_s": limit, "training_pass": pass_,
               "training_pass_over_limit": pass_["tokens_per_s"] / limit["lora"]}
    by = {(r["algorithm"], r["backend"]): r for r in runs}
    if ("grpo", "scratch") in by and ("grpo", "trl") in by:
        summary["grpo_scratch_over_trl"] = by["grpo", "scratch"]["median_s"] / by["grpo", "trl"]["median_s"]
        summary["grpo_scratch_over_limit"] = by["grpo", "scratch"]["trained_tokens_per_s"] / limit["lora"]
    if ("grpo", "scratch_fp32") in by and ("grpo", "trl") in by:
        summary["grpo_fp32_over_trl"] = by["grpo", "scratch_fp32"]["median_s"] / by["grpo", "trl"]["median_s"]
        summary["grpo_fp32_over_limit"] = by["grpo", "scratch_fp32"]["trained_tokens_per_s"] / limit["lora"]
    return runs, summary


# --- sdpo ---------------------------------------------------------------------------------
SDPO_METHODS = {"grpo": ("configs/real_grpo.yaml", {"trainer.sampling_dtype": "float32"}),   # as SDPO's loops sample
                "sdpo": ("configs/real_sdpo.yaml", {"trainer.include_environment_feedback": False}),
                "sdpo_rlhf_book": ("configs/real_sdpo_rlhf_book.yaml", {}),
                # the book's recipe at GRPO's temperature: is its edge the loss and live teacher, or cooler samples?
                "sdpo_rlhf_book_t07": ("configs/real_sdpo_rlhf_book.yaml", {"trainer.temperature": 0.7})}
SETTING = "sums to 20"   # the configs' task (word_problems, kind sum, max_operand 20)


def real_teacher(n: int) -> dict:
    """The untrained model's teacher on ``n`` held-out questions, with the SDPO config's templates."""
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import load_config, make_task
    from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS
    from sdpo_kit.sdpo.quality import teacher_quality

    cfg = load_config(SDPO_METHODS["sdpo"][0], {})
    task = make_task(**cfg.task)
    model, tok = load_policy(cfg.model.name)
    templates = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    t0 = time.perf_counter()
    q = teacher_quality(model.eval(), tok, task, task.splits()[1][:n], batch_size=16,
                        max_new_tokens=cfg.trainer.max_completion_length, **templates)
    print(f"teacher on {n} held-out questions: {q} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return q


def bench_sdpo(methods: list[str], seeds: list[int], threads: int, on_run=None, prior: list[dict] = ()) -> list[dict]:
    """Every (seed, method) run, seed by seed; ``on_run(runs)`` after each (the results file so far).
    ``prior``: runs an earlier, cut-short invocation finished (``--resume``), kept and not run again."""
    runs = list(prior)
    commit = git_commit()
    for seed in seeds:
        for method in methods:
            if any(r["method"] == method and r["seed"] == seed for r in runs):
                continue
            path, over = SDPO_METHODS[method]
            with tempfile.TemporaryDirectory() as out:
                t0 = time.perf_counter()
                s = run_config(path, {"trainer.seed": seed, "output_dir": out, "threads": threads, **over})
            h = s["history"]
            runs.append({"method": method, "dial": SETTING, "seed": seed, "start_acc": s["before"],
                         "final_acc": s["after"], "acc_by_step": [[r["step"], r["eval/accuracy"]] for r in h
                                                                  if r.get("eval/accuracy") is not None],
                         "teacher_coverage": [r["sdpo/teacher_coverage"] for r in h if "sdpo/teacher_coverage" in r],
                         "wall_s": round(time.perf_counter() - t0, 1), "config": path, "overrides": over,
                         "commit": commit})
            print(f"{method} seed {seed}: {s['before']:.3f} -> {s['after']:.3f} in {runs[-1]['wall_s'] / 60:.1f} min",
                  flush=True)
            if on_run:
                on_run(runs)
    return runs


def resumed(args) -> tuple[list[dict], dict, list[int]]:
    """``--resume``: the runs and teacher of ``results/real_sdpo.json``, each run stamped with the commit
    that measured it, and the seeds of both invocations. ``--methods`` must hold the file's methods (each
    with the config and overrides it ran) and may add others, which then run on every seed."""
    path = results_path("real_sdpo")
    if not path.exists():
        raise SystemExit(f"--resume: {path} does not exist")
    old = json.loads(path.read_text())
    lacking = [m for m in old["config"]["methods"] if m not in args.methods]
    if lacking:   # --methods may add methods (they run on every seed), never drop the file's
        raise SystemExit(f"--resume: --methods {args.methods} lacks the file's methods {lacking}")
    moved = [m for m, spec in old["config"]["methods"].items() if spec and list(spec) != list(SDPO_METHODS[m])]
    if moved:
        raise SystemExit(f"--resume: the file ran {moved} with another config or overrides than SDPO_METHODS now "
                         "gives")
    if old["config"]["n_teacher"] != args.n_teacher:
        raise SystemExit(f"--resume: the file's teacher used {old['config']['n_teacher']} questions, not "
                         f"{args.n_teacher}")
    prior = [{**r, "commit": r.get("commit", old["commit"])} for r in old["runs"]]
    teacher = {k: {**v, "commit": v.get("commit", old["commit"])} for k, v in old["summary"]["teacher"].items()}
    seeds = sorted(set(old["config"]["seeds"]) | set(args.seeds))
    kept = ", ".join(f"{r['method']} seed {r['seed']}" for r in prior)
    print(f"resuming {path.name}: {len(prior)} runs kept ({kept})", flush=True)
    return prior, teacher, seeds


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["tasks", "speed", "sdpo"])
    ap.add_argument("--methods", nargs="+", default=list(SDPO_METHODS), choices=list(SDPO_METHODS),
                    help="sdpo: methods")
    ap.add_argument("--n-teacher", type=int, default=100, help="sdpo: held-out questions for the teacher's head start")
    ap.add_argument("--n", type=int, default=100, help="tasks: held-out problems per setting")
    ap.add_argument("--samples", type=int, default=4, help="tasks: samples per problem at the configs' temperature")
    ap.add_argument("--steps", type=int, default=4, help="speed: steps per run (the first is dropped)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", nargs="+", default=None, choices=[f"{a}:{b}" for a, b in RUNS],
                    help="speed: ALGORITHM:BACKEND runs to measure (default: all)")
    # seed 0 ran the probe that picked configs/real_grpo.yaml's learning rate: the reported seeds are others
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--resume", action="store_true",
                    help="sdpo: keep the runs results/real_sdpo.json holds (and its teacher) and run only the missing "
                         "(method, seed) pairs; --methods holds the file's methods and may add more (run on every "
                         "seed)")
    return ap


def write_tasks(args) -> None:
    runs = bench_tasks(args.n, args.samples)
    done = [r for r in runs if "greedy" in r]
    config = {"n": args.n, "samples": args.samples, "budget": BUDGET, "temperature": TEMPERATURE,
              "threads": args.threads}
    write_results("real_tasks", config=config, runs=runs,
                  summary={"default_greedy": next(r["greedy"] for r in done if r["setting"] == "default")})


def write_speed(args) -> None:
    runs, summary = bench_speed(args.steps, args.threads, args.runs)
    write_results("real_speed", config={"steps": args.steps, "threads": args.threads, "configs": CONFIGS,
                                        "runs": args.runs or [f"{a}:{b}" for a, b in RUNS]},
                  runs=runs, summary=summary)


def write_sdpo(args) -> None:
    prior, teacher, seeds = resumed(args) if args.resume else ([], None, args.seeds)
    teacher = teacher or {SETTING: real_teacher(args.n_teacher)}
    config = {"methods": {m: SDPO_METHODS[m] for m in args.methods}, "seeds": seeds, "threads": args.threads,
              "n_teacher": args.n_teacher}

    def save(runs, complete=False):   # after every run: a run cut short keeps the seeds it finished
        done = [m for m in args.methods if any(r["method"] == m for r in runs)]
        finals = {m: median([r["final_acc"] for r in runs if r["method"] == m]) for m in done}
        write_results("real_sdpo", config=config, runs=runs,
                      summary={"teacher": teacher, "final_median": finals, "complete": complete,
                               "seeds_done": sorted({r["seed"] for r in runs}),
                               "run_commits": sorted({r["commit"] for r in runs})})
        return finals

    runs = bench_sdpo(args.methods, seeds, args.threads, on_run=save, prior=prior)
    save(runs, complete=True)


def main():
    ap = arguments()
    args = parse_args(ap)
    torch.set_num_threads(args.threads)
    {"tasks": write_tasks, "speed": write_speed, "sdpo": write_sdpo}[args.what](args)


if __name__ == "__main__":
    main()
