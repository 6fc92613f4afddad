"""Where the real model's sampling time goes, most of its scratch GRPO step (``real_speed.json``): one batch of
``configs/real_grpo.yaml`` (4 prompts x 4 samples, 48 tokens at temperature 0.7) through ``core.sampling.sample``.

    python benchmarks/bench_decode.py [--threads 2] [--repeats 3]    -> results/real_decode.json

    lora      seconds to sample the batch with the LoRA adapters beside the frozen base weights (three matmuls
              a layer): ``core.sampling``'s fold switched off
    merged    as sampling runs it: each adapter folded into a new base weight (W + s B A; ``merged_lora``, the
              originals back after, bit for bit); ``rows_identical`` the share of rows equal to the LoRA ones;
              ``plain_layout_s`` the same with ``F.linear``'s layout instead of ``core.decoding.few_row_linears``
    ops       torch.profiler's self CPU seconds of the merged run, by op: ``aten::mm`` the matmuls (16 tokens a
              read of every weight: far below the matmul's GFLOP/s), ``aten::uniform_`` and ``aten::log1p`` the
              draw (``core.sampling.draw``), ``aten::cat`` and ``aten::copy_`` the growing KV cache
    floor     a decode step reads every weight once (``weights_mb``, fp32): T steps take at least T x weights /
              bandwidth, a plain tensor copy's (``copy_gb_s``: bytes read plus written a second, 512 MiB)
    draw      ``draw_s``: the batch's draws alone, ``torch.multinomial`` against ``core.sampling.draw``, which
              sampling calls (the same tokens from the same random numbers, checked here on every draw)
    bf16      the same batch from the bf16 copy ``trainer.sampling_dtype: bfloat16`` samples from (``bf16_s``;
              ``bf16_cast_s`` the copy's refresh before a batch); ``rows_identical_bf16``: rows equal to fp32's

The adapter's B is drawn at random (std 0.01) so the merge changes the weights, as after training. Medians over
``--repeats`` runs after a warm-up run, the same seed for each.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from unittest import mock

import torch
from _common import median, parse_args, write_results

CONFIG = "configs/real_grpo.yaml"


def copy_gb_per_s(mb: int = 512, repeats: int = 5) -> float:
    """The machine's memory bandwidth as a tensor copy sees it: bytes read plus bytes written a second
    (GB/s), median of ``repeats`` copies of ``mb`` MiB of fp32, on the threads torch has."""
    a = torch.ones(mb * 2**18)
    b = torch.empty(mb * 2**18)
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        b.copy_(a)
        elapsed = time.perf_counter() - t0
        if i:   # the first copy warms up
            times.append(elapsed)
    return 2 * a.numel() * a.element_size() / median(times) / 1e9


def draw_seconds(B: int, V: int, steps: int, repeats: int = 3) -> dict:
    """Seconds for ``steps`` draws of one token per row from (B, V) probabilities, median of ``repeats``:
    ``torch.multinomial`` (what ``generate`` calls: an exponential race over all V, its Exp(1) numbers made one at
    a time) against ``core.sampling.draw`` (what ``decode`` calls: the same race, the same numbers vectorised).
    Each repeat starts from the same seed; SystemExit if the two ever draw another token."""
    from sdpo_kit.core.decoding import draw

    probs = torch.softmax(torch.randn(B, V, generator=torch.Generator().manual_seed(0)) / 0.7, -1)   # (B, V)
    out, tokens = {}, {}
    for name, fn in (("multinomial", lambda: torch.multinomial(probs, 1).squeeze(1)), ("draw", lambda: draw(probs))):
        times = []
        for _ in range(repeats):
            torch.manual_seed(0)
            t0 = time.perf_counter()
            tokens[name] = [fn() for _ in range(steps)]                            # steps x (B,)
            times.append(time.perf_counter() - t0)
        out[name] = median(times)
    if not all(torch.equal(a, b) for a, b in zip(tokens["multinomial"], tokens["draw"])):
        raise SystemExit("core.sampling.draw drew another token than torch.multinomial from the same seed")
    return out


def rows_identical(x: torch.Tensor, y: torch.Tensor) -> float:
    """The share of rows of completion ids ``x`` equal to ``y``'s (0.0 when their shapes differ)."""
    return (x == y).all(1).float().mean().item() if x.shape == y.shape else 0.0


def real_batch():
    """The real model with random adapters (B drawn, so the merge changes the weights), its tokenizer, the
    config's trainer section and one step's prompts."""
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import load_config, make_task

    cfg = load_config(CONFIG)
    tc = cfg.trainer
    rows = make_task(**cfg.task).splits()[0][:tc.prompts_per_step]
    model, tok = load_policy(cfg.model.name)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.01, generator=torch.Generator().manual_seed(0))
    return model, tok, tc, rows


def time_variants(run, model, repeats: int) -> dict:
    """``run(policy)`` -> (seconds, completion ids), ``repeats`` times per variant after one warm-up: LoRA beside
    the base weights, merged, merged with ``F.linear``'s layout, the bf16 copy (with its refresh's seconds), and
    one merged run under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    from sdpo_kit.core.sampler_copy import SamplerCopy

    run()
    with mock.patch("sdpo_kit.core.sampling.mergeable_lora_layers", return_value=None):  # the fold off
        lora = [run() for _ in range(repeats)]
    merged = [run() for _ in range(repeats)]
    with mock.patch("sdpo_kit.core.sampling.few_row_linears", contextlib.nullcontext):  # F.linear's layout
        plain = [run() for _ in range(repeats)]
    half = SamplerCopy(model)   # another policy: the loss weights its samples (grpo.loss.sampler_weights)
    t0 = time.perf_counter()
    half.refresh()
    cast_s = time.perf_counter() - t0
    bf16 = [run(half.model) for _ in range(repeats)]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    return {"lora": lora, "merged": merged, "plain": plain, "cast_s": cast_s, "bf16": bf16, "prof": prof}


def summarize(timed: dict, model) -> tuple[list[dict], dict]:
    """The runs (each variant's seconds) and the summary: medians, rows identical, the profile's top ops, the
    floor a decode step's weight reads set, and the draws alone."""
    lora, merged, plain, bf16 = timed["lora"], timed["merged"], timed["plain"], timed["bf16"]
    a, b = lora[0][1], merged[0][1]
    events = sorted(timed["prof"].key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    ops = {e.key: e.self_cpu_time_total / 1e6 for e in events[:8]}
    runs = [{"variant": "lora", "seconds": [t for t, _ in lora]},
            {"variant": "merged", "seconds": [t for t, _ in merged]}]
    summary = {"lora_s": median(runs[0]["seconds"]), "merged_s": median(runs[1]["seconds"]),
               "rows_identical": rows_identical(a, b), "batch": list(a.shape), "ops_s": ops, "profiled_s": total,
               "bf16_s": median([t for t, _ in bf16]), "bf16_cast_s": timed["cast_s"],
               "rows_identical_bf16": rows_identical(bf16[0][1], b),
               "plain_layout_s": median([t for t, _ in plain]),
               "rows_identical_layout": rows_identical(plain[0][1], b)}
    summary["merged_over_lora"] = summary["merged_s"] / summary["lora_s"]
    summary["s_per_token_step"] = summary["lora_s"] / a.shape[1]
    # what bounds a decode step: it reads every weight once (the tied embedding once, as the output layer)
    weight_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "lora_" not in n)
    summary["weights_mb"] = weight_bytes / 1e6
    summary["copy_gb_s"] = copy_gb_per_s()
    summary["floor_s"] = a.shape[1] * summary["weights_mb"] / 1e3 / summary["copy_gb_s"]
    summary["draw_s"] = draw_seconds(a.shape[0], model.config.vocab_size, a.shape[1])
    return runs, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = parse_args(ap)
    torch.set_num_threads(args.threads)
    from sdpo_kit.core.sampling import sample

    model, tok, tc, rows = real_batch()

    def run(policy=model):
        torch.manual_seed(0)
        t0 = time.perf_counter()
        ro = sample(policy, tok, [r["prompt"] for r in rows], max_new_tokens=tc.max_completion_length,
                    temperature=tc.temperature, num_return_sequences=tc.num_generations)
        return time.perf_counter() - t0, ro.completion_ids

    runs, summary = summarize(time_variants(run, model, args.repeats), model)
    write_results("real_decode", config={"config": CONFIG, "threads": args.threads, "repeats": args.repeats},
                  runs=runs, summary=summary)

if __name__ == "__main__":
    main()
