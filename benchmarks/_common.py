"""Shared helpers for the benchmark scripts: run a config in-process, print tables, save results.

Every script writes ``benchmarks/results/<name>.json``: the command that made it, the date, the
machine, the git commit, the config, the raw per-run figures and the summary. ``reports/render.py``
renders the README's tables from those files, so every number in the README comes from one.
``name`` is the benchmark's own (it picks what the file measures); a script's ``--out FILE`` only
says where to write (``results_path``). A write that fails for any reason (a bad path, a dirty tree
found at the end, an unknown name) first saves the runs to ``benchmarks/results/unsaved/`` (ignored
by git; the system's temporary folder if that fails too) and says where, then raises: a benchmark
never loses its runs to a write error.

Numbers come from clean commits: a script refuses to start, and ``write_results`` to write, while
``sdpo_kit/``, ``configs/``, ``benchmarks/`` (results aside) or ``notebooks/`` have uncommitted changes.
``--allow-dirty`` (any script) runs anyway and stamps the commit ``<sha>+dirty:<hash of the diff>``.
Each results file names the files it measures (its rooms in ``experiments.py``) and carries a behaviour fingerprint
(``fingerprint.py``: a short replay of what it measured, taken as it is written); when ``make bench-check``
replays it differently the results are stale: ``reports/render.py`` marks their blocks and lists them, ``make
bench-stale`` re-measures them (``reports/staleness.py``; ``make test`` fails only on a dirty tree or missing
provenance).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
UNSAVED = RESULTS / "unsaved"   # runs whose results file could not be written (ignored by git)


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
            f"python {sys.version.split()[0]}, torch threads {torch.get_num_threads()}")


def cpu_name() -> str | None:
    """The CPU's model name and family (``/proc/cpuinfo``), e.g. ``AMD EPYC, family 26``; None where it cannot
    tell. Machines here differ about 2x in speed and in their rounding, so a results file names its CPU."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().splitlines()[:30] if ":" in line)
    except OSError:
        return platform.processor() or None
    info = {k.strip(): v.strip() for k, v in info.items()}
    name = info.get("model name") or info.get("vendor_id")
    return f"{name}, family {info['cpu family']}" if name and "cpu family" in info else name


def machine_info() -> dict:
    import transformers
    import trl

    return {"arch": platform.machine(), "cpu": cpu_name(), "cores": os.cpu_count(), "python": sys.version.split()[0],
            "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


WATCHED = ["sdpo_kit", "configs", "benchmarks", "tools", "notebooks"]   # a dirty tree here refuses to write results

ALLOW_DIRTY = "--allow-dirty" in sys.argv
if ALLOW_DIRTY:  # taken out before the script's own argparse sees it
    sys.argv.remove("--allow-dirty")


class DirtyTree(RuntimeError):
    """Results asked for from a working tree whose measured code is not committed."""


def dirty_diff() -> str:
    """The uncommitted diff (tracked files and untracked, not ignored, ones) under ``WATCHED``,
    results files aside; "" for a clean tree."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout
    spec = [*WATCHED, ":(exclude)benchmarks/results"]
    untracked = git("ls-files", "--others", "--exclude-standard", "--", *spec)
    return git("diff", "HEAD", "--", *spec) + "".join(
        f"\nuntracked {f}\n" + (ROOT / f).read_text(errors="replace") for f in untracked.split())


def git_commit() -> str:
    """HEAD's short sha; ``+dirty:<sha256 of the diff, 12 hex>`` with --allow-dirty on a dirty tree."""
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    diff = dirty_diff()
    if not diff:
        return out.stdout.strip()
    return out.stdout.strip() + "+dirty:" + hashlib.sha256(diff.encode()).hexdigest()[:12]


def require_clean_tree() -> None:
    """DirtyTree (naming the files) unless the measured code is committed or --allow-dirty was given."""
    if ALLOW_DIRTY:
        return
    if dirty_diff():
        files = subprocess.run(["git", "status", "--porcelain", "--", *WATCHED, ":(exclude)benchmarks/results"],
                               cwd=ROOT, capture_output=True, text=True).stdout.rstrip()
        raise DirtyTree("uncommitted changes to the code a benchmark measures; commit them first (numbers come from "
                        "clean commits), or pass --allow-dirty to stamp the diff's hash into the results:\n" + files)


def parse_args(ap, argv=None):
    """A benchmark's arguments (``ap.parse_args(argv)``), then ``require_clean_tree()``: a script fails on a dirty
    tree before an hour of training, not after it, and ``--help`` answers on any tree."""
    args = ap.parse_args(argv)
    require_clean_tree()
    return args


def _benchmark_file(path) -> str | None:
    """``path`` relative to the repository when it is a file under ``benchmarks/`` or ``tools/``, else None (a module
    whose ``__file__`` is not a real path, as some of torch's are, is none of ours)."""
    try:
        p = Path(path).resolve()
        rel = p.relative_to(ROOT).as_posix()
    except (TypeError, ValueError):
        return None
    return rel if rel.startswith(("benchmarks/", "tools/")) and p.is_file() else None


def measures(name: str) -> list[str]:
    """The files a results file ``name`` measures: its rooms (``experiments.py``), its script, and the
    benchmark modules the script imported (``bench_sdpo_lab_signal.py`` runs ``lab.py``'s code)."""
    from experiments import ROOMS, experiment

    rooms = ROOMS[experiment(name).rooms]
    files = [_benchmark_file(sys.argv[0])] + [_benchmark_file(getattr(m, "__file__", None))
                                              for m in list(sys.modules.values())]
    return sorted(set(rooms) | {f for f in files if f})


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def table(headers: list[str], rows: list[list]) -> str:
    """A GitHub-markdown table."""
    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def command() -> str:
    """How this script was run, as one would type it from the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    return " ".join(["python", str(script), *sys.argv[1:]])


def results_path(name: str, out: str | os.PathLike | None = None) -> Path:
    """Where ``write_results`` writes: ``benchmarks/results/<name>.json``, or ``out`` (a script's ``--out``):
    an absolute path as given, a bare file name (no folder) in ``benchmarks/results/`` (so
    ``--out sdpo_lab_ablations.json`` is a results file ``reports/render.py`` reads), any other relative path
    from the current directory, as a shell would read it."""
    if out is None:
        return RESULTS / f"{name}.json"
    out = Path(out).expanduser()
    if not out.is_absolute() and out.parent == Path("."):
        return RESULTS / out
    return out.resolve()


def out_help(name: str) -> str:
    """The help of a script's ``--out``."""
    return (f"where to write the results, any path (default benchmarks/results/{name}.json; a bare file name "
            "goes there too, another relative path is from the current directory)")


def save_unsaved(name: str, payload: dict) -> Path | None:
    """``payload`` in ``benchmarks/results/unsaved/unsaved-<name>-<time>-<pid>.json``, else in the system's temporary
    folder; the path, or None when neither could be written."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for folder in (UNSAVED, Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"unsaved-{name}-{stamp}-{os.getpid()}.json"
            # default=repr: a run is never lost to a value json cannot write
            path.write_text(json.dumps(payload, indent=1, default=repr) + "\n")
            return path
        except Exception:  # any folder that takes the file will do
            continue
    return None


def fingerprint_of(stem: str, name: str) -> dict:
    """The behaviour fingerprint results file ``stem`` carries (``fingerprint.py``), replayed now, here;
    a file elsewhere (``--out /tmp/x.json``) carries its benchmark ``name``'s."""
    import fingerprint

    stem = stem if stem in fingerprint.FINGERPRINTS else name
    if stem not in fingerprint.FINGERPRINTS:
        raise KeyError(f"results file {stem!r} has no replay: declare it in benchmarks/experiments.py")
    print(f"fingerprint of {stem}: replaying {', '.join(fingerprint.needed([stem]))}", flush=True)
    try:
        values = fingerprint.run_child(fingerprint.needed([stem]), ROOT)
    except RuntimeError as e:   # the results are still written: a fingerprint that could not run reads as stale
        values = {n: {"error": str(e)} for n in fingerprint.needed([stem])}
    return {"commit": git_commit(), "replays": fingerprint.fingerprint_for(stem, values)}


def write_results(name: str, *, config: dict, runs: list, summary: dict, out: str | os.PathLike | None = None,
                  extra: dict | None = None) -> Path:
    """``benchmarks/results/<name>.json`` (or ``results_path(name, out)``) with everything a reader needs
    to trust the numbers; ``name`` is the benchmark's own and gives the provenance (``measures``), ``out``
    only the path; ``extra``: more top-level keys.

    Refuses (DirtyTree) while the measured code has uncommitted changes, unless --allow-dirty. Whatever
    fails, the runs are saved first (``save_unsaved``, the path printed) and then the error is raised."""
    head = {"benchmark": name}
    body = {"config": config, "runs": runs, "summary": summary, **(extra or {})}
    try:
        head.update(command=command() + (" --allow-dirty" if ALLOW_DIRTY else ""), date=dt.date.today().isoformat())
        path = results_path(name, out)
        require_clean_tree()
        payload = {**head, "commit": git_commit(), "measures": measures(name), "machine": machine_info(), **body,
                   "fingerprint": fingerprint_of(path.stem, name)}
        text = json.dumps(payload, indent=1) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")   # a crash mid-write leaves no half results file
        part.write_text(text)
        os.replace(part, path)
    except BaseException as err:   # Ctrl-C during the replay too: the runs are saved first
        saved = save_unsaved(name, {**head, **body, "error": "".join(traceback.format_exception_only(err)).strip()})
        bar = "!" * 100
        print(f"\n{bar}\nCOULD NOT WRITE THE RESULTS of {name}: {err!r}\n"
              + (f"the runs are saved in {saved}\n" if saved else "and no fallback file could be written either\n")
              + bar, file=sys.stderr, flush=True)
        raise
    (UNSAVED / f"{path.stem}.runs.jsonl").unlink(missing_ok=True)   # runner.py's journal: its runs are in the file
    try:
        shown = path.relative_to(ROOT)
    except ValueError:
        shown = path
    print(f"\nwrote {shown}; its tables, as the pages show them: python reports/render.py --show {shown}")
    return path


def run_config(path: str, overrides: dict) -> dict:
    """Train ``path`` with dotted-key ``overrides`` in this process; the CLI's summary dict."""
    from sdpo_kit.registry import load_config
    from sdpo_kit.training import train

    cfg = load_config(ROOT / path, overrides)
    return train(cfg, config_path=path)


def parse_pins(items: list[str], methods) -> dict[str, float]:
    """``--lr METHOD=LR ...`` as ``{method: lr}``; SystemExit on a method not in ``methods`` or no rate."""
    pinned = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in methods or not value:
            raise SystemExit(f"--lr takes METHOD=LR with METHOD from {methods}, got {item!r}")
        pinned[name] = float(value)
    return pinned
