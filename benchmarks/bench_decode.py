"""Where the real model's sampling time goes: one GRPO batch of ``configs/real_grpo.yaml`` (4 prompts x 4
samples, 48 tokens at temperature 0.7) through ``core.sampling.sample``, on 2 threads.

    python benchmarks/bench_decode.py [--threads 2] [--repeats 3]    -> results/real_decode.json

Sampling is most of a scratch GRPO step on this model (``real_speed.json``'s ``breakdown_s``). Measured here:

    lora      seconds to sample the batch as training does: LoRA adapters beside the frozen base weights
    merged    the same with each adapter merged into a temporary copy of its base weight (W + s B A) and the
              adapters switched off: the speed a merge-for-sampling would give (the original tensors are put
              back after, bit for bit); ``rows_identical`` the share of sampled rows equal to the LoRA ones
    ops       torch.profiler's self CPU seconds of the merged run, by op: ``aten::mm`` is the matmuls (each
              decode step reads every weight for 16 tokens, so they run far below the matmul's GFLOP/s),
              ``aten::exponential_`` is ``torch.multinomial``'s draw over the whole vocabulary, ``aten::cat``
              and ``aten::copy_`` the growing KV cache

The adapter's B is drawn at random (std 0.01) so the merge changes the weights, as after training. Medians
over ``--repeats`` runs after one warm-up run; the same seed for every run.
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

import torch
from _common import machine, median, parse_args, table, write_results

CONFIG = "configs/real_grpo.yaml"


@contextmanager
def merged_lora(model):
    """Each LoRA layer's adapters merged into a new base weight tensor, the adapters off; the original
    tensors back on exit."""
    from peft.tuners.lora import LoraLayer

    saved = []
    try:
        with torch.no_grad():
            for m in (m for m in model.modules() if isinstance(m, LoraLayer)):
                base = m.get_base_layer()
                delta = sum(m.get_delta_weight(a) for a in m.active_adapters)   # (out, in)
                saved.append((base, base.weight.data))
                base.weight.data = base.weight.data + delta.to(base.weight.dtype)
        with model.disable_adapter():
            yield
    finally:
        for base, data in saved:
            base.weight.data = data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = parse_args(ap)
    torch.set_num_threads(args.threads)
    from torch.profiler import ProfilerActivity, profile

    from sdpo_kit.core.sampling import sample
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

    def run():
        torch.manual_seed(0)
        t0 = time.perf_counter()
        ro = sample(model, tok, [r["prompt"] for r in rows], max_new_tokens=tc.max_completion_length,
                    temperature=tc.temperature, num_return_sequences=tc.num_generations)
        return time.perf_counter() - t0, ro.completion_ids

    run()
    lora = [run() for _ in range(args.repeats)]
    with merged_lora(model):
        merged = [run() for _ in range(args.repeats)]
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run()
    a, b = lora[0][1], merged[0][1]
    same = (a == b).all(1).float().mean().item() if a.shape == b.shape else 0.0
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    ops = {e.key: e.self_cpu_time_total / 1e6 for e in events[:8]}
    tokens = a.shape[0] * a.shape[1]
    runs = [{"variant": "lora", "seconds": [t for t, _ in lora]}, {"variant": "merged", "seconds": [t for t, _ in merged]}]
    summary = {"lora_s": median(runs[0]["seconds"]), "merged_s": median(runs[1]["seconds"]), "rows_identical": same,
               "batch": list(a.shape), "ops_s": ops, "profiled_s": total}
    summary["merged_over_lora"] = summary["merged_s"] / summary["lora_s"]
    summary["s_per_token_step"] = summary["lora_s"] / a.shape[1]
    print(f"machine: {machine()}\n")
    print(table(["variant", "median s", "s per decode step"],
                [[r["variant"], median(r["seconds"]), median(r["seconds"]) / a.shape[1]] for r in runs]))
    print(f"\nmerged / lora {summary['merged_over_lora']:.2f}; sampled rows identical {same:.2f}; {tokens} tokens\n")
    print(table(["op (merged run)", "self s", "share"], [[k, v, f"{v / total:.0%}"] for k, v in ops.items()]))
    write_results("real_decode", config={"config": CONFIG, "threads": args.threads, "repeats": args.repeats},
                  runs=runs, summary=summary)


if __name__ == "__main__":
    main()
