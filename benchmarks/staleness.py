"""Whether a results file still measures the code at HEAD: what fails ``make test``, and what only warns.

A results file (``benchmarks/results/<name>.json``, written by ``_common.write_results``) names the
commit it was made at and the files it measures. Two kinds of finding, kept apart on purpose:

* ``provenance_problems``: the numbers cannot be trusted at all. The file was made from a tree with
  uncommitted changes (``+dirty`` or ``+changes`` in a commit), names no measured files, names no
  commit, or names a commit this repository does not have. ``tests/test_report.py`` fails on these.
* ``changed_since``: the numbers are stale. A file they measure changed in a commit after theirs.
  Only code counts: a notebook whose code cells are the same, or a Python file whose only changes
  are docstrings and comments (``python_code``), has not changed. A stale result is still rendered,
  and every block that shows it says so on its provenance line (``stale_note``: "measured at <commit>;
  changed since: <files>"); ``report.py --check`` and ``--stale`` list the stale files and
  ``make bench-stale`` re-measures them. ``make test`` does not fail on staleness alone.

A number inside a sentence (a report field) is not marked: a note in the middle of a sentence would
break it. The block a field's results file renders, ``report.py --check`` and ``make bench-stale``'s
plan say it instead.

Everything here reads committed history, never the working tree: the notes are a function of HEAD,
so a fresh clone renders the same text. After a commit that stales a result, ``report.py`` re-renders
the notes (commit the text, or amend the commit with it: the notes name the results' commit and the
changed files, not HEAD's hash, so amending changes nothing they say). A shallow clone lacks the
history (``shallow``): a commit it does not hold gets no note and is no provenance problem there (it
cannot tell), and ``report.py`` checks its text without the notes and refuses to render.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
NOTE_FILES = 6   # a provenance line names at most this many changed files; --stale lists them all
# the note stale_note writes (a shallow clone compares rendered text without it)
STALE_NOTE = re.compile(r" \*\*Stale\*\*: measured at .*?\(re-measure: `make bench-stale`\)\.")


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


def changed_since(commit: str, measured: list[str] | tuple[str, ...]) -> list[str]:
    """The files under ``measured`` whose code differs between ``commit`` and HEAD ([] for a commit
    with uncommitted changes or one this repository does not hold: ``provenance_problems`` says those)."""
    if not commit or "+" in commit or not measured or not has_commit(commit):
        return []
    return list(_changed_since(commit, tuple(measured), head()))


@functools.lru_cache(maxsize=None)
def _changed_since(commit: str, measured: tuple[str, ...], at: str) -> tuple[str, ...]:
    touched = git("diff", "--name-only", commit, at, "--", *measured).stdout.split()
    return tuple(f for f in touched if not (f.endswith(".ipynb") and same_notebook_code(commit, f, at))
                 and not (f.endswith(".py") and same_python(commit, f, at)))


def stale_files(result: dict) -> dict[str, list[str]]:
    """{commit: the measured files changed since it} for each of ``result``'s commits that is stale."""
    measured = result.get("measures") or []
    out = {c: changed_since(c, measured) for c in commits_of(result)}
    return {c: files for c, files in out.items() if files}


def stale_note(result: dict) -> str:
    """The sentence a stale result's provenance line ends with; "" when it is not stale."""
    stale = stale_files(result)
    if not stale:
        return ""
    files = sorted({f for fs in stale.values() for f in fs})
    shown = ", ".join(f"`{f}`" for f in files[:NOTE_FILES])
    more = f" and {len(files) - NOTE_FILES} more" if len(files) > NOTE_FILES else ""
    return (f" **Stale**: measured at {', '.join(f'`{c}`' for c in stale)}; changed since: {shown}{more} "
            f"(re-measure: `make bench-stale`).")


def stale_reasons(result: dict) -> list[str]:
    """Every finding about ``result``, one line each (with the later commits that changed its files):
    its provenance problems, then its staleness ([] when it is sound and fresh)."""
    name = result.get("benchmark", "?")
    reasons = provenance_problems(result)
    for commit, changed in stale_files(result).items():
        later = git("log", "--format=  %h %s", f"{commit}..HEAD", "--", *changed).stdout.rstrip()
        reasons.append(f"{name}: made at {commit}; since then these files it measures changed: "
                       f"{', '.join(changed)}\n{later}")
    return reasons


def same_notebook_code(commit: str, path: str, at: str = "HEAD") -> bool:
    """Whether notebook ``path`` has the same code cells at ``commit`` and at ``at`` (a markdown edit,
    such as report.py rendering a results block, changes nothing a benchmark measures)."""
    def code(rev):
        shown = git("show", f"{rev}:{path}")
        if shown.returncode:
            return None
        return [c["source"] for c in json.loads(shown.stdout)["cells"] if c["cell_type"] == "code"]
    old = code(commit)
    return old is not None and old == code(at)


def python_code(source: str) -> str | None:
    """The code of a Python source without its docstrings and comments (an AST dump), None when it
    does not parse: what runs, so a docstring edit changes nothing a benchmark measures."""
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


def same_python(commit: str, path: str, at: str = "HEAD") -> bool:
    """Whether ``path`` has the same code (``python_code``) at ``commit`` and at ``at``."""
    old, new = git("show", f"{commit}:{path}"), git("show", f"{at}:{path}")
    if old.returncode or new.returncode:
        return False
    code = python_code(old.stdout)
    return code is not None and code == python_code(new.stdout)


@dataclass
class Finding:
    """One results file and what is wrong with it (``problems`` fail ``make test``; ``stale`` does not)."""
    name: str                                   # the file's stem: what report.MAKERS and the blocks call it
    commits: list[str]
    problems: list[str] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)


def scan(results: Path = RESULTS) -> list[Finding]:
    """A Finding for every results file under ``results`` that has problems or is stale, by name."""
    found = []
    for path in sorted(results.glob("*.json")):
        result = json.loads(path.read_text())
        f = Finding(path.stem, commits_of(result), provenance_problems(result), stale_files(result))
        if f.problems or f.stale:
            found.append(f)
    return found


def describe(f: Finding) -> str:
    """One line for a listing: the file, its commit(s) and the changed files, or its problems."""
    if f.problems:
        return f"{f.name}.json: " + "; ".join(p.split(": ", 1)[-1] for p in f.problems)
    return "; ".join(f"{f.name}.json: measured at {c}; changed since: {', '.join(files)}"
                     for c, files in f.stale.items())
