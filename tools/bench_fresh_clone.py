"""Wall time of CI on a fresh clone: `git clone`, then `make install` and `bash .ci/run` timed apart.

    python tools/bench_fresh_clone.py [--keep]

Clones the committed HEAD of this repository into a temporary directory (nothing uncommitted,
no .venv, no warm-start cache), runs `make install`, then `bash .ci/run` itself with the output
streamed, and records how long each took, each leg's time as .ci/run prints it ("ci leg NAME:
S s"; legs that run side by side overlap, so their sum can exceed the run's wall time), and each
pytest phase as pytest reports it ("N passed in S s": unit tests, notebooks, the trl 1.15 venv's
tests, ...). pip's download cache is the machine's own: on a machine that never installed the
pinned set, the install downloads it (torch's CPU wheel alone is about 200 MB) and takes longer.
The targets: `make test` within 10 minutes, `make test-real` within 10, `bash .ci/run` within 25.
Writes ``benchmarks/results/fresh_clone.json``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the results' machinery
from _common import ROOT, machine, parse_args, table, write_results  # noqa: E402

PASSED = re.compile(r"(\d+) passed(?:, \d+ \w+)* in ([\d.]+)s")
LEG = re.compile(r"^ci leg (\S+): ([\d.]+) s$", re.M)


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    """Run ``cmd`` streaming its output; (wall seconds, output)."""
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    # a fresh clone's CI has neither: PYTHONPATH (make bench-stale's) would import another checkout's code,
    # the machine's model cache (SDPO_KIT_CACHE, else ~/.cache/sdpo_kit) would hand the clone its warm starts
    # and the unpacked real model: the clone gets an empty cache of its own
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    clean["SDPO_KIT_CACHE"] = str(cwd / ".cache" / "sdpo_kit")
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=clean)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    if proc.wait():
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return time.perf_counter() - t0, "".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = parse_args(ap)
    tmp = Path(tempfile.mkdtemp(prefix="sdpo_kit_clone_"))
    clone = tmp / "sdpo_kit"
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                              text=True, check=True).stdout.strip()
        # `make test`'s first prerequisite is the install stamp: `make install` first times the install apart
        ci = (clone / ".ci" / "run").read_text()
        legs = re.findall(r"^leg (\S+)", ci, flags=re.M)
        if not legs:
            raise SystemExit(".ci/run names no leg (lines `leg NAME`): nothing to time apart")
        t_install, _ = timed(["make", "install"], clone)
        t_ci, out = timed(["bash", ".ci/run"], clone)
        printed = {name: float(s) for name, s in LEG.findall(out)}
        if set(printed) != set(legs):
            raise SystemExit(f".ci/run's legs {legs} but it printed times for {sorted(printed)}")
        leg_s = {leg: printed[leg] for leg in legs}
        phases = [{"tests": int(n), "seconds": float(s)} for n, s in PASSED.findall(out)]
        docs = re.search(r"Documentation built in ([0-9.]+) seconds", out)
        print(f"\nmachine: {machine()}; commit {head}\n")
        print(table(["phase", "wall s"], [["make install (fresh .venv)", t_install],
                                          *[[f"make {leg}", t] for leg, t in leg_s.items()],
                                          ["bash .ci/run (legs side by side overlap)", t_ci],
                                          ["total", t_install + t_ci]]))
        print("pytest phases:", ", ".join(f"{p['tests']} passed in {p['seconds']} s" for p in phases))
        print(f"\ntotal: {(t_install + t_ci) / 60:.1f} min")
        write_results("fresh_clone", config={"cloned_commit": head},
                      runs=[{"install_s": t_install, "ci_run_s": t_ci, "pytest_phases": phases, "ci_legs": legs, "leg_s": leg_s,
                             "docs_build_s": float(docs.group(1)) if docs else None}],
                      summary={"install_s": t_install, "ci_run_s": t_ci, "total_s": t_install + t_ci})
    finally:
        if args.keep:
            print(f"clone kept at {clone}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
