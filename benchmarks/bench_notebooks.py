"""Wall time of every notebook, in smoke mode (as CI runs them) or full size, and their results.

    python benchmarks/bench_notebooks.py [--full] [--cold] [--model NAME] [notebooks/NN_*.ipynb ...]

Executes each notebook with nbclient in a fresh kernel (``MPLBACKEND=Agg``, the exercises on
their reference answers, ``SDPO_KIT_SOLUTIONS=1``), with ``SDPO_KIT_SMOKE=1`` unless ``--full``.
A notebook that defines a ``RESULTS`` dict (its key figures: accuracies, speeds, ...) has it
read back after the run. Writes ``benchmarks/results/notebooks_smoke.json`` or
``notebooks_full.json`` (a run over some notebooks updates their entries and keeps the others);
``report.py`` renders the README's table and the reference figures quoted in each notebook.
``--cold`` runs each notebook from an empty cache of its own (``SDPO_KIT_CACHE`` in a fresh temporary
folder, removed after), as a fresh clone's CI meets it: the warm starts are built, not loaded. It
writes ``notebooks_smoke_cold.json`` (or ``notebooks_full_cold.json``) and leaves the warm files alone.
A full-size run on the default profiles also keeps each executed notebook, outputs and plots included, in
``benchmarks/results/executed/notebooks/`` with a first cell naming the commit and command it ran at: the docs
site shows those copies (``docs/hooks.py``); the notebooks in ``notebooks/`` stay without outputs.
``--model NAME`` runs the notebooks on that model's profile (``SDPO_KIT_MODEL``; ``smollm2-135m`` is the
real CPU model, what ``make test-real`` runs) and adds ``_real`` to the results name for it.
The target for smoke mode: 15 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from _common import RESULTS, ROOT, command, git_commit, machine, table, write_results
from nbclient import NotebookClient

MARK = "SDPO_KIT_RESULTS "
READ_RESULTS = f"import json as _j\nprint({MARK!r} + _j.dumps(globals().get('RESULTS')))"


EXECUTED = RESULTS / "executed" / "notebooks"   # the full-size run's executed copies, shown on the docs site


def run_notebook(path: Path, keep: Path | None = None, banner: str = "") -> tuple[float, dict | None]:
    """Execute ``path`` in a fresh kernel; (wall seconds, its RESULTS dict). ``keep``: write the executed
    notebook there, ``banner`` as a first markdown cell, the results-reading cell dropped."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(READ_RESULTS))
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - t0
    out = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    line = next((x for x in out.splitlines() if x.startswith(MARK)), None)
    if keep is not None:
        nb.cells = [nbformat.v4.new_markdown_cell(banner), *nb.cells[:-1]]
        keep.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, keep)
    return seconds, (json.loads(line[len(MARK):]) if line else None)


def executed_banner(commit: str, date: str) -> str:
    """The first cell of an executed copy: which run it shows."""
    return (f"> **Outputs of the full-size CPU run** at commit `{commit}` on {date}, made by `python "
            "benchmarks/bench_notebooks.py --full` on the tiny lab's profile. The notebook in the repository "
            "has no outputs: open it in Colab or Jupyter to run it yourself.")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="full size (no SDPO_KIT_SMOKE)")
    ap.add_argument("--cold", action="store_true", help="each notebook from an empty warm-start cache of its own")
    ap.add_argument("--model", default=None, help="SDPO_KIT_MODEL for every notebook (default: each one's own)")
    ap.add_argument("paths", nargs="*", help="notebooks to run (default: all)")
    args = ap.parse_args()
    paths = [Path(p).resolve() for p in args.paths] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    os.environ.update(MPLBACKEND="Agg", SDPO_KIT_SOLUTIONS="1")
    if args.full:
        os.environ.pop("SDPO_KIT_SMOKE", None)
    else:
        os.environ["SDPO_KIT_SMOKE"] = "1"
    if args.model:
        os.environ["SDPO_KIT_MODEL"] = args.model
    name = (("notebooks_full" if args.full else "notebooks_smoke") + ("_cold" if args.cold else "")
            + ("_real" if args.model == "smollm2-135m" else f"_{args.model.replace('/', '_')}" if args.model else ""))
    previous = {}
    if (RESULTS / f"{name}.json").exists():  # a partial run keeps the other notebooks' entries
        previous = {r["notebook"]: r for r in json.loads((RESULTS / f"{name}.json").read_text())["runs"]}
    for p in paths:
        cache = tempfile.mkdtemp(prefix="sdpo_kit_cold_") if args.cold else None
        if cache:
            os.environ["SDPO_KIT_CACHE"] = cache               # the kernel starts with this environment
        keep = EXECUTED / p.name if args.full and not args.cold and not args.model else None
        try:
            seconds, results = run_notebook(p, keep, executed_banner(git_commit(), dt.date.today().isoformat()))
        finally:
            if cache:
                shutil.rmtree(cache, ignore_errors=True)
        previous[p.stem] = {"notebook": p.stem, "wall_s": round(seconds, 1), "results": results,
                            "command": command(), "date": dt.date.today().isoformat(), "commit": git_commit()}
        print(f"{p.name}: {seconds:.1f} s; RESULTS = {results}", flush=True)
    runs = [previous[k] for k in sorted(previous)]
    total = sum(r["wall_s"] for r in runs)
    print(f"\nmachine: {machine()}\n")
    print(table(["notebook", "wall s"], [[r["notebook"], r["wall_s"]] for r in runs] + [["total", total]]))
    write_results(name, config={"smoke": not args.full, "cold": args.cold, "model": args.model,
                                "env": {"MPLBACKEND": "Agg", "SDPO_KIT_SOLUTIONS": "1"}},
                  runs=runs, summary={"total_s": round(total, 1)})


if __name__ == "__main__":
    main()
