"""The real CPU model's blocks and fields (``bench_real.py``'s results files and the ``real_learn`` sweeps), for
``render.py``.

    real-tasks   held-out accuracy of each word_problems level: greedy, sampled, groups with a signal
    real-speed   s/step, trained tokens per second and peak memory of every algorithm and backend,
                 against the limit the machine's matmul speed sets
    real-learn   GRPO's held-out accuracy before and after, per seed (real-learn-bf16: a bf16 copy samples)
    real-sdpo    GRPO against SDPO (and the RLHF book's recipe) per seed, with the untrained teacher's head start
"""

from __future__ import annotations

import statistics

from reports.format import fmt, md_table, provenance


def real_tasks(res: dict) -> str:
    rows = []
    for r in res["runs"]:
        if "greedy" not in r:
            rows.append([r["setting"], "-", "-", "-", "too few problems for the held-out set"])
            continue
        kw = ", ".join(f"{k}={v}" for k, v in r["kw"].items()) or "the task's defaults"
        rows.append([r["setting"], r["greedy"], r["sampled"], r["mixed_group_frac"], f"{kw}: {r['example']}"])
    c = res["config"]
    return "\n".join([
        md_table(["setting", "greedy", f"sampled (T={c.get('temperature', 0.7)})", "questions with a mixed group",
                  "settings and a held-out question"], rows), "",
        f"{c['n']} held-out questions each, {c['budget']} new tokens, answers read by the `auto` rule; a mixed group: "
        f"of {c['samples']} samples some right and some wrong (what gives GRPO a signal).", "", provenance(res)])


def real_speed(res: dict) -> str:
    s = res["summary"]
    rows = [[r["algorithm"], r["backend"], r["median_s"], f"{r['trained_tokens_per_s']:.0f}", f"{r['peak_rss_mb']:.0f}",
             f"{r['sequences']} x ({r['prompt_tokens']:.0f} + {r['completion_tokens']:.0f}) x {r['passes']}"]
            for r in res["runs"]]
    p = s["training_pass"]
    return "\n".join([
        md_table(["algorithm", "backend", "s/step", "trained tokens/s", "peak MB", "tokens a step (seq x (prompt + "
                                                                               "completion) x passes)"], rows), "",
        f"On {res['config']['threads']} threads a 1024 x 1024 fp32 matmul runs at {s['matmul_gflops']:.0f} GFLOP/s, "
        f"which caps training at about {s['limit_tokens_per_s']['lora']:.0f} tokens/s with LoRA (4 x "
        f"{p['params'] / 1e6:.0f}M FLOPs a token; {s['limit_tokens_per_s']['full']:.0f} in full, 6 x). The training "
        f"pass alone (forward, backward, AdamW on {p['batch']} x {p['length']} tokens) runs at "
        f"{p['tokens_per_s']:.0f} tokens/s: **{s['training_pass_over_limit']:.2f}** of that limit. A step's trained "
        f"tokens per second count its sampling too, which generates one token at a time.", *speed_parts(res), "",
        provenance(res)])


def speed_parts(res: dict) -> list[str]:
    """Where a scratch step's time goes (``breakdown_s``: sampling, scoring, the forward, the backward with the
    optimizer, the rest), and GRPO's step against TRL's and against the matmul limit, when measured."""
    runs = [r for r in res["runs"] if r.get("breakdown_s")]
    if not runs:
        return []
    keys = list(runs[0]["breakdown_s"])
    rows = [[r["algorithm"], r["backend"], f"{r['median_s']:.1f}",
             *(f"{r['breakdown_s'][k]:.1f} ({r['breakdown_s'][k] / r['median_s']:.0%})"
               if k in r["breakdown_s"] else "-" for k in keys)] for r in runs]
    out = ["", "Where a scratch step's seconds go (median over the timed steps; backward includes the optimizer; a "
           "dash: the loop does not time that part apart, as SDPO's student and teacher forwards, which fall in "
           "other):", "",
           md_table(["algorithm", "backend", "s/step", *keys], rows)]
    s = res["summary"]
    if "grpo_scratch_over_trl" in s:
        grpo = next(r for r in res["runs"] if (r["algorithm"], r["backend"]) == ("grpo", "scratch"))
        how = SAMPLED.get(grpo.get("sampling_dtype"), "")
        out += ["", f"GRPO's scratch step{how} takes **{s['grpo_scratch_over_trl']:.2f}** of TRL's GRPOTrainer step, "
                f"measured side by side, and trains at **{s['grpo_scratch_over_limit']:.2f}** of the matmul limit's "
                "tokens/s."]
    if "grpo_fp32_over_trl" in s:
        out[-1] += (f" With the policy sampling in fp32 (`trainer.sampling_dtype: float32`, which `auto` gives on "
                    f"a CPU without bf16 products), it takes **{s['grpo_fp32_over_trl']:.2f}** of TRL's step and "
                    f"trains at **{s['grpo_fp32_over_limit']:.2f}** of the limit.")
    return out


SAMPLED = {"bfloat16": " (as `configs/real_grpo.yaml` samples on this CPU: `auto` took the bf16 copy)",
           "float32": " (as `configs/real_grpo.yaml` samples on this CPU: `auto` kept the policy, in fp32)"}


def real_decode(res: dict) -> str:
    s = res["summary"]
    B, T = s["batch"]
    total = s["profiled_s"]
    ops = [[k, f"{v:.2f}", f"{v / total:.0%}"] for k, v in s["ops_s"].items()]
    return "\n".join([
        f"Sampling one batch of `{res['config']['config']}` ({B} rows x {T} tokens) takes **{s['merged_s']:.1f} s** "
        f"as training samples it, each LoRA adapter folded into a temporary copy of its base weight "
        f"(`core.sampling.merged_lora`, {s['merged_s'] / T:.2f} s a decode step), against **{s['lora_s']:.1f} s** "
        f"with the adapters beside the base weights, three matmuls a layer ({s['merged_over_lora']:.2f}; "
        f"{s['rows_identical']:.0%} of the sampled rows the same). Where the folded run's time goes, by op "
        "(torch.profiler, self time):", "",
        md_table(["op", "s", "share"], ops), "",
        "`aten::mm` is the matmuls: a decode step reads every weight for a handful of tokens, so they run far below "
        "the matmul's GFLOP/s; `aten::uniform_` and `aten::log1p` are the draw over the whole vocabulary "
        "(`core.sampling.draw`); "
        "`copy_` and `cat` grow the KV cache.", *floor(s, T), "", provenance(res)])


def floor(s: dict, T: int) -> list[str]:
    """What bounds sampling on a CPU, from ``real_decode.json``'s summary (absent in files before it)."""
    if "floor_s" not in s:
        return []
    mm = s["ops_s"].get("aten::mm", 0.0)
    return ["", f"What bounds it: a decode step reads every weight once, {s['weights_mb']:.0f} MB in fp32, and a "
                f"plain tensor copy moves {s['copy_gb_s']:.1f} GB/s on this machine, so {T} steps could take as little "
                f"as **{s['floor_s']:.1f} s**. The folded run takes {s['merged_s'] / s['floor_s']:.1f}x that: its "
                f"matmuls, at 16 rows, read the weights well below the copy's speed (`aten::mm` alone is "
                f"{mm / s['floor_s']:.1f}x the floor), and the rest is the draw, the growing cache and the per-op "
                "overhead of 30 layers a token.",
            *draw(s, T)]


def draw(s: dict, T: int) -> list[str]:
    """The draw's own cost: ``torch.multinomial`` against ``core.sampling.draw`` (absent in files before it)."""
    if "draw_s" not in s:
        return []
    d = s["draw_s"]
    return ["", f"The draw alone: {T} calls of `torch.multinomial` over the whole vocabulary take "
                f"{d['multinomial']:.2f} s; `core.sampling.draw`, which sampling calls, takes **{d['draw']:.2f} s** "
                "for the same tokens: the same exponential race from the same random numbers, its logarithms "
                "vectorised.",
            *half(s)]


def half(s: dict) -> list[str]:
    """The bf16 probe: the batch sampled from a bfloat16 copy of the folded weights (absent in files before it)."""
    if "bf16_s" not in s:
        return []
    layout = ([f"The folded run multiplies a step's few rows as y^T = W x^T (`core.decoding.few_row_linears`); in "
               f"`F.linear`'s layout it takes {s['plain_layout_s']:.1f} s ({s['rows_identical_layout']:.0%} of the "
               "rows the same).", ""] if "plain_layout_s" in s else [])
    return ["", *layout, f"Lower precision: from a bfloat16 copy of the folded weights the "
                f"batch takes **{s['bf16_s']:.1f} s** ({s['bf16_s'] / s['merged_s']:.2f} of the fp32 run's; the copy "
                f"{s['bf16_cast_s']:.2f} s more), and {s['rows_identical_bf16']:.0%} of its rows are the fp32 run's. "
                "A sampler in another precision is another policy, so training on its samples is off-policy by that "
                "much. `trainer.sampling_dtype: bfloat16` (scratch GRPO) samples from a bf16 copy kept in step with "
                "the policy (`core.sampler_copy`) and weights the loss as TRL weights vLLM's samples "
                "(`grpo.loss.sampler_weights`); `auto`, which `configs/real_grpo.yaml` sets, does so only on a CPU "
                "that multiplies bf16 in hardware (its `avx512_bf16` or `amx_bf16` flag), where the copy is the faster "
                "sampler; elsewhere the policy samples itself, as it does by default."]


def real_learn(res: dict) -> str:
    """GRPO on the real model, per seed: a sweep (``run.py real_learn``: the policy samples in fp32;
    ``run.py real_learn_bf16``: a bf16 copy samples)."""
    s = res["summary"]
    rows = [[r["seed"], r["before"], r["after"], f"{r['lift']:+.3f}", f"{r['wall_s'] / 60:.1f}"] for r in res["runs"]]
    return "\n".join([md_table(["seed", "before", "after", "lift", "wall min"], rows), "",
                      f"Median lift **{s['median_lift']:+.3f}** (after: {s['median_after']:.3f}), min "
                      f"{s['min_lift']:+.3f}; "
                      f"`{res['config']['config']}` with {fmt_overrides(res['config']['overrides'])}, median "
                      f"{s['median_wall_s'] / 60:.1f} min a run.", "", provenance(res)])


def fmt_overrides(overrides: dict) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in overrides.items())


def real_fields(res: dict) -> dict:
    """``real_learn``'s numbers for prose."""
    s = res["summary"]
    return {"median_lift": f"{s['median_lift']:+.3f}", "after": fmt(s["median_after"]),
            "wall_min": f"{s['median_wall_s'] / 60:.0f}"}


def real_tasks_fields(res: dict) -> dict:
    default = next(r for r in res["runs"] if r["setting"] == "default")
    return {"default_greedy": fmt(default["greedy"]), "default_sampled": fmt(default["sampled"]),
            "default_mixed": fmt(default["mixed_group_frac"])}


def real_speed_fields(res: dict) -> dict:
    s = res["summary"]
    grpo = next(r for r in res["runs"] if (r["algorithm"], r["backend"]) == ("grpo", "scratch"))
    against_trl = ({"grpo_over_trl": fmt(s["grpo_scratch_over_trl"], 2),
                    "grpo_over_limit": fmt(s["grpo_scratch_over_limit"], 2)} if "grpo_scratch_over_trl" in s else {})
    return {"pass_over_limit": fmt(s["training_pass_over_limit"], 2),
            "limit": f"{s['limit_tokens_per_s']['lora']:.0f}",
            "pass_tokens": f"{s['training_pass']['tokens_per_s']:.0f}", "grpo_s": f"{grpo['median_s']:.1f}",
            **against_trl}


def _sdpo_parts(res: dict):
    """(teacher dict, methods run, {method: {seed: run}}, seeds every method finished)."""
    teacher = next(iter(res["summary"]["teacher"].values()))
    methods = [m for m in res["config"]["methods"] if any(r["method"] == m for r in res["runs"])]
    by = {m: {r["seed"]: r for r in res["runs"] if r["method"] == m} for m in methods}
    paired = sorted(set.intersection(*(set(v) for v in by.values()))) if by else []
    return teacher, methods, by, paired


def over(overrides: dict) -> str:
    """A method's config overrides as the report prints them: " (key=value, ...)", or nothing."""
    return f" ({', '.join(f'{k}={v}' for k, v in overrides.items())})" if overrides else ""


def parts_line(res: dict, methods: list[str], paired: list[int]) -> str:
    """Which commit measured which (methods, seeds), in the order the runs were written: "grpo and sdpo seeds
    1, 2 at commit `a`; ..."; a run without a commit is the file's."""
    done: dict[str, dict[str, list[int]]] = {}   # commit -> method -> seeds
    for r in res["runs"]:
        if r["method"] in methods and r["seed"] in paired:
            done.setdefault(r.get("commit", res["commit"]), {}).setdefault(r["method"], []).append(r["seed"])
    out = []
    for c, per in done.items():
        groups: dict[tuple, list[str]] = {}   # the same seeds -> the methods that ran them
        for m, seeds in per.items():
            groups.setdefault(tuple(sorted(seeds)), []).append(m)
        for seeds, ms in groups.items():
            out.append(f"{' and '.join(ms)} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} "
                       f"at commit `{c}`")
    return "; ".join(out)


def real_sdpo(res: dict) -> str:
    teacher, methods, by, paired = _sdpo_parts(res)
    rows = []
    for m in methods:
        finals = [by[m][s]["final_acc"] for s in paired]
        gains = [by[m][s]["final_acc"] - by["grpo"][s]["final_acc"] for s in paired] if "grpo" in by else []
        cover = [statistics.mean(by[m][s]["teacher_coverage"]) for s in paired if by[m][s].get("teacher_coverage")]
        rows.append([m, fmt(statistics.median(by[m][s]["start_acc"] for s in paired)),
                     ", ".join(fmt(f) for f in finals), f"**{fmt(statistics.median(finals))}**",
                     "-" if m == "grpo" or not gains else f"{statistics.median(gains):+.3f}",
                     fmt(statistics.mean(cover)) if cover else "-",
                     f"{statistics.median(by[m][s]['wall_s'] for s in paired) / 60:.0f}"])
    planned = res["config"]["seeds"]
    cut = ("" if res["summary"].get("complete", True) else
           f" The run was cut short: seeds {', '.join(map(str, paired))} of {', '.join(map(str, planned))} finished "
           f"for every method (a seed some methods finished is left out).")
    if len({by[m][s].get("commit", res["commit"]) for m in methods for s in paired}) > 1:
        cut += " Measured in parts (`--resume`): " + parts_line(res, methods, paired) + "."
    return "\n".join([
        f"The untrained teacher on {teacher['n']} held-out questions: plain **{fmt(teacher['plain_acc'])}**, with a "
        f"successful sibling's answer **{fmt(teacher['demo_acc'])}** (head start "
        f"{teacher['demo_acc'] - teacher['plain_acc']:+.3f}), with feedback on its own wrong answer "
        f"{fmt(teacher['feedback_acc'])}.", "",
        md_table(["method", "start", "final, per seed", "final (median)", "minus GRPO (median of seed pairs)",
                  "teacher coverage", "wall min"], rows), "",
        f"Configs: {', '.join(f'`{m}`: `{c[0]}`' + over(c[1]) for m, c in res['config']['methods'].items())}; "
        f"{res['config']['threads']} threads.{cut}", "", provenance(res)])


VARIANTS = {"sdpo_rlhf_book": "book", "sdpo_rlhf_book_t07": "book_t07"}   # method -> its fields' prefix


def pair_median(by: dict, m: str, other: str, paired: list[int]) -> str:
    """The median over seeds of ``m``'s final accuracy minus ``other``'s on the same seed, signed."""
    return f"{statistics.median(by[m][s]['final_acc'] - by[other][s]['final_acc'] for s in paired):+.3f}"


def real_sdpo_fields(res: dict) -> dict:
    """``real_sdpo``'s numbers for prose: the head start, the medians and the gain over GRPO; for each of the RLHF
    book's variants that ran (``VARIANTS``), its median and its gains over GRPO and over SDPO, per seed pair."""
    teacher, methods, by, paired = _sdpo_parts(res)
    med = {m: statistics.median(by[m][s]["final_acc"] for s in paired) for m in methods}
    return {"plain": fmt(teacher["plain_acc"]), "demo": fmt(teacher["demo_acc"]),
            "head_start": f"{teacher['demo_acc'] - teacher['plain_acc']:+.3f}", "grpo": fmt(med["grpo"]),
            "sdpo": fmt(med["sdpo"]), "gain": pair_median(by, "sdpo", "grpo", paired), "seeds": str(len(paired)),
            "start": fmt(statistics.median(by["grpo"][s]["start_acc"] for s in paired)),
            **{f"{short}{key}": value for m, short in VARIANTS.items() if m in med
               for key, value in (("", fmt(med[m])), ("_gain", pair_median(by, m, "grpo", paired)),
                                  ("_vs_sdpo", pair_median(by, m, "sdpo", paired)))}}
