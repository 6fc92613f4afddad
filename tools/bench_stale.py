"""Re-measure exactly the stale results, from a clean worktree of HEAD, then render the report.

    make bench-stale            # or: python tools/bench_stale.py
    make bench-stale DRY=1      # or: python tools/bench_stale.py --dry-run   (the plan only)
    python tools/bench_stale.py [--dry-run] [--keep] [--only NAME ...] [--force NAME ...]

Which: every results file ``staleness.scan`` finds stale (its replay moved at the last ``make bench-check``)
or without sound provenance (made from a dirty tree, ...), and every results file ``ORDER`` names that
has not been measured yet (the report renders "not measured yet" for it). How: the command ``experiments.py`` declares for
each, run once even when it makes several of them. In what order: ``ORDER``, the declaration's (the Makefile's ``bench``
order first, then the SDPO skill lab, whose ``sdpo_lab`` runs before the signal benchmarks that read its
tuned learning rate, ``READS``; the code lab; the notebooks; ``fresh_clone`` last: it times CI on a
fresh clone of HEAD and nothing reads it). Where: ``git worktree add --detach`` of HEAD in a temporary
folder, run with this python and ``PYTHONPATH`` on the worktree (its ``sdpo_kit``, not an editable
install's), so the results carry HEAD's commit whatever is uncommitted here. As each command finishes,
its results files are copied into ``benchmarks/results/`` here (with what it wrote under
``benchmarks/results/executed/``: the executed notebooks of ``bench_notebooks.py --full``); a command that fails is reported and
the others still run. Last, ``reports/render.py`` renders the text here; commit the results and the text.

The plan is printed before anything runs. Left out on purpose: running benchmarks side by side (they
time themselves, and several already use both cores with ``--jobs 2``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the results' machinery it drives, and the pages
from experiments import EXPERIMENTS, script_path, typed  # noqa: E402

from reports.render import MAKERS  # noqa: E402
from reports.staleness import describe, scan  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
# the order results files are re-measured in, and what each one's benchmark reads (made before it): as
# benchmarks/experiments.py declares them
ORDER = list(EXPERIMENTS)
READS = {stem: list(e.reads) for stem, e in EXPERIMENTS.items() if e.reads}


@dataclass
class Step:
    """One command to run and the stale results files it makes."""
    command: str            # as experiments.py declares it: a script in benchmarks/ (or tools/...) and its arguments
    results: list[str]

    def argv(self, python: str = sys.executable) -> list[str]:
        """The command as run from the worktree's root: ``python benchmarks/<script> <args>`` (or tools/...)."""
        _, *args = shlex.split(self.command)
        return [python, script_path(self.command), *args]


def plan(names, makers: dict[str, str] = MAKERS, order: list[str] = ORDER) -> list[Step]:
    """The steps that re-measure the results files ``names``: one per distinct command, in ``order``
    (a command's place is that of the first of its files). ValueError naming any file no command makes."""
    unknown = sorted(n for n in set(names) if n not in makers or n not in order)
    if unknown:
        raise ValueError(f"no command makes {unknown}: declare it in benchmarks/experiments.py")
    steps: dict[str, Step] = {}
    for name in sorted(set(names), key=order.index):
        steps.setdefault(makers[name], Step(makers[name], [])).results.append(name)
    return list(steps.values())


def missing(results: Path = RESULTS, order: list[str] = ORDER) -> list[str]:
    """The results files ``order`` names that ``results`` does not hold yet, in order."""
    return [name for name in order if not (results / f"{name}.json").exists()]


def copy_executed(tree: Path, since: float) -> int:
    """Copy what the step wrote under the worktree's ``benchmarks/results/executed/`` (files newer than
    ``since``) to the same place here; how many files."""
    src = tree / "benchmarks" / "results" / "executed"
    n = 0
    for path in sorted(src.rglob("*")) if src.is_dir() else []:
        if path.is_file() and path.stat().st_mtime >= since:
            dest = RESULTS / "executed" / path.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
            n += 1
    return n


def show(steps: list[Step], findings, unmeasured=()) -> str:
    why = {f.name: describe(f) for f in findings}
    lines = []
    for i, step in enumerate(steps, 1):
        lines.append(f"{i:2d}. {typed(step.command)}")
        lines += [f"      {why.get(n, n + '.json: ' + ('not measured yet' if n in unmeasured else 'asked for'))}"
                  for n in step.results]
    return "\n".join(lines)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def run(steps: list[Step], keep: bool) -> list[str]:
    """Run ``steps`` in a clean worktree of HEAD, copying each step's results here; the failures."""
    head = git("rev-parse", "--short", "HEAD")
    tmp = Path(tempfile.mkdtemp(prefix="sdpo_kit_stale_"))
    tree = tmp / "sdpo_kit"
    git("worktree", "add", "--detach", str(tree), "HEAD")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    failed = []
    try:
        where = subprocess.run([sys.executable, "-c", "import sdpo_kit; print(sdpo_kit.__file__)"], cwd=tree / "benchmarks",
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
        if not Path(where).resolve().is_relative_to(tree.resolve()):
            raise SystemExit(f"the worktree's benchmarks would import sdpo_kit from {where}, not from {tree}")
        for i, step in enumerate(steps, 1):
            print(f"\n=== [{i}/{len(steps)}] {typed(step.command)}   (in {tree}, HEAD {head})", flush=True)
            t0 = time.time()
            code = subprocess.run(step.argv(), cwd=tree, env=env).returncode
            for lost in sorted((tree / "benchmarks" / "results" / "unsaved").glob("*.json")):  # a failed write's runs
                (RESULTS / "unsaved").mkdir(exist_ok=True)
                shutil.move(lost, RESULTS / "unsaved" / lost.name)
                print(f"moved the unsaved runs {lost.name} into {RESULTS.relative_to(ROOT)}/unsaved/")
            if not code and (n := copy_executed(tree, t0)):
                print(f"copied {n} files of benchmarks/results/executed/ here")
            for name in step.results:
                made = tree / "benchmarks" / "results" / f"{name}.json"
                if code or not made.exists() or made.stat().st_mtime < t0:
                    failed.append(f"{name}: `{step.command}` " + (f"exited {code}" if code else "wrote no results file"))
                    continue
                shutil.copy2(made, RESULTS / made.name)
                print(f"copied {name}.json into {RESULTS.relative_to(ROOT)}/ ({(time.time() - t0) / 60:.1f} min)")
    finally:
        if keep:
            print(f"worktree kept at {tree} (git worktree remove --force {tree})")
        else:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    ap.add_argument("--keep", action="store_true", help="keep the worktree the benchmarks ran in")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="re-measure only these stale results files")
    ap.add_argument("--force", nargs="+", metavar="NAME", default=[],
                    help="re-measure these results files too, stale or not (a change the last check has not seen)")
    args = ap.parse_args(argv)
    only = {n.removesuffix(".json") for n in args.only or []}
    findings = [f for f in scan(RESULTS) if not only or f.name in only]
    new = [n for n in missing(RESULTS) if not only or n in only]
    new += [n.removesuffix(".json") for n in args.force if n.removesuffix(".json") not in {f.name for f in findings} | set(new)]
    if not findings and not new:
        print("nothing stale: every results file replayed as measured at the last make bench-check")
        return 0
    steps = plan([f.name for f in findings] + new)
    head = git("rev-parse", "--short", "HEAD")
    print(f"{len(findings) + len(new)} results files to measure with {len(steps)} commands, in a clean worktree of HEAD "
          f"({head}):\n{show(steps, findings, missing(RESULTS))}")
    if git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results"):
        print("note: uncommitted changes here are not measured (the runs use HEAD); commit them first to measure them")
    if args.dry_run:
        return 0
    failed = run(steps, args.keep)
    print("\nrendering the report:", flush=True)
    subprocess.run([sys.executable, "reports/render.py"], cwd=ROOT, check=True)
    if failed:
        print("FAILED (their old results stay):\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    print("done: commit benchmarks/results/ and the re-rendered text")
    return 0


if __name__ == "__main__":
    sys.exit(main())
