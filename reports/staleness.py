"""Whether a results file still measures what the code does: what fails ``make test``, and what only warns.

A results file (``benchmarks/results/<name>.json``, written by ``_common.write_results``) names the
commit it was made at, the files it measures and its behaviour fingerprint (``benchmarks/fingerprint.py``: a short
deterministic replay of what it measured, taken when it was measured). Two kinds of finding, kept apart
on purpose:

* ``provenance_problems``: the numbers cannot be trusted at all. The file was made from a tree with
  uncommitted changes (``+dirty`` or ``+changes`` in a commit), names no measured files, names no
  commit, or names a commit this repository does not have. ``tests/test_report.py`` fails on these.
* ``moved``: the numbers are stale. The last ``make bench-check`` (``benchmarks/results/check/
  last_check.json``, committed) replayed the file's fingerprint and got something else, or the file
  carries no fingerprint. A comment, a docstring or a refactor that keeps behaviour marks nothing. A
  stale result is still rendered, and every block that shows it says so on its provenance line
  (``stale_note``); ``render.py --check`` and ``--stale`` list the stale files and ``make bench-stale``
  re-measures them. ``make test`` does not fail on staleness alone.

A number inside a sentence (a report field) is not marked: a note in the middle of a sentence would
break it. The block a field's results file renders, ``render.py --check`` and ``make bench-stale``'s
plan say it instead.

The notes read committed files only (the results and the last check), never the working tree or its
history, so a fresh clone, a shallow one included, renders the same text.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fingerprint import LAST_CHECK, file_move, python_code  # noqa: F401  (python_code: read from here by the tests)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# the note stale_note writes
STALE_NOTE = re.compile(r" \*\*Stale\*\*: .*?\(re-measure: `make bench-stale`\)\.")


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


@functools.lru_cache(maxsize=None)
def shallow() -> bool:
    """Whether this checkout is a shallow clone (its early history, and the results' commits, missing)."""
    return git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"


def head() -> str:
    return git("rev-parse", "HEAD").stdout.strip()


@functools.lru_cache(maxsize=None)
def has_commit(commit: str) -> bool:
    return not git("cat-file", "-e", f"{commit}^{{commit}}").returncode


def commits_of(result: dict) -> list[str]:
    """Every commit a results file names: its own and its runs' (a notebook run keeps the commit it ran at)."""
    runs = result.get("runs")
    runs = runs if isinstance(runs, list) else []
    found = {result.get("commit")} | {r.get("commit") for r in runs if isinstance(r, dict)}
    return sorted(c for c in found if c)


def provenance_problems(result: dict) -> list[str]:
    """Why the numbers of ``result`` cannot be trusted at all ([] when their provenance is sound)."""
    name = result.get("benchmark", "?")
    problems = []
    if not result.get("measures"):
        problems.append(f"{name}: names no measured files (rerun it: _common.write_results records them)")
    if not result.get("commit"):
        problems.append(f"{name}: names no commit (rerun it: _common.write_results records it)")
    for commit in commits_of(result):
        if "+" in commit:
            problems.append(f"{name}: made from a tree with uncommitted changes ({commit})")
        elif not has_commit(commit) and not shallow():   # a shallow clone cannot tell
            problems.append(f"{name}: commit {commit} is not in this repository")
    return problems


@functools.lru_cache(maxsize=None)
def last_check() -> dict:
    """What the last ``make bench-check`` replayed (``fingerprint.LAST_CHECK``, committed); {} before any."""
    return json.loads(LAST_CHECK.read_text()) if LAST_CHECK.exists() else {}


@functools.lru_cache(maxsize=None)
def newer_than(commit: str, than: str) -> bool:
    """Whether ``commit`` came after ``than``: it is neither ``than`` nor one of its ancestors, both being in
    this history; False when it cannot tell."""
    commit, than = commit.split("+")[0], than.split("+")[0]
    if not (commit and than and has_commit(commit) and has_commit(than)):
        return False
    return git("merge-base", "--is-ancestor", commit, than).returncode == 1


def moved(result: dict, check: dict | None = None) -> str | None:
    """Why ``result``'s numbers no longer describe the code: a replay of its fingerprint in ``check`` (the
    last check's, by default) differs from the one it carries, or from its commit replayed on the check's
    machine where the check re-based it (``fingerprint.file_move``: where, first), or it carries none. None
    when every replay the check ran matches; a replay the check did not run, or a fingerprint taken after
    the check (a result re-measured since), says nothing."""
    fp = result.get("fingerprint")
    if not isinstance(fp, dict) or not fp.get("replays"):
        return "it carries no behaviour fingerprint"
    check = last_check() if check is None else check
    if newer_than(fp.get("commit", ""), check.get("commit", "")):
        return None
    move = file_move(fp, check)
    if move is None:
        return None
    name, kind, detail = move
    return {"not_run": f"its replay `{name}` could not run at `{fp.get('commit', '?')}`",
            "fails": f"its replay `{name}` fails at `{check.get('commit', '?')}`",
            "differs": f"its replay differs at `{check.get('commit', '?')}` ({detail})"}[kind]


def stale_note(result: dict) -> str:
    """The sentence a stale result's provenance line ends with; "" when it is not stale."""
    why = moved(result)
    return f" **Stale**: {why} (re-measure: `make bench-stale`)." if why else ""


def stale_reasons(result: dict) -> list[str]:
    """Every finding about ``result``, one line each: its provenance problems, then why it is stale
    ([] when it is sound and fresh)."""
    why = moved(result)
    return provenance_problems(result) + ([f"{result.get('benchmark', '?')}: {why}"] if why else [])


@dataclass
class Finding:
    """One results file and what is wrong with it (``problems`` fail ``make test``; ``stale`` does not)."""
    name: str                                   # the file's stem: what report.MAKERS and the blocks call it
    commits: list[str]
    problems: list[str] = field(default_factory=list)
    stale: str | None = None                    # why it is stale (``moved``), None when it is not


def scan(results: Path = RESULTS) -> list[Finding]:
    """A Finding for every results file under ``results`` that has problems or is stale, by name."""
    found = []
    for path in sorted(results.glob("*.json")):
        result = json.loads(path.read_text())
        f = Finding(path.stem, commits_of(result), provenance_problems(result), moved(result))
        if f.problems or f.stale:
            found.append(f)
    return found


def describe(f: Finding) -> str:
    """One line for a listing: the file, its commit(s) and why it is stale, or its problems."""
    if f.problems:
        return f"{f.name}.json: " + "; ".join(p.split(": ", 1)[-1] for p in f.problems)
    return f"{f.name}.json: measured at {', '.join(f.commits)}; {f.stale}"
