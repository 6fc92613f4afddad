"""When SDPO helps, predicted before training: the teacher's head start against SDPO's gain over GRPO.

    python benchmarks/bench_sdpo_head_start.py [--out FILE]

Every point is one setting of one lab and one teacher context, read from the results files that
measured it (each from its own clean commit, named in ``sources``):

    head_start   the warm start's teacher accuracy with that context minus its plain accuracy, on the
                 held-out split, before any training (``sdpo.quality``)
    token_win    the share of the student's wrong completions' tokens where the teacher puts more mass
                 on the right token than the student does
    gain         median final held-out accuracy of the SDPO method minus GRPO's (each at its tuned
                 learning rate, reported seeds); ``gain_per_seed`` pairs the two by seed

The contexts: ``sdpo`` reads a successful sibling's answer (``demo_acc``, ``token_win_demo``); a
row without one has no teacher. ``sdpo_feedback`` reads the sibling's answer where there is one (with
the feedback beside it, TRL's placement) and the environment's feedback on its own failed attempt
where there is none, so its head start mixes the two: s (demo_acc - plain) + (1 - s) (feedback_acc -
plain), s = 1 - (1 - plain)^(G - 1) the chance that a row has a successful sibling among the G - 1
others of its group (plain accuracy standing in for the sampled success rate); its token win mixes
``token_win_demo`` and ``token_win_feedback`` by the same s. Each point keeps the raw measures.

The fit is the least-squares line gain = a + b * head_start over every point, with the head start where it crosses
zero; the same line over the points with a positive head start only (``fit.positive``: a line through a collapse
cluster and a cluster of ties says little about either), and the median gain on each side of zero.

Writes ``benchmarks/results/sdpo_head_start.json``: ``{"points": [{"lab", "setting", "method",
"head_start", "token_win", "gain", "gain_per_seed", "plain_acc", "grpo_final", "sdpo_final"}],
"fit": {...}, "sources": {file: commit}}`` (in the results file's ``runs`` / ``summary`` and at its
top level) and prints a table. A source not measured yet is skipped and named.
"""

from __future__ import annotations

import argparse
import json

from _common import RESULTS, ROOT, median, out_help, parse_args, write_results

# (results file, lab, how a setting is named); each file holds teacher per dial and runs per dial and method.
# A lab's file counts only when its learning rates were tuned (its config has an lr_grid): the real model's
# runs take their configs' rates, since a 15-minute run leaves no budget to tune on other seeds
# (results file, lab, how a setting is named, the config whose num_generations its runs used)
SOURCES = [("sdpo_lab", "skill lab", "four-digit sums, context dial {dial}", "configs/sdpo_lab.yaml"),
           ("sdpo_lab_room", "skill lab", "four-digit sums, 1500 plain steps, context dial {dial}",
            "configs/sdpo_lab.yaml"),
           ("code_lab", "code lab", "affine functions, context dial {dial}", "configs/sdpo_code_lab.yaml"),
           ("code_lab_starving", "code lab", "affine functions, stopped early and groups of 4, context dial {dial}",
            "configs/sdpo_code_lab.yaml"),
           ("real_sdpo", "real model", "SmolLM2-135M-Instruct, {dial}", "configs/real_sdpo.yaml")]
UNTUNED_OK = {"real_sdpo"}
METHODS = ("sdpo", "sdpo_feedback")


def group_size(res: dict, config: str) -> int:
    """The runs' group size G: a variant's trainer field (the code lab's), else the config's."""
    from sdpo_kit.core.config import read_config_file

    variant = (res["config"].get("variant_fields") or {}).get("trainer", {})
    return int(variant.get("num_generations") or read_config_file(ROOT / config)["trainer"]["num_generations"])


def head_start(q: dict, method: str, G: int) -> tuple[float, float | None, float]:
    """(head start, token win, s) of ``method``'s teacher from the warm start's measures ``q`` (module
    docstring); s = 1 for ``sdpo``, whose rows without a successful sibling have no teacher."""
    demo, win_demo = q["demo_acc"] - q["plain_acc"], number(q.get("token_win_demo"))
    if method == "sdpo":
        return demo, win_demo, 1.0
    s = 1 - (1 - q["plain_acc"]) ** (G - 1)
    win_fb = number(q.get("token_win_feedback"))
    fb = q["feedback_acc"] - q["plain_acc"] if q["feedback_acc"] == q["feedback_acc"] else 0.0   # NaN: none wrong
    win = None if win_demo is None or win_fb is None else s * win_demo + (1 - s) * win_fb
    return s * demo + (1 - s) * fb, win, s


def number(x) -> float | None:
    """``x`` rounded, None for a measure that was not taken (NaN: the real model's token wins, which
    compare characters, and its completions are sentences)."""
    return None if x is None or x != x else round(x, 4)


def points_of(res: dict, lab: str, setting: str, G: int) -> list[dict]:
    """The points of one results file: per dial with runs, per SDPO method that ran beside GRPO."""
    out = []
    for dial, q in res["summary"]["teacher"].items():
        mine = [r for r in res["runs"] if str(r["dial"]) == dial]
        grpo = {r["seed"]: r["final_acc"] for r in mine if r["method"] == "grpo"}
        for method in METHODS:
            sdpo = {r["seed"]: r["final_acc"] for r in mine if r["method"] == method}
            if not grpo or not sdpo:
                continue
            paired = sorted(set(grpo) & set(sdpo))
            start, win, share = head_start(q, method, G)
            out.append({"lab": lab, "setting": setting.format(dial=dial), "method": method,
                        "head_start": round(start, 4), "token_win": number(win), "sibling_share": round(share, 4),
                        "group_size": G, **{k: number(q.get(k)) for k in ("demo_acc", "feedback_acc")},
                        "gain": round(median(sdpo.values()) - median(grpo.values()), 4),
                        "gain_per_seed": [round(sdpo[s] - grpo[s], 4) for s in paired], "seeds": paired,
                        "plain_acc": q["plain_acc"], "grpo_final": median(grpo.values()),
                        "sdpo_final": median(sdpo.values())})
    return out


def fit(points: list[dict]) -> dict:
    """Least squares gain = a + b * head_start, Pearson's r, and the head start where the line crosses 0."""
    import numpy as np

    if len(points) < 3:
        return {}
    x = np.array([p["head_start"] for p in points])
    y = np.array([p["gain"] for p in points])
    b, a = np.polyfit(x, y, 1)
    r = float(np.corrcoef(x, y)[0, 1])
    won = [p for p in points if p["token_win"] is not None]
    r_win = (float(np.corrcoef([p["token_win"] for p in won], [p["gain"] for p in won])[0, 1])
             if len(won) >= 3 else None)
    return {"intercept": round(float(a), 4), "slope": round(float(b), 4), "r": round(r, 3),
            "zero_crossing": round(float(-a / b), 4) if b else None, "n": len(points),
            "r_token_win": None if r_win is None else round(r_win, 3), "n_token_win": len(won)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help=out_help("sdpo_head_start"))
    args = parse_args(ap)
    points, sources, missing = [], {}, []
    for name, lab, setting, config in SOURCES:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            missing.append(name)
            continue
        res = json.loads(path.read_text())
        if name not in UNTUNED_OK and "lr_grid" not in res["config"]:
            missing.append(f"{name} (its learning rates were not tuned)")
            continue
        mine = points_of(res, lab, setting, group_size(res, config))
        if mine:
            sources[name] = res["commit"]
            points += mine
    line = fit(points)
    line["positive"] = fit([p for p in points if p["head_start"] > 0])   # the points where the teacher knows more
    line["by_sign"] = {side: {"n": len(mine), "median_gain": median([p["gain"] for p in mine]) if mine else None}
                       for side, mine in (("head_start <= 0", [p for p in points if p["head_start"] <= 0]),
                                          ("head_start > 0", [p for p in points if p["head_start"] > 0]))}
    print(f"{len(points)} points; fit: {line}; not measured yet: {missing or 'none'}")
    summary = {"fit": line, "sources": sources, "missing": missing, "labs": sorted({p["lab"] for p in points})}
    write_results("sdpo_head_start", out=args.out, config={"sources": [s[0] for s in SOURCES]}, runs=points,
                  summary=summary, extra={"points": points, **summary})


if __name__ == "__main__":
    main()
