"""Wall time of CI on a fresh clone: `git clone`, then `make install` and `bash .ci/run` timed apart.

    python tools/bench_fresh_clone.py [--keep]

Clones the committed HEAD of this repository into a temporary directory (nothing uncommitted,
no .venv, no warm-start cache), runs `make install` and then each leg of `.ci/run` (its `make`
lines, in order, with its environment) with the output streamed, and records how long each took,
plus each pytest phase of `make test` as pytest
reports it ("N passed in S s": unit tests, notebooks, the trl 1.15 venv's tests). pip's
download cache is the machine's own: on a machine that never installed the pinned set, the
install downloads it (torch's CPU wheel alone is about 200 MB) and takes longer. The target:
`make test` on a fresh clone under 20 minutes. Writes ``benchmarks/results/fresh_clone.json``.
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


def timed(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, str]:
    """Run ``cmd`` streaming its output; (wall seconds, output)."""
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    # a fresh clone's CI has neither: PYTHONPATH (make bench-stale's) would import another checkout's code,
    # SDPO_KIT_CACHE (exported by this checkout's Makefile) would hand the clone its warm starts
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SDPO_KIT_CACHE")}
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**clean, **(env or {})})
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
        # the same steps .ci/run takes, each timed: its `export` line, then its `make LEG` lines in order
        # (.ci/run must hold nothing else, so the legs' sum is the CI run; `make test`'s first prerequisite
        # is the install stamp, so `make install` first times the install apart)
        ci = (clone / ".ci" / "run").read_text()
        legs = re.findall(r"^make (\S+)$", ci, flags=re.M)
        other = [ln for ln in ci.splitlines() if ln.strip() and not ln.startswith(("#", "make ", "set ", "cd ", "export "))]
        if other:
            raise SystemExit(f".ci/run has steps this benchmark does not time: {other}")
        env = dict(re.findall(r"(\w+)=(\S+)", "\n".join(re.findall(r"^export (.*)$", ci, flags=re.M))))
        t_install, _ = timed(["make", "install"], clone)
        leg_s, out = {}, ""
        for leg in legs:
            leg_s[leg], text = timed(["make", leg], clone, env)
            out += text
        t_test = sum(leg_s.values())
        phases = [{"tests": int(n), "seconds": float(s)} for n, s in PASSED.findall(out)]
        docs = re.search(r"Documentation built in ([0-9.]+) seconds", out)
        print(f"\nmachine: {machine()}; commit {head}\n")
        print(table(["phase", "wall s"], [["make install (fresh .venv)", t_install],
                                          *[[f"make {leg}", t] for leg, t in leg_s.items()],
                                          ["total", t_install + t_test]]))
        print("pytest phases:", ", ".join(f"{p['tests']} passed in {p['seconds']} s" for p in phases))
        print(f"\ntotal: {(t_install + t_test) / 60:.1f} min")
        write_results("fresh_clone", config={"cloned_commit": head},
                      runs=[{"install_s": t_install, "ci_run_s": t_test, "pytest_phases": phases, "ci_legs": legs, "leg_s": leg_s,
                             "docs_build_s": float(docs.group(1)) if docs else None}],
                      summary={"install_s": t_install, "ci_run_s": t_test, "total_s": t_install + t_test})
    finally:
        if args.keep:
            print(f"clone kept at {clone}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
