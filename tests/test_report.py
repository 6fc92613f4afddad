"""The README's numbers and the notebooks' reference figures are what benchmarks/results/ says.

``benchmarks/report.py`` renders every block between ``<!-- report:NAME -->`` markers from the
results files the benchmark scripts write; a hand-edited number, or a results file committed
without re-rendering, fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402  (benchmarks/report.py)


@pytest.mark.parametrize("path", report.targets(), ids=lambda p: p.name)
def test_rendered_blocks_match_the_results(path):
    old, new = report.render_file(path)
    assert old == new, f"{path.name} is out of date: run python benchmarks/report.py"


def test_every_readme_block_has_its_results():
    """No README block waits for a benchmark that was never run. The fresh-clone block is the
    exception: it times CI on a committed HEAD, so the commit it measures cannot contain it yet."""
    blocks = report.BLOCK.findall((ROOT / "README.md").read_text())
    assert len(blocks) >= 8
    waiting = [name for _, name, body, _ in blocks if "(not measured yet" in body and name != "fresh-clone"]
    assert not waiting, f"run the benchmarks these blocks name, then benchmarks/report.py: {waiting}"


def test_a_block_renders_from_its_results_file_only(tmp_path, monkeypatch):
    """A hand-typed number between markers is replaced by the results file's."""
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    (tmp_path / "lab.json").write_text(
        '{"command": "python benchmarks/bench_lab.py", "date": "2026-01-01", "commit": "abc", '
        '"machine": {"arch": "x86_64", "cores": 2, "torch": "2.13.0", "trl": "1.16.0"}, '
        '"runs": [{"copy_steps": 0, "warm_start_s": 14.7, "heldout_acc": 0.49, "acc_right_hint": 0.41, '
        '"acc_random_hint": 0.115}], "summary": {}}')
    out = report.render_text("x\n<!-- report:lab -->\n| made up | 9.99 |\n<!-- /report:lab -->\ny")
    assert "9.99" not in out and "0.490" in out and "0.115" in out and "commit `abc`" in out
    assert report.render_text("<!-- report:speed -->\n<!-- /report:speed -->").count("not measured yet") == 1


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def stale_reasons(result: dict) -> list[str]:
    """Why a results file cannot be trusted for HEAD: made from a dirty tree, naming no measured
    files, or older than a later commit that changed a file it measures ([] when fresh)."""
    name = result.get("benchmark", "?")
    measured = result.get("measures") or []
    if not measured:
        return [f"{name}: names no measured files (rerun it: _common.write_results records them)"]
    commits = {result.get("commit")} | {r.get("commit") for r in result.get("runs", []) if isinstance(r, dict)}
    reasons = []
    for commit in sorted(c for c in commits if c):
        if "+" in commit:
            reasons.append(f"{name}: made from a tree with uncommitted changes ({commit})")
            continue
        if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode:
            reasons.append(f"{name}: commit {commit} is not in this repository")
            continue
        changed = [f for f in _git("diff", "--name-only", commit, "HEAD", "--", *measured).stdout.split()
                   if not (f.endswith(".ipynb") and _same_code(commit, f))
                   and not (f.endswith(".py") and _same_python(commit, f))]
        if changed:
            later = _git("log", "--format=  %h %s", f"{commit}..HEAD", "--", *changed).stdout.rstrip()
            reasons.append(f"{name}: made at {commit}; since then these files it measures changed: "
                           f"{', '.join(changed)}\n{later}")
    return reasons


def _same_code(commit: str, path: str) -> bool:
    """Whether notebook ``path`` has the same code cells at ``commit`` and in HEAD (a markdown edit,
    such as report.py rendering a results block, changes nothing a benchmark measures)."""
    def code(rev):
        shown = _git("show", f"{rev}:{path}")
        if shown.returncode:
            return None
        return [c["source"] for c in json.loads(shown.stdout)["cells"] if c["cell_type"] == "code"]
    old = code(commit)
    return old is not None and old == code("HEAD")


def python_code(source: str) -> str | None:
    """The code of a Python source without its docstrings and comments (an AST dump), None when it
    does not parse: what runs, so a docstring edit changes nothing a benchmark measures."""
    import ast

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


def _same_python(commit: str, path: str) -> bool:
    """Whether ``path`` has the same code (``python_code``) at ``commit`` and in HEAD."""
    old, new = _git("show", f"{commit}:{path}"), _git("show", f"HEAD:{path}")
    if old.returncode or new.returncode:
        return False
    code = python_code(old.stdout)
    return code is not None and code == python_code(new.stdout)


def test_a_docstring_edit_is_not_a_code_change():
    """``python_code`` ignores docstrings and comments and nothing else: a changed docstring or comment
    is the same code, a changed constant, name or statement is not (so the staleness check still fails)."""
    base = '"""Module."""\nX = 1  # one\n\ndef f(a):\n    """Doc."""\n    return a + X\n'
    assert python_code(base) == python_code(base.replace("Module.", "The module.").replace("# one", "# uno")
                                            .replace("Doc.", "Longer doc."))
    for edit in (("X = 1", "X = 2"), ("a + X", "a - X"), ("def f(a)", "def g(a)"),
                 ('    """Doc."""\n', '    """Doc."""\n    print(a)\n')):
        assert python_code(base) != python_code(base.replace(*edit)), edit
    assert python_code("def (:") is None


def test_a_results_file_measures_the_benchmark_modules_its_script_ran(monkeypatch):
    """The room benchmark runs bench_sdpo_lab.py's training code: a change there stales its results too."""
    import _common
    import bench_sdpo_lab  # noqa: F401  (imported by bench_sdpo_lab_room.py)

    monkeypatch.setattr(sys, "argv", [str(ROOT / "benchmarks" / "bench_sdpo_lab_room.py")])
    measured = _common.measures("sdpo_lab_room")
    assert {"benchmarks/bench_sdpo_lab_room.py", "benchmarks/bench_sdpo_lab.py", "benchmarks/bench_sdpo.py",
            "sdpo_kit/sdpo", "configs/sdpo_lab.yaml"} <= set(measured)
    assert all((ROOT / f).exists() for f in measured), measured
    assert not any(f.startswith("benchmarks/") and "torch" in f for f in measured)


def _shallow() -> bool:
    return _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"


@pytest.mark.skipif(_shallow(), reason="a shallow clone lacks the history the check reads")
@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks" / "results").glob("*.json")), ids=lambda p: p.stem)
def test_results_are_not_older_than_the_code_they_measure(path):
    if path.stem in os.environ.get("SDPO_KIT_MEASURING", "").split(","):
        # bench_fresh_clone.py runs CI on a clone to make this very file: it cannot be fresh there yet
        pytest.skip(f"{path.stem} is the result being measured")
    reasons = stale_reasons(json.loads(path.read_text()))
    assert not reasons, "rerun the benchmark from a clean commit:\n" + "\n".join(reasons)


@pytest.mark.skipif(_shallow(), reason="a shallow clone lacks the history the check reads")
def test_the_staleness_check_can_fail():
    """A result from the repository's first commit measuring the package is stale; one from a dirty
    tree or naming nothing is refused; one at HEAD measuring the package is fresh; a notebook whose
    code cells are unchanged is fresh, one whose code changed is not."""
    first = _git("rev-list", "--max-parents=0", "HEAD").stdout.split()[0][:7]
    head = _git("rev-parse", "--short", "HEAD").stdout.strip()
    assert stale_reasons({"benchmark": "x", "commit": first, "measures": ["sdpo_kit"]})
    assert stale_reasons({"benchmark": "x", "commit": head + "+dirty:abc", "measures": ["sdpo_kit"]})
    assert stale_reasons({"benchmark": "x", "commit": head, "measures": []})
    assert stale_reasons({"benchmark": "x", "commit": head, "measures": ["sdpo_kit"],
                          "runs": [{"commit": first}]})
    assert stale_reasons({"benchmark": "x", "commit": head, "measures": ["sdpo_kit"]}) == []
    nb = "notebooks/02_grpo.ipynb"
    touched = _git("log", "--format=%h", "--", nb).stdout.split()
    assert len(touched) >= 2 and not _same_code(touched[-1], nb)   # the notebook's code when it was first committed
    assert _same_code(head, nb)
