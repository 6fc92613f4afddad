"""The one runner of a benchmark's training runs: in order, or on parallel processes, and resumable.

    runs = run_all(run, specs, jobs=args.jobs, show=print_line, journal=journal_path("sdpo_lab", args.resume))

``run(spec)`` trains one run and returns its record (a dict); ``specs`` are the runs to make (tuples of
plain values: a method, a seed, a learning rate, ...). ``jobs`` > 1 runs them on that many fresh
processes (``spawn``: one torch thread each, the tiny lab's choice; warm starts are cached first by the
caller), the records coming back in the order of ``specs``. With a ``journal`` each finished record is
appended to ``benchmarks/results/unsaved/<name>.runs.jsonl`` as it finishes; ``--resume`` reads it back
and runs only the specs it lacks, so a run cut short (a Ctrl-C, a machine that went away) loses only the
runs in flight. ``write_results`` removes the journal once the file is written.

``add_runner_args(ap, name)`` gives a script the runner's options: ``--jobs``, ``--resume`` and ``--out``.
"""

from __future__ import annotations

import json
from pathlib import Path

from _common import UNSAVED, command, git_commit, out_help


def add_runner_args(ap, name: str) -> None:
    """``--jobs``, ``--resume`` and ``--out`` on the script's ArgumentParser ``ap`` (results file ``name``)."""
    ap.add_argument("--jobs", type=int, default=1, help="training runs at once, one process each (one torch thread)")
    ap.add_argument("--resume", action="store_true", help="keep the runs a cut-short invocation of the same "
                    "command finished (benchmarks/results/unsaved/<results file>.runs.jsonl) and make only the others")
    ap.add_argument("--out", default=None, help=out_help(name))


def journal_path(name: str, resume: bool) -> Path:
    """Where ``name``'s finished runs are journaled. A fresh invocation (no ``resume``) starts it anew, headed by
    the commit and the command; ``resume`` keeps it only when both are this invocation's (``--resume`` aside),
    else SystemExit: runs of other code or other arguments are never mixed into one results file."""
    path = UNSAVED / f"{name}.runs.jsonl"
    head = {"journal": {"commit": git_commit(), "command": command().replace(" --resume", "")}}
    if resume and path.exists():
        first = path.read_text().split("\n", 1)[0]
        try:
            found = json.loads(first)
        except json.JSONDecodeError:
            found = {}
        if found != head:
            raise SystemExit(f"--resume: {path} holds runs of {found.get('journal', 'an unknown invocation')}, not of "
                             f"{head['journal']}; run without --resume to start afresh")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(head) + "\n")
    return path


def spec_key(spec) -> str:
    """A spec as the journal stores it (JSON; tuples and lists alike)."""
    return json.dumps(list(spec) if isinstance(spec, tuple | list) else spec, default=repr)


def read_journal(path: Path | None) -> dict[str, dict]:
    """The finished records in ``path`` by spec key; a line cut off by a crash is skipped."""
    done = {}
    if path is not None and path.exists():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "spec" in entry:   # the header line says whose runs these are (journal_path)
                done[spec_key(entry["spec"])] = entry["run"]
    return done


def _record(journal: Path | None, spec, run: dict) -> None:
    if journal is not None:
        journal.parent.mkdir(parents=True, exist_ok=True)
        cut = journal.exists() and not journal.read_bytes().endswith(b"\n") and journal.stat().st_size > 0
        entry = {"spec": list(spec) if isinstance(spec, tuple | list) else spec, "run": run}
        with journal.open("a") as f:   # a line a crash left unfinished stays a line of its own
            f.write(("\n" if cut else "") + json.dumps(entry, default=repr) + "\n")


def run_all(run, specs: list, *, jobs: int = 1, show=None, journal: Path | None = None) -> list[dict]:
    """``run(spec)`` for each of ``specs``, the records in the order of ``specs``: in this process when ``jobs``
    <= 1, else on ``jobs`` spawned processes (``run`` must be a module-level function). ``show(record)`` is
    called as each finishes; records the ``journal`` already holds are taken from it, not run again."""
    done = read_journal(journal)
    results = [done.get(spec_key(s)) for s in specs]
    todo = [i for i, r in enumerate(results) if r is None]
    if len(todo) < len(specs):
        print(f"resumed: {len(specs) - len(todo)} of {len(specs)} runs from {journal}", flush=True)

    def finish(i, record):
        results[i] = record
        _record(journal, specs[i], record)
        if show is not None:
            show(record)

    if jobs <= 1:
        for i in todo:
            finish(i, run(specs[i]))
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    failed = []
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(run, specs[i]): i for i in todo}
        for fut in as_completed(futures):   # a run that fails does not lose the others: each is journaled
            try:
                finish(futures[fut], fut.result())
            except Exception as e:
                failed.append((specs[futures[fut]], e))
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(todo)} runs failed (the others are journaled: --resume keeps them); "
                           f"first: {failed[0][0]}: {failed[0][1]!r}") from failed[0][1]
    return results
