"""Render the number tables of the README, docs/benchmarks.md (every benchmark's) and the concept pages, and the
notebooks' reference figures, from benchmarks/results/.

    python benchmarks/report.py            # rewrite what sits between the report markers
    python benchmarks/report.py --check    # exit 1 if a rendered file is out of date or a results file
                                           # has no sound provenance; list the stale results files
    python benchmarks/report.py --stale    # list the stale results files only (exit 0)

A block in README.md, a docs page or a notebook's markdown cell looks like

    <!-- report:speed -->
    ...generated...
    <!-- /report:speed -->

and is rewritten from ``benchmarks/results/<file>.json`` (written by the bench_*.py scripts),
with the command, date, commit and machine that produced it. Nothing between markers is typed
by hand; ``tests/test_report.py`` fails when the committed text and the results disagree.
A number inside a sentence is a field, ``<!--f:sdpo.teacher_demo_acc-->1.000<!--/f-->``, computed
by ``FIELDS`` from one results file and rewritten the same way (``REPO_FIELDS``: from the repository's
own files instead, such as docs/install.md's version pins, ``report_pins.py``).
A block whose results file does not exist yet says which command makes it.

A stale results file (its behaviour replay moved at the last ``make bench-check``: ``staleness.py``) still
renders; its blocks' provenance line says where the replay moved, its fields are not marked.
``--check`` lists stale files but exits 0 on staleness alone, as ``make test`` passes;
it exits 1 on what ``make test`` fails on: out-of-date text, or a results file from a dirty tree or
with no provenance. ``make bench-stale`` (``bench_stale.py``) re-measures the stale files. In a shallow
clone ``--check`` compares the text without the stale notes, and rendering is refused.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from experiments import EXPERIMENTS
from report_code import (
    code_lab,
    code_lab_discovery,
    code_lab_discovery_fields,
    code_lab_fields,
    code_lab_heldout_fields,
    code_reward,
    sdpo_head_start,
    sdpo_head_start_fields,
)
from report_course import first_run, first_run_fields, lab_heldout_fields
from report_demo import demo_plateau, demo_plateau_fields
from report_docs import DOC_FIELDS
from report_format import discovery_table, fmt, md_table, provenance
from report_gpu import gpu_runs_table, gpu_status_fields
from report_notebooks import notebook_fields, notebook_reference, notebook_wall_fields
from report_pins import install_pip, pins_fields
from report_real import (
    real_decode,
    real_fields,
    real_learn,
    real_sdpo,
    real_sdpo_fields,
    real_speed,
    real_speed_fields,
    real_tasks,
    real_tasks_fields,
)
from report_sdpo_lab import (
    discovery_fields,
    sdpo_lab,
    sdpo_lab_ablations,
    sdpo_lab_ablations_fields,
    sdpo_lab_discovery,
    sdpo_lab_discovery_fields,
    sdpo_lab_fields,
    sdpo_lab_signal,
    sdpo_lab_stability,
    sdpo_lab_summary,
    sdpo_lab_transfer,
    sdpo_lab_transfer_fields,
)
from report_sdpo_room import sdpo_lab_headroom, sdpo_lab_headroom_fields, sdpo_lab_room, sdpo_lab_room_fields
from staleness import STALE_NOTE, describe, scan, shallow

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BLOCK = re.compile(r"(<!-- report:([\w-]+) -->\n)(.*?)(\n?<!-- /report:\2 -->)", re.S)
# a number inside prose: <!--f:sdpo.teacher_demo_acc-->1.000<!--/f--> (FIELDS below computes it)
FIELD = re.compile(r"(<!--f:([\w-]+)\.(\w+)-->)(.*?)(<!--/f-->)", re.S)


def load(name: str) -> dict | None:
    """Results file ``name``, with its stem under ``"stem"`` (``provenance`` names the command that re-makes it)."""
    path = RESULTS / f"{name}.json"
    return {**json.loads(path.read_text()), "stem": name} if path.exists() else None


# ---------------------------------------------------------------------------------------
# one renderer per block name
# ---------------------------------------------------------------------------------------
def speed(res: dict) -> str:
    s, cfg = res["summary"], res["config"]
    rows = []
    for label, med in s["median_s"].items():
        times = [t for r in res["runs"] if r["backend"] == label for t in r["times_s"]]
        rows.append([f"`{label}`" if label != "trl" else "TRL `GRPOTrainer`", med, min(times), max(times)])
    return "\n".join([
        md_table(["backend", "median s/step", "min", "max"], rows), "",
        f"TRL / scratch: **{s['ratio_trl_over_scratch_median']:.2f}x** (median of {cfg['repeats']} repeats; "
        f"per repeat {', '.join(f'{x:.2f}x' for x in s['ratio_trl_over_scratch'])}); with `share_prompt` off "
        f"{s['ratio_trl_over_scratch_no_share_median']:.2f}x. {cfg['steps']} steps per run, first "
        f"{cfg['warmup']} dropped, evaluation off.", "", provenance(res)])


def demo(res: dict) -> str:
    s = res["summary"]
    rows = [[r["seed"], r["before"], r["after"], f"{r['lift']:+.3f}", f"{r['peak']:.3f} (step {r['peak_step']})",
             f"{r['wall_s']:.1f}"] for r in res["runs"]]
    return "\n".join([
        md_table(["seed", "before", "after", "lift", "peak", "wall s"], rows), "",
        f"Median lift **{s['median_lift']:+.3f}** (min {s['min_lift']:+.3f}), median wall "
        f"**{s['median_wall_s']:.1f} s**; the peak is the best of the run's evaluations (accuracy swings "
        f"between them; the run keeps its last weights).", "", provenance(res)])


def demo_variant(res: dict) -> str:
    s = res["summary"]
    lifts = ", ".join(f"{r['lift']:+.3f}" for r in res["runs"])
    return (f"Median lift {s['median_lift']:+.3f}, min {s['min_lift']:+.3f} (seeds {fmt(res['config']['seeds'])}: "
            f"{lifts}); median peak {s['median_peak']:.3f}. {provenance(res)}")


def notebooks(res: dict) -> str:
    rows = [[f"`{r['notebook']}`", f"{r['wall_s']:.1f}"] for r in res["runs"]]
    rows.append(["total", f"**{res['summary']['total_s']:.1f}**"])
    return "\n".join([md_table(["notebook", "wall s"], rows), "", provenance(res)])


def lab(res: dict) -> str:
    rows = [[r["copy_steps"], f"{r['warm_start_s']:.1f}", r["heldout_acc"], r["acc_right_hint"], r["acc_random_hint"]]
            for r in res["runs"]]
    return "\n".join([md_table(["`copy_steps`", "warm start s", "held-out acc", "acc, right hint",
                                "copies a random hint"], rows), "", provenance(res)])


LEG_NAMES = {"test": "`make test`: ruff, unit tests, notebooks (nbmake), TRL-path tests on trl 1.15 (laid over `.venv`)",
             "test-verl": "`make test-verl`: `.venv-verl` (verl 0.9.1) and the cross-checks against it",
             "test-export": "`make test-export`: llama.cpp's converter fetched, GGUF round trips",
             "docs": "`make docs`: the docs site, `mkdocs build --strict`"}


def fresh_clone(res: dict) -> str:
    s, run = res["summary"], res["runs"][0]
    detail = "; ".join(f"{p['tests']} passed in {p['seconds']:.1f} s" for p in run["pytest_phases"])
    if run.get("docs_build_s") is not None:
        detail += f"; docs built in {run['docs_build_s']:.1f} s"
    if "leg_s" in run:
        rows = [[LEG_NAMES.get(leg, f"`make {leg}`"), f"{t:.1f}"] for leg, t in run["leg_s"].items()]
    else:  # older results: .ci/run timed as one
        rows = [[f"`bash .ci/run` ({', '.join(f'`make {leg}`' for leg in run.get('ci_legs', ['test']))})",
                 f"{s['ci_run_s']:.1f}"]]
    return "\n".join([
        md_table(["phase", "wall s"], [["`make install` (fresh `.venv`)", f"{s['install_s']:.1f}"], *rows,
                                       ["total", f"**{s['total_s']:.1f}** ({s['total_s'] / 60:.1f} min)"]]), "",
        f"pytest phases, in order: {detail}.", "", provenance(res)])


def vapor(res: dict) -> str:
    b, sp = res["summary"]["before"], res["summary"]["speed"]
    rows = []
    for variant in res["config"]["variants"]:
        mine = [r for r in res["runs"] if r["variant"] == variant]
        med = {k: statistics.median(r[k] for r in mine) for k in ("acc_after", "margin_after", "pref_acc_after", "wall_s")}
        rows.append([f"`{variant}`", med["acc_after"], ", ".join(f"{r['acc_after']:.3f}" for r in mine),
                     f"{med['margin_after']:.3f}", med["pref_acc_after"], f"{med['wall_s']:.0f}"])
    acc0 = res["runs"][0]["acc_before"]
    return "\n".join([
        md_table(["variant", "held-out acc (median)", "per seed", "held-out margin", "pairs preferred right",
                  "wall s"], rows), "",
        f"Before training: held-out accuracy {acc0:.3f}, margin {b['margin']:.3f}, pairs preferred right "
        f"{b['accuracy']:.3f} ({b['pairs']} held-out pairs). {res['config']['steps']} steps per run, seeds "
        f"{fmt(res['config']['seeds'])}. Per step on TRL: `VAPORTrainer` {sp['VAPORTrainer']['median_s']:.3f} s, "
        f"`GRPOTrainer` {sp['GRPOTrainer']['median_s']:.3f} s: **{res['summary']['vapor_over_grpo_s_per_step']:.2f}x**.",
        "", provenance(res)])


def sdpo(res: dict) -> str:
    sp, tt = res["summary"]["speed"], res["summary"]["test_time"]
    rows = []
    for method in dict.fromkeys(r["method"] for r in res["runs"]):   # in the benchmark's order
        mine = [r for r in res["runs"] if r["method"] == method]
        rows.append([f"`{method}`", statistics.median(r["acc_after"] for r in mine),
                     ", ".join(f"{r['acc_after']:.3f}" for r in mine),
                     ", ".join(str(r["steps_to_grpo_final"]) for r in mine), f"{statistics.median(r['wall_s'] for r in mine):.0f}"])
    acc0 = res["runs"][0]["acc_before"]
    return "\n".join([
        md_table(["method", "held-out acc (median)", "per seed", "steps to GRPO's final acc (per seed)", "wall s"], rows),
        "", f"Before training: held-out accuracy {acc0:.3f}; {res['config']['steps']} steps per run, seeds "
        f"{fmt(res['config']['seeds'])}; `None`: never reached GRPO's final accuracy.", "",
        md_table(["per step (TRL backend)", "median s"], [["our `SDPOTrainer(GRPOTrainer)`", sp["ours_SDPOTrainer"]["median_s"]],
                                                         ["TRL's `trl.experimental.sdpo.SDPOTrainer`", sp["trl_SDPOTrainer"]["median_s"]],
                                                         ["`GRPOTrainer`", sp["GRPOTrainer"]["median_s"]]]), "",
        f"Test time, on the {tt['greedy_failed']} of {tt['rows']} held-out problems the warm start gets wrong greedily: "
        f"multi-turn reprompting (no training: {tt['n']} sample a round, up to {tt['rounds']} rounds, the checker's feedback "
        f"in the reprompt) solves {tt['multi_turn_solved']:.3f} of them with {tt['multi_turn_mean_samples']:.2f} samples on "
        f"average (by round: {fmt(tt['multi_turn_solved_after_round'])}); best-of-{tt['best_of_n_samples']} solves "
        f"{tt['best_of_n_solved']:.3f}.", "", discovery_table(res["summary"].get("discovery")), "", provenance(res)])


def ppo(res: dict) -> str:
    sm = res["summary"]
    rows = []
    for method in dict.fromkeys(r["method"] for r in res["runs"]):
        mine = [r for r in res["runs"] if r["method"] == method]
        rows.append([f"`{method}`", statistics.median(r["acc_after"] for r in mine),
                     ", ".join(f"{r['acc_after']:.3f}" for r in mine),
                     f"{statistics.median(r['gap_closed'] for r in mine):.2f}",
                     f"{statistics.median(r['wall_s'] for r in mine):.0f}",
                     f"{statistics.median(r['s_per_step'] for r in mine):.3f}"])
    agree, curve = sm["reward_model"], [c for c in sm["rm_curve"] if c["acc"] is not None]
    score_at = {c["step"]: c["score_raw"] for c in sm["rm_curve"] if c["score_raw"] is not None}
    first = next((c for c in curve if c["step"] in score_at), None)
    last = curve[-1]
    rm_line = (f"With the learned reward model instead of the checker (PPO alone, seed 0, {res['config']['rm_steps']} "
               f"steps): its raw score goes {first['score_raw']:+.2f} (step {first['step']}) -> "
               f"{score_at.get(last['step'], float('nan')):+.2f} (step {last['step']}) while held-out accuracy goes "
               f"{curve[0]['acc']:.3f} -> {last['acc']:.3f}." if first else "")
    return "\n".join([
        md_table(["method", "held-out acc (median)", "per seed", "gap closed (median)", "wall s", "s/step"], rows), "",
        f"Student (the default warm start) {sm['student_acc']:.3f}, teacher (`teacher_lab: sft_steps 600`) "
        f"{sm['teacher_acc']:.3f}; *gap closed* = (after - student) / (teacher - student). {res['config']['steps']} "
        f"steps per run, seeds {fmt(res['config']['seeds'])}. Built from nothing: the teacher in "
        f"{sm['teacher_build_s']:.0f} s, the reward model in {sm['reward_model_build_s']:.0f} s; the reward model agrees "
        f"with exact match on {agree['agreement']:.3f} of the student's samples (true positives "
        f"{agree['true_positive']:.3f}, false positives {agree['false_positive']:.3f}).", "", rm_line, "",
        provenance(res)])


def export_table(res: dict) -> str:
    rows = [[r["run"], f"`{r['format']}`", f"{r['max_logit_diff']:.1e}", f"{r['greedy_agree']:.3f}",
             {True: "yes", False: "no", None: "-"}[r["vocab_equal"]], r["bytes"] // 1024, f"{r['export_s']:.1f}"]
            for r in res["runs"]]
    return "\n".join([
        md_table(["run", "format", "max logit diff", "same greedy answer", "GGUF vocabulary equal", "KB", "export s"],
                 rows), "",
        f"One `configs/demo.yaml` run of {res['config']['steps']} steps per row group (`full`: the whole model trained, "
        f"`lora`: a rank-4 adapter); each export loaded back (transformers; its GGUF loader for GGUF) and compared with "
        f"the run's model in fp32 on {res['config']['prompts']} held-out prompts.", "", provenance(res)])


# block name -> (results file, renderer)
BLOCKS = {
    "speed": ("speed", speed),
    "demo": ("demo", demo),
    "first_run": ("first_run", first_run),
    "own_task": ("own_task", first_run),
    "demo-constant-lr": ("demo_constant_lr", demo_variant),
    "demo-copy-warm-start": ("demo_copy_warm_start", demo_variant),
    "demo-top-k50": ("demo_top_k50", demo_variant),
    "notebooks-smoke": ("notebooks_smoke", notebooks),
    "notebooks-full": ("notebooks_full", notebooks),
    "notebooks-smoke-cold": ("notebooks_smoke_cold", notebooks),
    "lab": ("lab", lab),
    "vapor": ("vapor", vapor),
    "sdpo": ("sdpo", sdpo),
    "sdpo-lab": ("sdpo_lab", sdpo_lab),
    "sdpo-lab-summary": ("sdpo_lab", sdpo_lab_summary),
    "sdpo-lab-signal": ("sdpo_lab_signal", sdpo_lab_signal),
    "sdpo-lab-signal-1000": ("sdpo_lab_signal_1000", sdpo_lab_signal),
    "sdpo-lab-discovery": ("sdpo_lab_discovery", sdpo_lab_discovery),
    "sdpo-lab-ablations": ("sdpo_lab_ablations", sdpo_lab_ablations),
    "sdpo-lab-stability": ("sdpo_lab_stability", sdpo_lab_stability),
    "sdpo-lab-headroom": ("sdpo_lab_headroom", sdpo_lab_headroom),
    "sdpo-lab-room": ("sdpo_lab_room", sdpo_lab_room),
    "sdpo-lab-transfer": ("sdpo_lab_transfer", sdpo_lab_transfer),
    "ppo": ("ppo", ppo),
    "export": ("export", export_table),
    "code-reward": ("code_reward", code_reward),
    "code-lab": ("code_lab", code_lab),
    "code-lab-starving": ("code_lab_starving", code_lab),
    "code-lab-discovery": ("code_lab_discovery", code_lab_discovery),
    "sdpo-head-start": ("sdpo_head_start", sdpo_head_start),
    "fresh-clone": ("fresh_clone", fresh_clone),
    "demo-plateau": ("demo_plateau", demo_plateau),
    "real-tasks": ("real_tasks", real_tasks),
    "real-speed": ("real_speed", real_speed),
    "real-decode": ("real_decode", real_decode),
    "real-learn": ("real_learn", real_learn),
    "real-sdpo": ("real_sdpo", real_sdpo),
    "notebooks-smoke-real": ("notebooks_smoke_real", notebooks),
    **{f"nb{n:02d}": ("notebooks_full", notebook_reference(f"{n:02d}")) for n in range(100)},
}
MAKERS = {stem: e.command for stem, e in EXPERIMENTS.items()}   # results file -> the command that makes it


# ---------------------------------------------------------------------------------------
# fields: numbers inside prose, each computed from one results file
# ---------------------------------------------------------------------------------------
def _seeds_where(res: dict, method: str, better) -> str:
    """"k of n": the seeds on which ``better(run of method, runs of that seed by method)`` holds."""
    mine = [r for r in res["runs"] if r["method"] == method]
    by_seed = {}
    for r in res["runs"]:
        by_seed.setdefault(r["seed"], {})[r["method"]] = r
    k = sum(bool(better(r, by_seed[r["seed"]])) for r in mine)
    return f"{k} of {len(mine)}"


def sdpo_fields(res: dict) -> dict:
    sp, t, tt = res["summary"]["speed"], res["summary"].get("teacher", {}), res["summary"]["test_time"]
    return {
        "tt_solved": fmt(tt["multi_turn_solved"]), "best_of_n_solved": fmt(tt["best_of_n_solved"]),
        "tt_fewer_or_more": "fewer" if tt["multi_turn_solved"] < tt["best_of_n_solved"] else "at least as many",
        "ours_over_trl": f"{sp['ours_SDPOTrainer']['median_s'] / sp['trl_SDPOTrainer']['median_s']:.2f}",
        "ours_s": f"{sp['ours_SDPOTrainer']['median_s']:.3f}", "trl_s": f"{sp['trl_SDPOTrainer']['median_s']:.3f}",
        "teacher_demo_acc": fmt(t.get("demo_acc")), "teacher_plain_acc": fmt(t.get("plain_acc")),
        "teacher_feedback_acc": fmt(t.get("feedback_acc")), "teacher_n_wrong": fmt(t.get("n_wrong")),
        "teacher_token_win_feedback": fmt(t.get("token_win_feedback")),
        "sdpo_below_start": _seeds_where(res, "sdpo", lambda r, s: r["acc_after"] < r["acc_before"]),
        "sdpo_below_grpo": _seeds_where(res, "sdpo", lambda r, s: r["acc_after"] < s["grpo"]["acc_after"]),
        "lr_1e4_above_sdpo": _seeds_where(res, "sdpo_lr_1e-4", lambda r, s: r["acc_after"] > s["sdpo"]["acc_after"]),
        "lr_1e4_below_grpo": _seeds_where(res, "sdpo_lr_1e-4", lambda r, s: r["acc_after"] < s["grpo"]["acc_after"]),
        "base_above_sdpo": _seeds_where(res, "sdpo_base_teacher", lambda r, s: r["acc_after"] > s["sdpo"]["acc_after"]),
        "base_below_grpo": _seeds_where(res, "sdpo_base_teacher",
                                        lambda r, s: r["acc_after"] < s["grpo"]["acc_after"]),
        "feedback_below_start": _seeds_where(res, "sdpo_feedback", lambda r, s: r["acc_after"] < r["acc_before"]),
        # the discovery curves of part 5 (``disc_best_of_k``, ``disc_multi_turn_ci``, ``disc_rows``, ...)
        **{f"disc_{k}": v for k, v in discovery_fields(res["summary"]["discovery"]).items()},
    }


def export_fields(res: dict) -> dict:
    """The fewest greedy answers (of the prompts checked) each precision keeps, over the full and LoRA runs."""
    def kept(*formats):
        return f"{min(r['greedy_agree'] for r in res['runs'] if r['format'] in formats):.3f}"
    return {"f16_min_agree": kept("merged fp16", "gguf f16"), "bf16_q8_min_agree": kept("merged bf16", "gguf q8_0"),
            "prompts": str(res["config"]["prompts"])}


def ppo_fields(res: dict) -> dict:
    def gap(method):
        return statistics.median(r["gap_closed"] for r in res["runs"] if r["method"] == method)
    ppo_up = sum(r["acc_after"] > res["summary"]["student_acc"] for r in res["runs"] if r["method"] == "ppo")
    n_ppo = sum(r["method"] == "ppo" for r in res["runs"])
    return {"kd_gap": f"{gap('kd'):.2f}", "teacher_ppo_gap": f"{gap('teacher_ppo'):.2f}", "ppo_gap": f"{gap('ppo'):.2f}",
            "ppo_seeds_up": f"{ppo_up} of {n_ppo}"}


# field file name -> (results file, function of the results -> {field: text})
FIELDS = {"sdpo": ("sdpo", sdpo_fields), "sdpo_lab": ("sdpo_lab", sdpo_lab_fields),
          "sdpo_lab_ablations": ("sdpo_lab_ablations", sdpo_lab_ablations_fields),
          "sdpo_lab_headroom": ("sdpo_lab_headroom", sdpo_lab_headroom_fields),
          "sdpo_lab_room": ("sdpo_lab_room", sdpo_lab_room_fields),
          "sdpo_lab_transfer": ("sdpo_lab_transfer", sdpo_lab_transfer_fields),
          "sdpo_lab_discovery": ("sdpo_lab_discovery", sdpo_lab_discovery_fields), "ppo": ("ppo", ppo_fields),
          "export": ("export", export_fields), "real_learn": ("real_learn", real_fields),
          "real_tasks": ("real_tasks", real_tasks_fields), "real_speed": ("real_speed", real_speed_fields),
          "real_sdpo": ("real_sdpo", real_sdpo_fields),
          "demo_plateau": ("demo_plateau", demo_plateau_fields), "first_run": ("first_run", first_run_fields),
          "own_task": ("own_task", first_run_fields),
          "sdpo_head_start": ("sdpo_head_start", sdpo_head_start_fields), "code_lab": ("code_lab", code_lab_fields),
          "code_lab_starving": ("code_lab_starving", code_lab_fields),
          "code_lab_discovery": ("code_lab_discovery", code_lab_discovery_fields),
          "code_lab_heldout": ("code_lab_heldout", code_lab_heldout_fields),
          "nb_smoke_s": ("notebooks_smoke", notebook_wall_fields), "nb_full_s": ("notebooks_full", notebook_wall_fields),
          **DOC_FIELDS,   # the prose of notebooks 04, 07, 08 and the concept pages (report_docs.py)
          **{f"nb{n:02d}": ("notebooks_full", notebook_fields(f"{n:02d}")) for n in range(100)}}


# fields and blocks from the repository's own files, not from a results file
REPO_FIELDS = {"pins": pins_fields, "gpu": gpu_status_fields, "lab": lab_heldout_fields}
REPO_BLOCKS = {"install-pip": install_pip, "gpu-runs": gpu_runs_table}


def render_field(name: str, key: str) -> str:
    if name in REPO_FIELDS:
        values = REPO_FIELDS[name]()
        if key not in values:
            raise KeyError(f"report field {name}.{key} is not computed; {name} has {sorted(values)}")
        return values[key]
    if name not in FIELDS:
        raise KeyError(f"unknown report field file {name!r}; known: {sorted(k for k in FIELDS if not k.startswith('nb'))}")
    file, fields = FIELDS[name]

    def pick(res: dict) -> str:
        values = fields(res)
        if key not in values:
            raise KeyError(f"report field {name}.{key} is not computed; {name} has {sorted(values)}")
        return values[key]
    return from_results(file, pick)


def from_results(file: str, render) -> str:
    """``render(results)`` of ``benchmarks/results/<file>.json``, or the command that makes it."""
    res = load(file)
    if res is None:
        return f"(not measured yet: `python benchmarks/{MAKERS.get(file, file)}`)"
    return render(res)


def render_block(name: str) -> str:
    if name in REPO_BLOCKS:
        return REPO_BLOCKS[name]()
    if name not in BLOCKS:
        raise KeyError(f"unknown report block {name!r}; known: {sorted(k for k in BLOCKS if not k.startswith('nb'))}")
    file, renderer = BLOCKS[name]
    return from_results(file, renderer)


def render_text(text: str) -> str:
    text = BLOCK.sub(lambda m: m.group(1) + render_block(m.group(2)) + "\n" + m.group(4).lstrip("\n"), text)
    return FIELD.sub(lambda m: m.group(1) + render_field(m.group(2), m.group(3)) + m.group(5), text)


def targets() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "concepts").glob("*.md")),
            *sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


def render_file(path: Path) -> tuple[str, str]:
    """(current text, rendered text) of README.md or a notebook."""
    old = path.read_text()
    if path.suffix != ".ipynb":
        return old, render_text(old)
    nb, changed = json.loads(old), False
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and ("<!-- report:" in text or "<!--f:" in text) \
                and render_text(text) != text:
            cell["source"] = render_text(text).splitlines(keepends=True)
            changed = True
    return old, (json.dumps(nb, indent=1, ensure_ascii=False) + "\n" if changed else old)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="list what is out of date or stale; change nothing; exit 1 "
                    "on out-of-date text or a results file without sound provenance, not on staleness alone")
    ap.add_argument("--stale", action="store_true", help="list the stale results files only; change nothing")
    args = ap.parse_args(argv)
    findings = scan(RESULTS)
    stale = [f for f in findings if f.stale and not f.problems]
    if args.stale:
        print("\n".join(describe(f) for f in stale) if stale else "no stale results")
        return 0
    if shallow() and not args.check:
        print("a shallow clone lacks the history the stale notes come from: git fetch --unshallow, then render")
        return 1
    outdated = []
    for path in targets():
        old, new = render_file(path)
        if shallow():   # the text is checked without the notes it cannot compute
            old, new = STALE_NOTE.sub("", old), STALE_NOTE.sub("", new)
        if old != new:
            outdated.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    verb = "out of date" if args.check else "updated"
    print(f"{verb}: {', '.join(map(str, outdated))}" if outdated else "up to date")
    if stale:
        print(f"stale (still rendered, marked; re-measure with make bench-stale): {len(stale)}")
        print("\n".join("  " + describe(f) for f in stale))
    untrusted = [f for f in findings if f.problems]
    if untrusted:
        print("no sound provenance (make test fails; rerun these from a clean commit):")
        print("\n".join("  " + describe(f) for f in untrusted))
    return 1 if args.check and (outdated or untrusted) else 0


if __name__ == "__main__":
    sys.exit(main())
