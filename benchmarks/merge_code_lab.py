"""One code lab results file from two that measured different methods of the same experiment.

    python benchmarks/merge_code_lab.py BASE PART [--out FILE] [--replace]

``bench_code_lab.py`` runs 20 to 30 training runs per method; all four methods do not fit in one
sitting on 2 cores. Measure some methods into one file and the rest into another (``--methods ...
--out PART``), then merge: both must be the same variant, dials, reporting seeds, steps, tuning seeds
and learning-rate grid, and their methods must not overlap. The merged file keeps every run and
tuning run stamped with the commit and command that measured it (``config["parts"]``), so the report
says who measured what and a part whose code changed since shows as stale; the teacher table is
BASE's (PART's must agree: the same warm start). BASE and PART are paths or bare names under
``benchmarks/results/``; ``--out`` defaults to BASE.

``--replace`` lets PART re-measure methods BASE holds (a method rerun at a rate a later probe picked, or
on code changed since): PART's runs, rate and median replace BASE's for those methods, and BASE's part
entries lose them; BASE's tuning runs stay (the evidence the rate was picked from), beside PART's.
"""

from __future__ import annotations

import argparse
import json

from _common import parse_args, results_path, write_results
from bench_code_lab import METHODS  # the methods' order (and bench_code_lab's modules, so the merge names its files)

SAME = ("variant", "dials", "run_dials", "seeds", "steps", "tune_seeds", "lr_grid", "base", "blend_weight")


def merged(base: dict, part: dict, replace: bool = False) -> tuple[dict, list[dict], dict]:
    """(config, runs, summary) of ``base`` and ``part`` together; SystemExit when they are not one experiment.
    Every run and tuning run keeps the commit that measured it (an older merge's stamps are kept). With
    ``replace``, ``part``'s methods may be ``base``'s too: ``part``'s runs of them replace ``base``'s."""
    bc, pc = base["config"], part["config"]
    differ = [k for k in SAME if bc.get(k) != pc.get(k)]
    if differ:
        raise SystemExit("not one experiment: " + "; ".join(f"{k} {bc.get(k)!r} vs {pc.get(k)!r}" for k in differ))
    both = set(bc["methods"]) & set(pc["methods"])
    if both and not replace:
        raise SystemExit(f"both files measured {sorted(both)}: merge only disjoint methods (or --replace)")
    for d, q in base["summary"]["teacher"].items():
        p = part["summary"]["teacher"].get(d)
        keys = ("plain_acc", "demo_acc", "feedback_acc")
        if p is not None and any(p[k] != q[k] for k in keys):
            raise SystemExit(f"the warm starts differ at dial {d}: {[q[k] for k in keys]} vs {[p[k] for k in keys]}")

    def stamp(res: dict, rows: list[dict]) -> list[dict]:
        return [{**r, "commit": r.get("commit", res["commit"])} for r in rows]

    def parts(res: dict, drop: set = frozenset()) -> list[dict]:
        found = res["config"].get("parts") or [{"methods": res["config"]["methods"], "commit": res["commit"],
                                                "command": res["command"], "date": res["date"]}]
        kept = [{**p, "methods": [m for m in p["methods"] if m not in drop]} for p in found]
        return [p for p in kept if p["methods"]]

    new = set(pc["methods"])
    base_runs = [r for r in base["runs"] if r["method"] not in new]
    pinned = {m: lr for m, lr in bc.get("pinned_lr", {}).items() if m not in new}
    medians = {k: v for k, v in base["summary"].get("final_median", {}).items() if k.split("/")[-1] not in new}

    order = [m for m in METHODS if m in set(bc["methods"]) | set(pc["methods"])]
    config = {**bc, "methods": order, "pinned_lr": {**pinned, **pc.get("pinned_lr", {})},
              "parts": parts(base, new) + parts(part)}
    runs = sorted(stamp(base, base_runs) + stamp(part, part["runs"]),
                  key=lambda r: (order.index(r["method"]), r["dial"], r["seed"]))
    bs, ps = base["summary"], part["summary"]
    summary = {**bs, "lr": {m: {**bs["lr"], **ps["lr"]}[m] for m in order},
               "tuning": stamp(base, bs.get("tuning", [])) + stamp(part, ps.get("tuning", [])),
               "final_median": {**medians, **ps.get("final_median", {})}}
    return config, runs, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("part")
    ap.add_argument("--out", default=None, help="where to write (default: BASE)")
    ap.add_argument("--replace", action="store_true", help="PART's methods replace BASE's runs of them")
    args = parse_args(ap)
    base, part = (json.loads(results_path("code_lab", p).read_text()) for p in (args.base, args.part))
    config, runs, summary = merged(base, part, replace=args.replace)
    # the parts' measured files, not this script's: a merge measures nothing, so it stales nothing
    measured = sorted(set(base["measures"]) | set(part["measures"]))
    write_results("code_lab", out=args.out or args.base, config=config, runs=runs, summary=summary,
                  extra={"measures": measured})


if __name__ == "__main__":
    main()
