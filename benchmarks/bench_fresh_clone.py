"""Wall time of CI on a fresh clone: `git clone`, then `bash .ci/run` (install + `make test`).

    python benchmarks/bench_fresh_clone.py [--keep]

Clones the committed HEAD of this repository into a temporary directory (nothing uncommitted,
no .venv, no warm-start cache), runs `.ci/run` there with the output streamed, and prints how
long the install (`make install`) and the tests (`make test` after it) took. pip's download
cache is the machine's own: on a machine that never installed the pinned set, the install
downloads it (torch's CPU wheel alone is about 200 MB) and takes longer.
The brief's budget: `make test` on a fresh clone within 30 minutes including install.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine, table


def timed(cmd: list[str], cwd: Path) -> float:
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sdpo_kit_clone_"))
    clone = tmp / "sdpo_kit"
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        # the same steps .ci/run takes, split so install and tests are timed apart:
        # .ci/run = `make test`, whose first prerequisite is the install stamp
        t_install = timed(["make", "install"], clone)
        t_test = timed(["bash", ".ci/run"], clone)
        print(f"\nmachine: {machine()}; commit {head}\n")
        print(table(["phase", "wall s"], [["make install (fresh .venv)", t_install],
                                          ["bash .ci/run (ruff, unit tests, notebooks)", t_test],
                                          ["total", t_install + t_test]]))
        print(f"\ntotal: {(t_install + t_test) / 60:.1f} min (budget 30 min)")
    finally:
        if args.keep:
            print(f"clone kept at {clone}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
