"""The skill lab's figure for the docs, from ``benchmarks/results/sdpo_lab.json``.

    python reports/plot_sdpo_lab.py [--results FILE] [--out docs/img/sdpo_lab.png]

Left: each SDPO method's final held-out accuracy minus GRPO's, seed by seed, at each dial setting
(dots; the line joins the medians): the toy version of the paper's model-size figure. Right: held-out
accuracy against training step at the top of the dial, the median over seeds per method.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run as a script: this folder is the ``reports`` package
from reports.sdpo_lab import paired_diff, runs_of  # noqa: E402


def plot(res: dict, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dials, methods = res["config"]["dials"], res["config"]["methods"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    color = {m: f"C{i}" for i, m in enumerate(methods)}     # one colour per method in both panels
    for m in methods:
        if m == "grpo":
            continue
        diffs = [paired_diff(res, m, d) for d in dials]
        line, = left.plot(dials, [statistics.median(ds) if ds else float("nan") for ds in diffs], marker="o", label=m,
                         color=color[m])
        for d, ds in zip(dials, diffs):
            left.scatter([d] * len(ds), ds, s=12, alpha=0.5, color=line.get_color())
    left.axhline(0.0, color="grey", lw=0.8)
    left.set(xlabel="dial: context SFT steps in the warm start", ylabel="final acc minus GRPO's (paired)",
             title="SDPO minus GRPO across the dial")
    left.legend(fontsize=8)
    top = dials[-1]
    for m in methods:
        runs = runs_of(res, m, top)
        if not runs:
            continue
        steps = [s for s, _ in runs[0]["acc_by_step"]]
        med = [statistics.median(r["acc_by_step"][i][1] for r in runs) for i in range(len(steps))]
        right.plot(steps, med, marker=".", label=m, color=color[m])
    right.set(xlabel="step", ylabel="held-out greedy accuracy (median over seeds)", title=f"at the top dial ({top})")
    right.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "sdpo_lab.json"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "img" / "sdpo_lab.png"))
    args = ap.parse_args()
    print("wrote", plot(json.loads(Path(args.results).read_text()), Path(args.out)))


if __name__ == "__main__":
    main()
