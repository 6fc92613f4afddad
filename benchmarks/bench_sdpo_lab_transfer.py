"""Why test-time SDPO trails multi-turn reprompting on the skill lab's hard rows, measured.

    python benchmarks/bench_sdpo_lab_transfer.py [--dial D] [--lrs LR ...] [--checkpoints N ...]
                                                 [--samples K] [--batch-size B] [--rows N] [--out FILE]

Both methods read the same feedback. Multi-turn reprompting samples *from* the reprompted prompt: its
next attempts are the teacher's own samples. Test-time SDPO samples from the plain prompt and reaches
the teacher's knowledge only as far as its SDPO steps have moved the weights. So the question is how
fast that transfer is. On the hard held-out rows of ``bench_sdpo_lab.py --discovery`` (the warm start
at ``--dial`` solves them in under 10% of 32 plain samples; the first ``--rows`` of them), per row:

    plain rate     the share of K plain samples that succeed (the warm start)
    reprompt rate  the share that succeed among K samples from feedback reprompts: one plain batch of B
                   attempts, each failed one's feedback put in the teacher prompt (``text.reprompt``, the
                   lab's templates), K / (failed attempts) samples from each: what multi-turn draws from
    by round       multi-turn reprompting's own chain (``chain_rates``), not stopped at a success: the share
                   of right attempts in each of ``--rounds`` rounds of B, over ``--chains`` chains
    after n steps  test-time SDPO's own loop (``sdpo.at_test_time.sdpo_step``: a batch of B plain
                   attempts from the copy, one sampled-token SDPO step on the failed ones towards the frozen
                   warm start reading each one's feedback), not stopped at a success, and the copy's plain
                   rate over K samples after n steps, for each n of ``--checkpoints`` and each ``--lrs``

``test_time_sdpo``'s defaults are the first learning rate (1e-4), one step per batch of 8 and the
frozen teacher; the discovery benchmark's 128 attempts allow at most 15 steps. Nothing is tuned or
picked: every learning rate is reported. Writes ``benchmarks/results/sdpo_lab_transfer.json`` (``runs``:
one per row with its rates; ``summary``: means over rows, and ``*_found``: the rows with at least one success
among their samples, since one easy row can carry a mean) and prints tables.
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
from _common import out_help, parse_args, write_results
from lab import DIALS, warm_start_for


def attempts(model, tok, task, row, reward, *, prompt=None, n: int, temperature: float):
    """``n`` samples from ``prompt`` (default: the row's plain prompt), scored against the row's answer:
    (the rollout, the scores, the feedbacks)."""
    from sdpo_kit.core.sampling import sample
    from sdpo_kit.sdpo.multi_turn import score_completions

    ro = sample(model, tok, [prompt or row["prompt"]], max_new_tokens=task.max_completion_tokens(),
                temperature=temperature, num_return_sequences=n)
    _, scores, feedbacks = score_completions(reward, row["prompt"], ro.texts,
                                             {task.answer_column: row[task.answer_column]})
    return ro, scores, feedbacks


def rate(model, tok, task, row, reward, *, prompt=None, samples: int, temperature: float) -> float:
    """The share of ``samples`` samples from ``prompt`` (default: the row's plain prompt) that succeed."""
    _, scores, _ = attempts(model, tok, task, row, reward, prompt=prompt, n=samples, temperature=temperature)
    return sum(s >= 1.0 for s in scores) / samples


def failed_batch(model, tok, task, row, reward, *, batch_size: int, temperature: float, templates: dict):
    """B plain attempts from ``model``: the rollout, each attempt's teacher prompt (its own feedback, or the
    plain prompt) and the row mask (1: a failed attempt with feedback)."""
    from sdpo_kit.sdpo.at_test_time import feedback_teacher_prompts

    ro, scores, feedbacks = attempts(model, tok, task, row, reward, n=batch_size, temperature=temperature)
    prompts, mask = feedback_teacher_prompts(row["prompt"], scores, feedbacks, **templates)
    return ro, prompts, mask                                                                  # mask (B,)


def chain_rates(model, tok, task, row, reward, *, rounds: int, batch_size: int, temperature: float, templates: dict,
                chains: int) -> list[float]:
    """Multi-turn reprompting's rounds, not stopped at a success: round 1 samples B attempts from the plain
    prompt, round r + 1 from the reprompt with the feedback on one of round r's failed attempts (the first;
    with an exact-match score every failure is as good as any), the prompt kept when none failed. The share of
    right attempts in each round, mean over ``chains`` independent chains."""
    from sdpo_kit.text.reprompt import reprompt

    hits = [0.0] * rounds
    for _ in range(chains):
        current = row["prompt"]
        for r in range(rounds):
            _, scores, feedbacks = attempts(model, tok, task, row, reward, prompt=current, n=batch_size,
                                            temperature=temperature)
            hits[r] += sum(x >= 1.0 for x in scores) / batch_size / chains
            failed = next((f for x, f in zip(scores, feedbacks) if x < 1.0 and f), None)
            current = reprompt(row["prompt"], None, failed, **templates) if failed else current
    return hits


def measure_row(model, tok, task, row, reward, *, lrs, checkpoints, samples, batch_size, temperature, templates,
                seed, rounds, chains) -> dict:
    """One hard row: its plain rate, its reprompt rate, and the copy's plain rate after n test-time SDPO steps."""
    from sdpo_kit.sdpo.at_test_time import sdpo_step

    torch.manual_seed(seed)
    plain = rate(model, tok, task, row, reward, samples=samples, temperature=temperature)
    _, prompts, mask = failed_batch(model, tok, task, row, reward, batch_size=batch_size, temperature=temperature,
                                    templates=templates)
    taught = [p for p, m in zip(prompts, mask.tolist()) if m]
    each = max(1, samples // max(1, len(taught)))
    hits = [rate(model, tok, task, row, reward, prompt=p, samples=each, temperature=temperature) for p in taught]
    out = {"row": row["prompt"], "answer": row[task.answer_column], "plain_rate": plain,
           "reprompt_rate": statistics.mean(hits) if hits else None, "after": {},
           "chain_by_round": chain_rates(model, tok, task, row, reward, rounds=rounds, batch_size=batch_size,
                                         temperature=temperature, templates=templates, chains=chains)}
    for lr in lrs:
        torch.manual_seed(seed)
        student = copy.deepcopy(model).requires_grad_(True)
        opt = torch.optim.AdamW(student.parameters(), lr=lr)
        curve = {0: plain}
        for n in range(1, max(checkpoints) + 1):
            ro, prompts, mask = failed_batch(student, tok, task, row, reward, batch_size=batch_size,
                                             temperature=temperature, templates=templates)
            if mask.any():                  # model: the frozen warm start, test_time_sdpo's default teacher
                sdpo_step(student, opt, model, tok, row["prompt"], prompts, ro, mask, temperature)
            if n in checkpoints:
                curve[n] = rate(student, tok, task, row, reward, samples=samples, temperature=temperature)
        out["after"][f"{lr:g}"] = curve
    return out


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dial", type=int, default=DIALS[-1], help="the warm start (context steps; the top by default)")
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-4, 1e-3], help="test-time learning rates")
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[1, 2, 4, 8, 15], help="steps to measure after")
    # hard rows succeed on about 1 sample in 100 (best-of-k's curve): 256 samples a rate, so that the mean over
    # the rows rests on thousands of samples (32, the hard-row cut's own count, read 0 on most rows)
    ap.add_argument("--samples", type=int, default=256, help="samples per rate")
    ap.add_argument("--batch-size", type=int, default=8, help="attempts per test-time batch (the discovery run's)")
    ap.add_argument("--rounds", type=int, default=16, help="multi-turn rounds per chain (128 attempts / 8)")
    ap.add_argument("--chains", type=int, default=8, help="multi-turn chains per row")
    ap.add_argument("--rows", type=int, default=40, help="at most this many hard rows (the discovery run's cut)")
    ap.add_argument("--out", default=None, help=out_help("sdpo_lab_transfer"))
    return ap


def mean(xs):
    """The mean of the rates that were measured (None left out); None when none was."""
    xs = [x for x in xs if x is not None]
    return statistics.mean(xs) if xs else None


def found(xs):
    """Rows with at least one success among their samples."""
    return sum(x is not None and x > 0 for x in xs)


def summarize(runs: list[dict], lrs: list[float], checkpoints: list[int], rounds: int) -> dict:
    """The rows' mean rates and how many rows found an answer: plain, reprompted, after each test-time step
    count at each rate, and the multi-turn chains' by round."""
    marks = [0, *checkpoints]
    return {"plain_rate": mean(r["plain_rate"] for r in runs),
            "reprompt_rate": mean(r["reprompt_rate"] for r in runs),
            "plain_found": found(r["plain_rate"] for r in runs),
            "reprompt_found": found(r["reprompt_rate"] for r in runs),
            "after": {f"{lr:g}": {str(n): mean(r["after"][f"{lr:g}"][n] for r in runs) for n in marks}
                      for lr in lrs},
            "after_found": {f"{lr:g}": {str(n): found(r["after"][f"{lr:g}"][n] for r in runs) for n in marks}
                            for lr in lrs},
            "chain_by_round": [mean(r["chain_by_round"][k] for r in runs) for k in range(rounds)]}


def main():
    ap = arguments()
    args = parse_args(ap)
    if min(args.checkpoints + [args.samples, args.batch_size, args.rounds, args.chains]) < 1 or min(args.lrs) <= 0:
        raise SystemExit("--checkpoints, --samples, --batch-size, --rounds and --chains take positive ints, --lrs "
                         "positive rates")
    from sdpo_kit.rewards import feedback_reward
    from sdpo_kit.sdpo.at_test_time import TEMPLATE_KEYS, hard_rows

    torch.set_num_threads(1)
    model, tok, task, cfg = warm_start_for(args.dial)
    model.eval()
    temperature = cfg.trainer.temperature
    templates = {k: getattr(cfg.trainer, k) for k in TEMPLATE_KEYS}
    reward = feedback_reward(style=task.feedback_style)
    hard = hard_rows(model, tok, task, task.splits()[1], reward, samples=32, below=0.1, temperature=temperature)
    rows = hard[:args.rows]
    checkpoints = sorted(set(args.checkpoints))
    runs = []
    for i, row in enumerate(rows):
        runs.append(measure_row(model, tok, task, row, reward, lrs=args.lrs, checkpoints=checkpoints,
                                samples=args.samples, batch_size=args.batch_size, temperature=temperature,
                                templates=templates, seed=i, rounds=args.rounds, chains=args.chains))
        r = runs[-1]
        print(f"row {i} {r['row']!r}: plain {r['plain_rate']:.3f} reprompt {r['reprompt_rate']} after "
              + "; ".join(f"lr {lr}: {list(c.values())}" for lr, c in r["after"].items()), flush=True)

    summary = {"rows": len(rows), "hard_of_heldout": [len(hard), len(task.splits()[1])],
               **summarize(runs, args.lrs, checkpoints, args.rounds)}
    write_results("sdpo_lab_transfer", out=args.out,
                  config={"dial": args.dial, "lrs": args.lrs, "checkpoints": checkpoints, "samples": args.samples,
                          "batch_size": args.batch_size, "rows": args.rows, "rounds": args.rounds,
                          "chains": args.chains, "temperature": temperature},
                  runs=runs, summary=summary)

if __name__ == "__main__":
    main()
