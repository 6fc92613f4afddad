"""``make bench-check``: replay every results file's behaviour fingerprint here and say which moved.

    make bench-check                            # python tools/bench_check.py check
    python tools/bench_check.py check demo.json # one file (not recorded)
    python tools/bench_check.py show demo.json  # a results file's fingerprint
    python tools/bench_check.py stamp [NAME ...] [--force]   # give results files made before fingerprints
                                                             # theirs, replayed at the commit each was measured at

A fingerprint (``benchmarks/fingerprint.py``: the replays, what they record, the tolerance) is taken when a results
file is written. ``check`` replays every fingerprint at the working tree (each replay once, however many results
files carry it), writes what it saw to ``benchmarks/results/check/last_check.json`` and exits 0 when every results
file's fingerprint matches, else 1, naming each results file whose replay differs (``demo.json``) and the first
value that moved; then it renders the pages (``reports/render.py``), whose Stale notes follow that record: commit
the record and the pages together. A replay is bit-for-bit the same on one machine. Another CPU rounds
differently, and a replay that samples and trains turns a last bit into another token: on an AMD Zen 5 every
tiny-lab replay moved at unchanged code (2026-11-28). So a replay that differs from a fingerprint is **re-based**
before it counts: the fingerprint's own commit is replayed on this machine (a temporary worktree), and the file
moved only when the code now replays differently from that (``rebase``, recorded in ``last_check.json`` as
``rebased``). The pages say "Stale" for exactly the files the last check found moved (``reports/staleness.py``),
and ``make bench-stale`` (``tools/bench_stale.py``) re-measures those.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the replays it runs
from fingerprint import (  # noqa: E402
    DIGESTS,
    FINGERPRINTS,
    LAST_CHECK,
    RESULTS,
    ROOT,
    differs,
    file_move,
    fingerprint_for,
    needed,
    needed_names,
    run_child,
)


@contextlib.contextmanager
def worktree(commit: str):
    """A temporary ``git worktree`` of ``commit`` (its path), removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)


def rebase(results: dict[str, dict], values: dict) -> dict[str, dict]:
    """``{commit: {replay: values}}``: each replay that differs from a fingerprint, replayed on this machine at the
    fingerprint's own commit: the reference ``file_move`` compares with instead. A commit this clone lacks stays out."""
    todo: dict[str, set] = {}
    for res in results.values():
        fp = res.get("fingerprint") or {}
        for name, was in (fp.get("replays") or {}).items():
            now = values.get(name)
            if now is not None and "error" not in now and "error" not in was and differs(now, was, name):
                todo.setdefault(fp.get("commit", ""), set()).add(name)
    out = {}
    for commit, names in sorted(todo.items()):
        print(f"bench-check: {', '.join(sorted(names))} differ from their fingerprint of {commit}: replaying {commit} "
              "here", flush=True)
        try:
            with worktree(commit) as tree:
                out[commit] = run_child(needed_names(names), tree)
        except (subprocess.CalledProcessError, RuntimeError) as e:   # not in this clone, or cannot run there
            print(f"bench-check: cannot replay {commit} here ({type(e).__name__}); its fingerprints stand", flush=True)
    return out


def verdicts(results: dict[str, dict], check: dict) -> dict[str, str | None]:
    """{stem: where its replay differs, or None} for every results file whose fingerprint's replays the ``check``
    record holds (``file_move``); a results file without a fingerprint differs ("no fingerprint")."""
    out = {}
    for stem, res in results.items():
        fp = res.get("fingerprint")
        if not isinstance(fp, dict) or not fp.get("replays"):
            out[stem] = "no fingerprint"
            continue
        move = file_move(fp, check)
        out[stem] = None if move is None else {"not_run": "it was not replayed: ", "fails": "the replay cannot run: ",
                                               "differs": ""}[move[1]] + move[2]
    return out


def load_results(stems=None) -> dict[str, dict]:
    paths = sorted(RESULTS.glob("*.json"))
    return {p.stem: json.loads(p.read_text()) for p in paths if stems is None or p.stem in stems}


def check(stems=None, render=None) -> int:
    """Replay every fingerprint at the working tree; record it in ``LAST_CHECK``; 0 when all match. ``render``
    (``reports.render.main``, as ``make bench-check`` runs it) then rewrites the pages' Stale notes from the record."""
    results = load_results(stems)
    names = needed(results)
    print(f"bench-check: {len(names)} replays for {len(results)} results files", flush=True)
    t0 = time.perf_counter()
    values = run_child(names)
    rebased = rebase(results, values)
    found = verdicts(results, {"replays": values, "rebased": rebased})
    moved = {s: why for s, why in found.items() if why}
    LAST_CHECK.parent.mkdir(parents=True, exist_ok=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "sdpo_kit", "configs", "examples", "notebooks",
                            "benchmarks/fingerprint.py", "tools/bench_check.py",
                            *DIGESTS["ci"]],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    record = {"commit": head.stdout.strip() + ("+dirty" if dirty else ""), "seconds": round(time.perf_counter() - t0),
              "replays": values, "rebased": rebased, "moved": moved}
    if stems is None:
        LAST_CHECK.write_text(json.dumps(record, indent=1) + "\n")
    for s, why in sorted(moved.items()):
        print(f"  {s}.json: {why}")
    print(f"bench-check: {len(found) - len(moved)} of {len(found)} results files replay as measured "
          f"({record['seconds']} s)" + (f"; moved: {', '.join(f'{s}.json' for s in sorted(moved))}" if moved else ""))
    if stems is None and render is not None:   # the pages' Stale notes follow the record: commit both together
        render([])
    return 1 if moved else 0


def stamp(stems=None, force: bool = False) -> None:
    """Give each results file without a fingerprint (all named, with ``force``) the replays of the commit it
    was measured at, run in a temporary ``git worktree`` of that commit."""
    results = {s: r for s, r in load_results(stems).items() if s in FINGERPRINTS and (force or "fingerprint" not in r)}
    by_commit: dict[str, list[str]] = {}
    for s, r in results.items():
        by_commit.setdefault(r["commit"], []).append(s)
    for commit, group in sorted(by_commit.items()):
        print(f"stamp: {', '.join(group)} at {commit}", flush=True)
        with worktree(commit) as tree:
            values = run_child(needed(group), tree)
        for s in group:
            path = RESULTS / f"{s}.json"
            res = json.loads(path.read_text())
            res["fingerprint"] = {"commit": commit, "replays": fingerprint_for(s, values)}
            path.write_text(json.dumps(res, indent=1) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="replay every fingerprint here; exit 1 naming each results file that moved")
    c.add_argument("stems", nargs="*", help="only these results files (e.g. demo.json); not recorded")
    s = sub.add_parser("stamp", help="fingerprint results files made before fingerprints, at their own commits")
    s.add_argument("stems", nargs="*")
    s.add_argument("--force", action="store_true", help="re-stamp files that have a fingerprint")
    sh = sub.add_parser("show", help="print a results file's fingerprint")
    sh.add_argument("stem")
    args = ap.parse_args(argv)
    stems = [Path(x).stem for x in getattr(args, "stems", [])] or None
    if args.cmd == "show":
        print(json.dumps(json.loads((RESULTS / f"{Path(args.stem).stem}.json").read_text()).get("fingerprint"),
                         indent=1))
        return 0
    if args.cmd == "stamp":
        stamp(stems, args.force)
        return 0
    sys.path.insert(0, str(ROOT))
    from reports.render import main as render  # the pages' Stale notes, rewritten from the new record

    return check(stems, render)


if __name__ == "__main__":
    sys.exit(main())
