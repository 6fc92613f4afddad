"""The code problem set and its loader: chat rows with a ``tests`` column for the ``code`` reward.

    load_code_problems(path=None, *, split="train")   chat rows, ours or a local LiveCodeBench file
    read_code_problems(path=None)                     the file's records as they are
    code_prompt(question, starter_code)               the user message, LiveCodeBench's wording

``path`` None: ``data/code_problems.jsonl``, 40 short problems written for this project, 20 in
each test form (stdin/stdout and call-based, some as LeetCode's ``class Solution``, one with
keyword arguments), 7 to 9 tests each. Their reference solutions do not ship (a file in the
package is a file a sandboxed program might find): they live in the repository's
``tests/data/code_problem_references.json``, keyed by ``problem_id``, where the tests run them.
A path: JSON lines (or one JSON list) of records in either form, told apart by their keys:

    ours           problem_id, title, difficulty, question, starter_code, tests (a list)
    LiveCodeBench  question_id, question_title, question_content, difficulty, platform, starter_code,
                   public_test_cases and private_test_cases (JSON text of [{"input", "output",
                   "testtype": "stdin" | "functional"}], the private ones possibly compressed as in
                   code_generation_lite), metadata (JSON text; "func_name" for functional tests)

A row: ``{"prompt": [{"role": "user", "content": ...}], "tests": JSON text, "problem_id", "title",
"difficulty", "form" ("stdin" | "call"), "fn_name", "n_tests", "split", "source"}``. ``split``
"train": ``tests`` holds ``split_tests(tests, test_fraction, seed)[0]``, the deterministic half
the reward sees; "eval": all of them (``n_tests`` is always the problem's total). As the SDPO
authors did, the split is by tests, not by problems: both splits hold the same problems, and
evaluation checks that a program passes tests the reward never showed. Score training rows with
the ``code`` reward as they are (its ``test_fraction`` defaults to 1: the half is already here).

Left out on purpose: downloading (save a dataset to a local file first, e.g.
``datasets.load_dataset(...)["test"].to_json(path)``), held-out problems, languages but Python.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from pathlib import Path

from sdpo_kit.sandbox.runner import parse_tests, split_tests

PROBLEMS_PATH = Path(__file__).with_name("data") / "code_problems.jsonl"
SPLITS = ("train", "eval")
# LiveCodeBench's generic prompt (lcb_runner/prompts/code_generation.py), as one user message
WITH_STARTER = ("You will use the following starter code to write the solution to the problem and enclose your "
                "code within delimiters.")
WITHOUT_STARTER = ("Read the inputs from stdin solve the problem and write the answer to stdout (do not directly "
                   "test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when the "
                   "python program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.")


def code_prompt(question: str, starter_code: str = "") -> str:
    """The user message for one problem: the question, the format (starter code, or stdin), the ask."""
    if starter_code:
        fmt = f"{WITH_STARTER}\n\n```python\n{starter_code.rstrip()}\n```"
    else:
        fmt = f"{WITHOUT_STARTER}\n\n```python\n# YOUR CODE HERE\n```"
    return f"### Question\n\n{question.strip()}\n\n### Format\n\n{fmt}\n\n### Answer (use the provided format with backticks)\n"


def read_code_problems(path: str | Path | None = None) -> list[dict]:
    """The records of ``path`` (default: the shipped problems) as they are in the file."""
    text = Path(path or PROBLEMS_PATH).read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class NoObjectsUnpickler(pickle.Unpickler):
    """code_generation_lite pickles a plain string; anything that names a class or function is refused
    (a pickle that imports is a program, and test files are data)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a test-case pickle holds only plain data")


def lcb_test_cases(text) -> list[dict]:
    """A LiveCodeBench test-case field: a list, JSON text, or base64 of zlib of a pickled JSON string."""
    if isinstance(text, list) or not text:
        return list(text or [])
    try:
        return json.loads(text)
    except ValueError:
        raw = NoObjectsUnpickler(io.BytesIO(zlib.decompress(base64.b64decode(text)))).load()
        return json.loads(raw) if isinstance(raw, (str, bytes)) else raw


def from_lcb(record: dict) -> dict:
    """A LiveCodeBench record in our form (no reference: LiveCodeBench ships none)."""
    meta = record.get("metadata") or {}
    meta = json.loads(meta) if isinstance(meta, str) else meta
    tests = []
    for case in lcb_test_cases(record.get("public_test_cases")) + lcb_test_cases(record.get("private_test_cases")):
        if case.get("testtype") == "functional":
            if not meta.get("func_name"):
                raise ValueError(f"{record.get('question_id')}: functional tests but no metadata.func_name")
            tests.append({"fn_name": meta["func_name"], "input": case["input"], "output": case["output"]})
        else:
            tests.append({"input": case["input"], "output": case["output"]})
    return {"problem_id": str(record.get("question_id", "")), "title": record.get("question_title", ""),
            "difficulty": record.get("difficulty", ""), "question": record["question_content"],
            "starter_code": record.get("starter_code") or "", "tests": tests,
            "source": f"livecodebench/{record.get('platform', '')}".rstrip("/")}


def load_code_problems(path: str | Path | None = None, *, split: str = "train", test_fraction: float = 0.5,
                       seed: int = 0) -> list[dict]:
    """Chat rows for the ``code`` reward, one per problem, in file order (see the module docstring).
    ``split="train"``: ``tests`` is the reward's deterministic half; ``"eval"``: every test."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    rows = []
    for i, record in enumerate(read_code_problems(path)):
        problem = from_lcb(record) if "question_content" in record else record
        try:
            tests = parse_tests(problem["tests"])
        except ValueError as e:
            raise ValueError(f"problem {problem.get('problem_id') or i}: {e}") from None
        shown = split_tests(tests, test_fraction, seed)[0] if split == "train" else tests
        fn_names = {t["fn_name"] for t in tests if "fn_name" in t}
        rows.append({
            "prompt": [{"role": "user", "content": code_prompt(problem["question"], problem.get("starter_code", ""))}],
            "tests": json.dumps(shown),
            "problem_id": str(problem.get("problem_id") or i),
            "title": problem.get("title", ""),
            "difficulty": problem.get("difficulty", ""),
            "form": "call" if fn_names else "stdin",
            "fn_name": next(iter(fn_names), None),
            "n_tests": len(tests),
            "split": split,
            "source": problem.get("source", "sdpo_kit"),
        })
    return rows
