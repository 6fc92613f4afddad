"""Wall time of every notebook in smoke mode, as CI runs them.

    python benchmarks/bench_notebooks.py [notebooks/*.ipynb]

Executes each notebook with nbclient in a fresh kernel with SDPO_KIT_SMOKE=1 and MPLBACKEND=Agg
and prints a table and the total (the brief's budget: 15 minutes on 2 CPU cores).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from _common import ROOT, machine, table
from nbclient import NotebookClient


def main():
    paths = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    os.environ.update(SDPO_KIT_SMOKE="1", MPLBACKEND="Agg")
    rows, total = [], 0.0
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(p.parent)}}).execute()
        dt = time.perf_counter() - t0
        total += dt
        rows.append([p.name, dt])
        print(f"{p.name}: {dt:.1f} s", flush=True)
    print(f"\nmachine: {machine()}\n")
    print(table(["notebook (smoke)", "wall s"], rows + [["total", total]]))


if __name__ == "__main__":
    main()
