"""Behaviour fingerprints: whether a results file still measures what the code at HEAD does.

A results file's numbers took minutes to hours; what they measured is the behaviour of some code. Its
**fingerprint** is a short deterministic replay of that behaviour, taken when it was measured
(``_common.write_results``): the first steps of the config it ran, at seed 0, on one thread, with a fresh
warm-start cache (``REPLAYS``: a config, dotted-key overrides, a step count), recorded as every metric of every
step (timings left out) and a checksum of the trained weights. ``FINGERPRINTS`` names the replays each results file
carries. Two results measure nothing a replay can run: a CI timing (``fresh_clone``) and the notebooks' timings
carry a digest of the code they time as well (``DIGESTS``: Python without docstrings and comments, a notebook's
code cells, a Makefile or YAML without comment lines). Two numbers match when ``|a - b| <= ATOL + RTOL * |b|``
(``differs``). A comment or a refactor that keeps behaviour marks nothing; a change that moves what a replay runs
names every result that carries it (what replays do not cover: docs/benchmarks.md).

``make bench-check`` (``tools/bench_check.py``) replays them all and says which moved. Replays run in two child
processes (``python benchmarks/fingerprint.py child``: the tiny lab's, the real model's), one thread each, with the
tree's ``sdpo_kit`` on ``PYTHONPATH``, so an older commit replays from a temporary ``git worktree`` of it with
this file's replays.
"""

from __future__ import annotations

import argparse
import ast
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
    "real_grpo_fp32": dict(config="configs/real_grpo.yaml", set={"trainer.sampling_dtype": "float32"},
                           steps=REAL_STEPS),
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


def main(argv=None) -> int:
    """``python benchmarks/fingerprint.py child --root TREE NAME ...``: the replays and digests ``NAME`` of the tree at
    ``TREE``, printed as one JSON line (``run_child`` starts it; ``make bench-check`` is tools/bench_check.py)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["child"], help="replay NAMES of the tree at --root; print one JSON line")
    ap.add_argument("--root", required=True)
    ap.add_argument("names", nargs="+")
    args = ap.parse_args(argv)
    # the tree's sdpo_kit only: an editable install's finder would fill its gaps from HEAD
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__name__", type(f).__name__).lower()]
    print(json.dumps(child(args.names, Path(args.root))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
