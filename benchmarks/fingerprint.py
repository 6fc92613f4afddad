"""Behaviour fingerprints: whether a results file still measures what the code at HEAD does.

A results file's numbers took minutes to hours; what they measured is the behaviour of some code. Its
**fingerprint** is a short deterministic replay of that behaviour, taken when it was measured: the first
steps of the config it ran, at seed 0, on one thread, with a fresh warm-start cache (``REPLAYS``: a
config, dotted-key overrides, a step count), recorded as every metric of every step (timings left out)
and a checksum of the trained weights. ``FINGERPRINTS`` names the replays each results file carries. Two
results measure nothing a replay can run: a CI timing (``fresh_clone``) and the notebooks' timings carry
a digest of the code they time as well (``DIGESTS``: Python without docstrings and comments, a
notebook's code cells, a Makefile or YAML without comment lines).

    make bench-check                          # python benchmarks/fingerprint.py check
    python benchmarks/fingerprint.py show demo.json
    python benchmarks/fingerprint.py stamp [NAME ...] # give results files made before fingerprints theirs,
                                                      # replayed at the commit each was measured at

``check`` replays every fingerprint at the working tree (each replay once, however many results files
carry it), writes what it saw to ``benchmarks/results/check/last_check.json`` and exits 0 when every
results file's fingerprint matches, else 1, naming each results file whose replay differs (``demo.json``)
and the first value that moved. Two numbers match when ``|a - b| <= ATOL + RTOL * |b|``: a replay is
bit-for-bit the same on one machine. Another CPU rounds differently, and a replay that samples and trains
turns a last bit into another token: on an AMD Zen 5 every tiny-lab replay moved at unchanged code
(2026-11-28). So a replay that differs from a fingerprint is **re-based** before it counts: the fingerprint's
own commit is replayed on this machine (a temporary worktree), and the file moved only when the code now
replays differently from that (``rebase``, recorded in ``last_check.json`` as ``rebased``).
A comment or a refactor that keeps behaviour marks nothing; a change that moves what a replay runs names
every result that carries it (what replays do not cover: docs/benchmarks.md). The pages say "Stale" for exactly the files the last check found moved
(``staleness.py``), and ``make bench-stale`` re-measures those.

Replays run in two child processes (``python benchmarks/fingerprint.py child``: the tiny lab's, the real
model's), one thread each, with the tree's ``sdpo_kit`` on ``PYTHONPATH``, so ``stamp`` can replay an older commit from a temporary
``git worktree`` of it with this file's replays.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LAST_CHECK = RESULTS / "check" / "last_check.json"
RTOL, ATOL = 1e-4, 1e-6
TINY_STEPS, REAL_STEPS = 3, 2
# a tiny-lab warm start is built afresh for a replay (no cache: its recipe is behaviour too), its phases cut
# to at most these steps: the skill labs' 2,000 + 1,000 would take minutes
WARM_START = {"sft_steps": 180, "context_steps": 60, "copy_steps": 60}
SKIP_KEY = re.compile(r"(time|_s$|/s$|per_s|sec|wall|tokens_per|throughput|memory)")

# name -> the replay: ``config`` (from the tree's root), ``set`` (dotted keys), ``steps``. Every replay runs
# seed 0, one thread, a small held-out set (``task.n_eval``) evaluated before and after.
REPLAYS = {   # an experiment declared as a sweep replays its own config and overrides (experiments.py)
    **{name: dict(config=e.sweep.config, set=dict(e.sweep.set)) for name, e in EXPERIMENTS.items() if e.sweep},
    "vapor": dict(config="configs/vapor.yaml"),
    "sdpo": dict(config="configs/sdpo.yaml"),
    "sdpo_feedback": dict(config="configs/sdpo_feedback.yaml"),
    "sdpo_lab": dict(config="configs/sdpo_lab.yaml"),
    "sdpo_paper": dict(config="configs/sdpo_paper.yaml"),
    "code_lab": dict(config="configs/sdpo_code_lab.yaml"),
    "ppo": dict(config="configs/teacher_student_ppo.yaml"),
    "real_grpo": dict(config="configs/real_grpo.yaml", steps=REAL_STEPS),
    "real_grpo_trl": dict(config="configs/real_grpo.yaml", set={"backend": "trl"}, steps=REAL_STEPS),
    "real_sdpo": dict(config="configs/real_sdpo.yaml", steps=REAL_STEPS),
    "real_sdpo_rlhf_book": dict(config="configs/real_sdpo_rlhf_book.yaml", steps=REAL_STEPS),
    "real_vapor": dict(config="configs/real_vapor.yaml", steps=REAL_STEPS),
    "real_ppo": dict(config="configs/real_ppo.yaml", steps=REAL_STEPS),
    "first_run": dict(config="configs/first_run.yaml", steps=REAL_STEPS),
    "own_task": dict(config="examples/own_task/config.yaml", steps=REAL_STEPS),
}
LIGHT = ("first_run", "own_task")   # real-model replays that run with the tiny lab's (two processes, even loads)
# name -> the files whose code a digest covers (a folder: its tracked .py, .ipynb and .yaml files)
DIGESTS = {
    "ci": ["Makefile", ".ci/run", "pyproject.toml", "constraints.txt", "constraints-verl.txt", "tests/conftest.py"],
    "notebooks": ["notebooks", "sdpo_kit/course"],
}
# results file (its stem) -> its replays and digests, as benchmarks/experiments.py declares them
FINGERPRINTS = {stem: list(e.replays) for stem, e in EXPERIMENTS.items()}


# ---------------------------------------------------------------------------------------------------------
# in the child process: one replay, one digest
# ---------------------------------------------------------------------------------------------------------
def replay(name: str, root: Path) -> dict:
    """``REPLAYS[name]`` trained in this process from the tree at ``root`` (a tiny-lab warm start's phases cut to
    ``WARM_START``): ``{"steps": [row, ...],
    "before": acc, "after": acc, "weights": [sum, sum of squares]}``, each row the step's metrics."""
    import torch

    from sdpo_kit.registry import load_config
    try:
        from sdpo_kit.training import train
    except ImportError:   # before the training API had a module of its own
        from sdpo_kit.cli import train

    spec = REPLAYS[name]
    steps = spec.get("steps", TINY_STEPS)
    with tempfile.TemporaryDirectory() as out:
        overrides = {**spec.get("set", {}), "trainer.max_steps": steps, "trainer.seed": 0, "trainer.eval_every": 0,
                     "task.n_eval": 8, "threads": 1, "output_dir": out}
        model = load_config(root / spec["config"], overrides).model
        if model.name == "tiny-lab":
            from sdpo_kit.lab.model import LabConfig

            lab = {k: (model.lab or {}).get(k, getattr(LabConfig(), k, 0)) for k in WARM_START}
            overrides |= {f"model.lab.{k}": min(v, WARM_START[k]) for k, v in lab.items() if v}
        cfg = load_config(root / spec["config"], overrides)
        s = train(cfg, config_path=spec["config"])
    rows = [{k: v for k, v in r.items() if isinstance(v, (int, float)) and not SKIP_KEY.search(k)}
            for r in s["history"] if "loss" in r]
    trained = [p.detach().double() for p in s["model"].parameters() if p.requires_grad]
    weights = [sum(p.sum().item() for p in trained), sum((p * p).sum().item() for p in trained)]
    del torch
    return {"steps": rows, "before": s.get("before"), "after": s.get("after"), "weights": weights}


def python_code(source: str) -> str | None:
    """The code of a Python source without its docstrings and comments (an AST dump), None when it
    does not parse: what runs, so a docstring edit changes no digest."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def code_of(path: Path) -> str:
    """What runs in ``path``: Python without docstrings and comments, a notebook's code cells, any other
    text without its comment lines and blank lines."""
    text = path.read_text(errors="replace")
    if path.suffix == ".py":
        return python_code(text) or text
    if path.suffix == ".ipynb":
        return json.dumps([c["source"] for c in json.loads(text)["cells"] if c["cell_type"] == "code"])
    return "\n".join(x for x in (line.rstrip() for line in text.splitlines()) if x and not x.lstrip().startswith("#"))


def digest(name: str, root: Path) -> dict:
    """A sha256 over the code of ``DIGESTS[name]``'s files tracked by git at ``root`` (a folder's .py, .ipynb
    and .yaml files), 12 hex digits, and how many files."""
    tracked = subprocess.run(["git", "ls-files", "--", *DIGESTS[name]], cwd=root, capture_output=True, text=True)
    files = [root / f for f in tracked.stdout.split()   # committed files only: a run's output is not code
             if f in DIGESTS[name] or Path(f).suffix in (".py", ".ipynb", ".yaml")]
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + code_of(f).encode() + b"\0")
    return {"sha256": h.hexdigest()[:12], "files": len(files)}


def child(names: list[str], root: Path) -> dict:
    """Each of ``names`` (a replay or a digest) at ``root``: its values, or ``{"error": ...}``."""
    out = {}
    for name in names:
        t0 = time.perf_counter()
        try:
            out[name] = digest(name, root) if name in DIGESTS else replay(name, root)
        except Exception as e:   # one replay that cannot run says why; the others still run
            out[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
        print(f"fingerprint: {name} in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    return out


# ---------------------------------------------------------------------------------------------------------
# in the parent: run, compare, record
# ---------------------------------------------------------------------------------------------------------
def needed(stems) -> list[str]:
    """The replays and digests ``stems``' fingerprints hold, each once, cheapest kinds first."""
    return needed_names({n for s in stems for n in FINGERPRINTS.get(s, [])})


def needed_names(names) -> list[str]:
    return sorted(sorted(names), key=lambda n: (n not in DIGESTS, REPLAYS.get(n, {}).get("steps", 0), n))


def run_child(names: list[str], root: Path = ROOT, jobs: int = 2) -> dict:
    """``child(names, root)`` in fresh processes, the real model's replays beside the tiny lab's when
    ``jobs`` is 2: one torch thread each, a temporary warm-start cache each (the real model's converted
    folder and llama.cpp's converter linked in from this machine's cache)."""
    real = [n for n in names if REPLAYS.get(n, {}).get("steps") == REAL_STEPS and n not in LIGHT]
    groups = [g for g in ([[n for n in names if n not in real], real] if jobs > 1 else [names]) if g]
    cache = Path(os.environ.get("SDPO_KIT_CACHE") or Path.home() / ".cache" / "sdpo_kit")
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i, group in enumerate(groups):
            own = Path(tmp) / str(i)
            own.mkdir()
            for shared in ("smollm2-135m", *(p.name for p in cache.glob("llama.cpp*"))):
                if (cache / shared).exists():
                    os.symlink(cache / shared, own / shared)
            env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{ROOT / 'benchmarks'}", "OMP_NUM_THREADS": "1",
                   "SDPO_KIT_CACHE": str(own), "CUDA_VISIBLE_DEVICES": "", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
            procs.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "child", "--root", str(root),
                                           *group], cwd=root, env=env, stdout=subprocess.PIPE, text=True))
        outs = [(p, p.communicate()[0]) for p in procs]
    values = {}
    for proc, out in outs:
        if proc.returncode:
            raise RuntimeError(f"a replay process failed (exit {proc.returncode}) at {root}")
        values |= json.loads(out.strip().splitlines()[-1])
    return values


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


def file_move(fp: dict, check: dict) -> tuple[str, str, str] | None:
    """``first_move`` of a fingerprint's replays against a check's, each replay the check ``rebased`` (its commit
    replayed on the check's machine) compared with that instead of the fingerprint's value."""
    ref = check.get("rebased", {}).get(fp.get("commit"), {})
    return first_move({n: ref.get(n, was) for n, was in fp["replays"].items()}, check.get("replays", {}))


def fingerprint_for(stem: str, values: dict) -> dict:
    """The fingerprint a results file ``stem`` carries, from replay values ``values`` (``run_child``'s)."""
    return {n: values[n] for n in FINGERPRINTS.get(stem, [])}


def differs(a, b, path: str = "") -> str | None:
    """Where ``a`` (a replay now) first differs from ``b`` (the fingerprint), beyond the tolerance; None
    when they match."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path or 'keys'}: {sorted(set(a) ^ set(b))[:4]} only on one side"
        return next((d for k in sorted(b) if (d := differs(a[k], b[k], f"{path}.{k}" if path else k))), None)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} entries, was {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := differs(x, y, f"{path}[{i}]"))), None)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        same = a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= ATOL + RTOL * abs(b)
        return None if same else f"{path}: {a:.7g}, was {b:.7g}"
    return None if a == b else f"{path}: {str(a)[:60]}, was {str(b)[:60]}"


def first_move(replays: dict, values: dict) -> tuple[str, str, str] | None:
    """The first of a fingerprint's ``replays`` that ``values`` (a check's) moves: ``(name, kind, detail)``
    with kind "not_run" (it could not run when measured; detail: its error), "fails" (it cannot run now;
    detail: the error) or "differs" (detail: ``differs``' where); None when all match. A replay ``values``
    lacks says nothing. The check and the pages' Stale notes (``staleness.moved``) both read this."""
    for name, was in replays.items():
        now = values.get(name)
        if now is None:
            continue
        if "error" in was:
            return name, "not_run", was["error"]
        if "error" in now:
            return name, "fails", now["error"]
        where = differs(now, was, name)
        if where:
            return name, "differs", where
    return None


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


def check(stems=None) -> int:
    """Replay every fingerprint at the working tree; record it in ``LAST_CHECK``; 0 when all match."""
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
                            "benchmarks/fingerprint.py", *DIGESTS["ci"]],
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
    ch = sub.add_parser("child", help=argparse.SUPPRESS)
    ch.add_argument("--root", required=True)
    ch.add_argument("names", nargs="+")
    args = ap.parse_args(argv)
    stems = [Path(x).stem for x in getattr(args, "stems", [])] or None
    if args.cmd == "child":   # the tree's sdpo_kit only: an editable install's finder would fill its gaps from HEAD
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__name__", type(f).__name__).lower()]
        print(json.dumps(child(args.names, Path(args.root))))
        return 0
    if args.cmd == "show":
        print(json.dumps(json.loads((RESULTS / f"{Path(args.stem).stem}.json").read_text()).get("fingerprint"),
                         indent=1))
        return 0
    if args.cmd == "stamp":
        stamp(stems, args.force)
        return 0
    return check(stems)


if __name__ == "__main__":
    sys.exit(main())
