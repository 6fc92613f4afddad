"""Wall time of every notebook, in smoke mode (as CI runs them) or full size, and their results.

    python benchmarks/bench_notebooks.py [--full] [--cold] [--model NAME] [notebooks/NN_*.ipynb ...]

Each notebook runs in a fresh nbclient kernel (``MPLBACKEND=Agg``), with ``SDPO_KIT_SMOKE=1`` unless ``--full``,
on its lesson's model (``course.setup``) unless ``--model NAME`` (``smollm2-135m``: the real CPU model, as
``make test-real``; the results name gets ``_real``). Each exercise gets its reference answer from
``notebooks/solutions`` after its cell, as CI's nbmake run loads it, so the runs train with those functions.
A notebook's ``RESULTS`` dict is read back. Writes ``results/notebooks_smoke.json`` or ``notebooks_full.json``
(a run over some notebooks keeps the others' entries). ``--cold``: each notebook from an empty cache of its own,
as a fresh clone meets it (``notebooks_*_cold.json``).
A full-size run on the default profiles (``make executed``) also keeps each executed notebook in
``results/executed/notebooks/`` with a first cell naming its commit: the docs site shows those copies. A kept copy
loses its widget outputs (the dashboards and explorers leave a plain image beside them) and is refused when a cell
printed more than ``MAX_OUTPUT`` characters or an output shows a machine path (``tests/test_executed_copies.py``).
The target for smoke mode: 15 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from _common import RESULTS, ROOT, command, git_commit, parse_args, write_results
from nbclient import NotebookClient

MARK = "SDPO_KIT_RESULTS "
READ_RESULTS = f"import json as _j\nprint({MARK!r} + _j.dumps(globals().get('RESULTS')))"

EXECUTED = RESULTS / "executed" / "notebooks"   # the full-size run's executed copies, shown on the docs site
MAX_OUTPUT = 20_000                              # characters one cell may print in an executed copy
WIDGET = "application/vnd.jupyter.widget-view+json"
# an absolute path of this machine or of a temporary folder: never in a page
MACHINE_PATH = re.compile(r"(?<![\w.])(/(?:home|root|tmp|work|Users|private|var/folders|opt|usr)/[\w.\-/]+"
                          r"|[A-Z]:\\[\w\\]+)")


def output_text(output) -> str:
    """The text an output shows: a stream's, an error's, or a result's text/plain, markdown or HTML."""
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    return "".join(data.get(k, "") if isinstance(data.get(k, ""), str) else "".join(data.get(k))
                   for k in ("text/plain", "text/markdown", "text/html"))


def output_problems(nb) -> list[str]:
    """Why a page could not show ``nb``'s outputs: a cell printing more than ``MAX_OUTPUT`` characters, a
    machine path in an output."""
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        text = "".join(output_text(o) for o in cell.get("outputs", []))
        if len(text) > MAX_OUTPUT:
            problems.append(f"cell {i} prints {len(text):,} characters (at most {MAX_OUTPUT:,})")
        found = MACHINE_PATH.search(text)
        if found:
            problems.append(f"cell {i} shows a machine path: {found.group()}")
    return problems


def for_the_page(nb):
    """``nb`` without widget outputs (nothing can run them on a page; the static image beside stays)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET not in o.get("data", {})]
    nb.metadata.pop("widgets", None)
    return nb


def run_notebook(path: Path, keep: Path | None = None, banner: str = "") -> tuple[float, dict | None]:
    """Execute ``path`` in a fresh kernel; (wall seconds, its RESULTS dict). ``keep``: write the executed
    notebook there, ``banner`` as a first markdown cell, the results-reading cell dropped."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(READ_RESULTS))
    t0 = time.perf_counter()
    client = NotebookClient(nb, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})

    async def load_answers(cell, cell_index, execute_reply):   # the cell's post_cell_execute lines, as nbmake runs them
        lines = cell.get("metadata", {}).get("nbmake", {}).get("post_cell_execute", [])
        if lines:
            reply = await client.kc.execute_interactive("\n".join(lines))
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"{path.name} cell {cell_index}: loading the reference answer failed: {lines}")

    client.on_cell_executed = load_answers
    client.execute()
    seconds = time.perf_counter() - t0
    out = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    line = next((x for x in out.splitlines() if x.startswith(MARK)), None)
    if keep is not None:
        nb.cells = [nbformat.v4.new_markdown_cell(banner), *nb.cells[:-1]]
        nb = for_the_page(nb)
        problems = output_problems(nb)
        if problems:
            raise RuntimeError(f"{path.name}: its executed copy cannot go on a page: " + "; ".join(problems))
        keep.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, keep)
    return seconds, (json.loads(line[len(MARK):]) if line else None)


def executed_banner(commit: str, date: str) -> str:
    """The first cell of an executed copy: which run it shows."""
    return (f"> **Outputs of a full-size run on a 2-core CPU** at commit `{commit}` on {date}, made by `make executed` "
            "(notebook 00 on SmolLM2-135M-Instruct, the others on the tiny lab; each exercise answered with its "
            "reference answer). The notebook in the repository has no outputs: open it in Colab or Jupyter to run it "
            "yourself.")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="full size (no SDPO_KIT_SMOKE)")
    ap.add_argument("--cold", action="store_true", help="each notebook from an empty warm-start cache of its own")
    ap.add_argument("--model", default=None, help="SDPO_KIT_MODEL for every notebook (default: each one's own)")
    ap.add_argument("paths", nargs="*", help="notebooks to run (default: all)")
    args = parse_args(ap)
    paths = [Path(p).resolve() for p in args.paths] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    os.environ.update(MPLBACKEND="Agg")
    os.environ["SDPO_KIT_SOLUTIONS"] = "1"       # the reference answers load after each exercise (a stub is an error)
    if args.full:
        os.environ.pop("SDPO_KIT_SMOKE", None)
    else:
        os.environ["SDPO_KIT_SMOKE"] = "1"
    if args.model:
        os.environ["SDPO_KIT_MODEL"] = args.model
    else:
        os.environ.pop("SDPO_KIT_MODEL", None)   # each notebook on its own lesson's model
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
    write_results(name, config={"smoke": not args.full, "cold": args.cold, "model": args.model,
                                "env": {"MPLBACKEND": "Agg"}},
                  runs=runs, summary={"total_s": round(total, 1)})


if __name__ == "__main__":
    main()
