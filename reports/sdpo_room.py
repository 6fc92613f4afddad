"""Does GRPO have room in the skill lab, and does SDPO reach it sooner there? And does test-time SDPO carry its
teacher's success into plain sampling?

    sdpo_lab_headroom(results) -> str   ``sdpo-lab-headroom`` (bench_sdpo_lab_headroom.py): GRPO from warm
                                        starts with more room, every warm start and learning rate
    sdpo_lab_room(results) -> str       ``sdpo-lab-room`` (bench_sdpo_lab.py --sft-steps): a smaller plain budget with
                                        the context steps set apart, its teachers, then bench_sdpo_lab's protocol
    sdpo_lab_transfer(results) -> str   ``sdpo-lab-transfer`` (bench_sdpo_lab_transfer.py): how fast test-time
                                        SDPO moves the teacher's success into plain sampling (why it trails
                                        multi-turn)
    *_fields(results) -> dict           numbers inside prose
"""

from __future__ import annotations

import statistics

from reports.format import fmt, lr_tag, md_table, provenance
from reports.sdpo_lab import median_curve, reach, sdpo_lab, sdpo_lab_fields, steps_vs_grpo


def headroom_rows(res: dict) -> list[dict]:
    """Per warm start (plain SFT steps, width) and learning rate: the median curve over the seeds
    ({step: acc}), the median start, final and final minus start, and the seeds' finals."""
    out = []
    for key in dict.fromkeys((r["sft_steps"], r["width"], r["lr"]) for r in res["runs"]):
        runs = sorted((r for r in res["runs"] if (r["sft_steps"], r["width"], r["lr"]) == key), key=lambda r: r["seed"])
        out.append({"sft_steps": key[0], "width": key[1], "lr": key[2], "curve": median_curve(runs),
                    "start": statistics.median(r["start_acc"] for r in runs),
                    "final": statistics.median(r["final_acc"] for r in runs),
                    "gain": statistics.median(r["final_acc"] - r["start_acc"] for r in runs),
                    "finals": [r["final_acc"] for r in runs],
                    "avg_start": res["config"]["start"][f"{key[0]}/{key[1]}"]["avg_at_k"],
                    "avg_final": statistics.median(r["final_avg_at_k"] for r in runs)})
    return out


def sdpo_lab_headroom(res: dict) -> str:
    """The block ``<!-- report:sdpo-lab-headroom -->``: GRPO's median held-out curve from each warm start
    at each learning rate (every cell of the grid, nothing picked)."""
    c = res["config"]
    rows = headroom_rows(res)
    marks = sorted({step for r in rows for step in r["curve"] if step % 100 == 0})
    table = [[r["sft_steps"], r["width"], f"{r['lr']:g}", *[r["curve"].get(k) for k in marks], f"{r['gain']:+.3f}",
              fmt(r["finals"]), r["avg_start"], r["avg_final"]] for r in rows]
    k = c["avg_k"]
    starts = [[*key.split("/"), w["context_steps"], w["greedy"], w["avg_at_k"], w["teacher"]["demo_acc"],
               w["teacher"]["token_win_demo"]] for key, w in c["start"].items() if "teacher" in w]
    warm = [] if not starts else [
        "The warm starts (held-out; the teacher as in the dial table):", "",
        md_table(["plain SFT steps", "width", "context steps", "greedy acc", f"avg@{c['avg_k']}",
                  "teacher acc, sibling's answer", "token win, sibling"], starts), ""]
    head = (f"GRPO ({c['steps']} steps, the skill lab's recipe) from warm starts with fewer plain SFT steps "
            f"(context steps: half of them), seeds {', '.join(map(str, c['seeds']))}; median held-out greedy "
            f"accuracy by step, and avg@{c['avg_k']} (the mean success rate of {c['avg_k']} samples at the training "
            f"temperature) at the start and the end:")
    return "\n".join([*warm, head, "", md_table(["plain SFT steps", "width", "lr", *[f"step {k}" for k in marks],
                                          "final - start (median)", "final per seed", f"avg@{k} start",
                                          f"avg@{k} final (median)"], table), "", provenance(res)])


def sdpo_lab_headroom_fields(res: dict) -> dict:
    """Fields ``<!--f:sdpo_lab_headroom.KEY-->``: the largest median gain in greedy accuracy and in avg@k and
    where, how many cells gain, each warm start's median start (``start_<sft steps>``, ``avg_start_<sft steps>``)
    and per cell (``<sft steps>_<lr_tag(lr)>``) ``final_``, ``gain_`` and ``avg_gain_``."""
    rows = headroom_rows(res)
    best = max(rows, key=lambda r: r["gain"])
    best_avg = max(rows, key=lambda r: r["avg_final"] - r["avg_start"])
    out = {"best_gain": f"{best['gain']:+.3f}", "best_at": f"{best['sft_steps']} plain steps, lr {best['lr']:g}",
           "climbing_cells": f"{sum(r['gain'] > 0 for r in rows)} of {len(rows)}",
           "best_avg_gain": f"{best_avg['avg_final'] - best_avg['avg_start']:+.3f}",
           "best_avg_at": f"{best_avg['sft_steps']} plain steps, lr {best_avg['lr']:g}"}
    for r in rows:
        cell = f"{r['sft_steps']}_{lr_tag(r['lr'])}"
        out[f"start_{r['sft_steps']}"] = fmt(r["start"])
        out[f"avg_start_{r['sft_steps']}"] = fmt(r["avg_start"])
        teacher = res["config"]["start"][f"{r['sft_steps']}/{r['width']}"].get("teacher")
        if teacher:
            out[f"teacher_demo_{r['sft_steps']}"] = fmt(teacher["demo_acc"])
        out[f"final_{cell}"] = fmt(r["final"])
        out[f"gain_{cell}"] = f"{r['gain']:+.3f}"
        out[f"avg_gain_{cell}"] = f"{r['avg_final'] - r['avg_start']:+.3f}"
    return out


# --- a smaller plain budget, the context steps set apart (bench_sdpo_lab.py --sft-steps, --runs-at top) ---

def sdpo_lab_room(res: dict) -> str:
    """The block ``<!-- report:sdpo-lab-room -->``: a line saying which warm starts these are, each method's
    median held-out curve, then ``sdpo_lab``'s tables (the teacher per dial, the tuned runs at the highest
    dial and the steps to GRPO's final accuracy)."""
    c = res["config"]
    top = str(c["dials"][-1])
    curves = {m: median_curve([r for r in res["runs"] if r["method"] == m]) for m in c["methods"]}
    steps = sorted({k for v in curves.values() for k in v})
    head = (f"Warm starts with {c['sft_steps']} plain SFT steps (the lab's: 2000) and the context steps (the dial) "
            f"set apart from them, up to the whole budget; training runs at {c['sft_steps']} + {top}, each method "
            f"at its tuned learning rate. Median held-out greedy accuracy over seeds {fmt(c['seeds'])} by step:")
    curve_table = md_table(["method", *[f"step {k}" for k in steps]],
                           [[f"`{m}`", *[v.get(k) for k in steps]] for m, v in curves.items()])
    return "\n\n".join([head, curve_table, sdpo_lab(res)])


def sdpo_lab_room_fields(res: dict) -> dict:
    """``sdpo_lab_fields`` at this warm start (``<!--f:sdpo_lab_room.KEY-->``), plus each dial's teacher
    (``plain_<dial>``, ``demo_<dial>``) and per method the sentence on its steps to GRPO's final accuracy
    (``reach_<method>``)."""
    out = sdpo_lab_fields(res)
    for d, q in res["summary"]["teacher"].items():
        out[f"plain_{d}"], out[f"demo_{d}"] = fmt(q["plain_acc"]), fmt(q["demo_acc"])
    r = reach(res, str(res["config"]["dials"][-1]))
    for m in res["config"]["methods"]:
        if m != "grpo":
            out[f"reach_{m}"] = steps_vs_grpo(r, res["config"]["steps"], m) or "n/a"
    return out


def sdpo_lab_transfer(res: dict) -> str:
    """The block ``<!-- report:sdpo-lab-transfer -->``: on the hard rows, the warm start's plain rate, the rate
    of samples from its feedback reprompts, and the test-time copy's plain rate after n steps per learning rate
    (means over the rows, and the rows with at least one success among their samples)."""
    c, s = res["config"], res["summary"]
    marks = [0, *c["checkpoints"]]
    n = s["rows"]
    rows = [[f"`plain`, then test-time SDPO at lr {lr}", *[f"{fmt(curve[str(k)])} ({s['after_found'][lr][str(k)]})"
                                                        for k in marks]] for lr, curve in s["after"].items()]
    head = (f"On the {n} hard held-out problems at dial {c['dial']} ({s['hard_of_heldout'][0]} of "
            f"{s['hard_of_heldout'][1]} are hard: under 10% of 32 plain samples right), the share of {c['samples']} "
            f"samples a problem that are right, mean over the problems (in brackets: problems with at least one "
            f"right sample). From the plain prompt: {fmt(s['plain_rate'])} ({s['plain_found']} of {n}). From "
            f"reprompts with the feedback on a failed plain attempt (the teacher's prompt; multi-turn reprompting's "
            f"second round): {fmt(s['reprompt_rate'])} ({s['reprompt_found']} of {n}). From the plain prompt after n "
            f"test-time SDPO steps (batches of {c['batch_size']}, the frozen teacher, not stopped at a success):")
    by_round = s["chain_by_round"]
    spans = [(a, min(b, len(by_round))) for a, b in ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32))
             if a <= len(by_round)]
    chain = md_table(["", *[f"round {a}" if a == b else f"rounds {a}-{b}" for a, b in spans]],
                     [["multi-turn reprompting", *[statistics.mean(by_round[a - 1:b]) for a, b in spans]]])
    tail = (f"Multi-turn reprompting's own chains ({c['chains']} a problem, {len(by_round)} rounds of "
            f"{c['batch_size']}, not stopped at a success): the share of a round's attempts that are right, mean over "
            "the problems and the rounds in each span:")
    return "\n".join([head, "", md_table(["", *[f"n={k}" for k in marks]], rows), "", tail, "", chain, "",
                      provenance(res)])


def sdpo_lab_transfer_fields(res: dict) -> dict:
    """``<!--f:sdpo_lab_transfer.KEY-->``: ``plain_rate``, ``reprompt_rate``, ``plain_found``, ``reprompt_found``,
    ``after_<lr_tag>_<n>`` (mean rate), ``found_<lr_tag>_<n>`` (problems with a success), and multi-turn's
    ``chain_round_1`` / ``chain_later`` / ``chain_last`` (the mean share right in its first round, in all later
    ones, in its last); ``top_plain`` / ``top_after``: the problem test-time SDPO lifts most (at the first learning
    rate, after the last checkpoint), before and after, ``after_without_top`` and ``chain_later_without_top``: the
    means without it; ``chain_found``: problems with a right attempt in some chain."""
    s = res["summary"]
    out = {"plain_rate": fmt(s["plain_rate"]), "reprompt_rate": fmt(s["reprompt_rate"]), "rows": str(s["rows"]),
           "plain_found": str(s["plain_found"]), "reprompt_found": str(s["reprompt_found"])}
    for lr, curve in s["after"].items():
        out.update({f"after_{lr_tag(float(lr))}_{n}": fmt(v) for n, v in curve.items()})
        out.update({f"found_{lr_tag(float(lr))}_{n}": str(v) for n, v in s["after_found"][lr].items()})
    r = s["chain_by_round"]
    out["chain_round_1"], out["chain_later"] = fmt(r[0]), fmt(statistics.mean(r[1:]) if len(r) > 1 else None)
    out["chain_last"] = fmt(r[-1])
    lr0, last = next(iter(s["after"])), str(res["config"]["checkpoints"][-1])
    runs = res["runs"]
    if runs:   # the problem test-time SDPO (first learning rate) lifts most, and the mean without it
        top = max(runs, key=lambda x: x["after"][lr0][last])
        rest = [x["after"][lr0][last] for x in runs if x is not top]
        later = [statistics.mean(x["chain_by_round"][1:]) for x in runs
                 if x is not top and len(x["chain_by_round"]) > 1]
        out.update(top_plain=fmt(top["plain_rate"]), top_after=fmt(top["after"][lr0][last]),
                   after_without_top=fmt(statistics.mean(rest) if rest else None),
                   chain_later_without_top=fmt(statistics.mean(later) if later else None),
                   chain_found=str(sum(any(v > 0 for v in x["chain_by_round"]) for x in runs)))
    return out
