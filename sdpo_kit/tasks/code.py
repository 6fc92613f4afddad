"""The tiny lab's code task: write a one-line program (an expression in ``x``) that the sandbox
runs against hidden test cases, so SDPO meets real code feedback on CPU.

    prompt       "f(1)=5 f(2)=8 f(3)=11 f(x)="     ``terms`` input/output pairs of a hidden f
    answer       "3*x+2"                             the canonical expression, f(x) = a*x + b
    program      def f(x):\\n    return (<first line of the completion>)
    tests        f at ``TEST_INPUTS`` (shown and hidden), run by ``sandbox.batch.run_program_tests``

Functions are affine, ``a`` in 1..10**digits - 1 and ``b`` in 0..10**digits - 1 (90 with one
digit). The held-out split is disjoint by FUNCTION (``problem_key`` is ``(a, b)``): no prompt of
a held-out function, whichever inputs it shows, is trained on. Any expression equal to f on every
test input is right (``2+x*3`` as much as ``3*x+2``). ``feedback`` is the code reward's
LiveCodeBench-style text (input, output, expected of a failing test; the error of a crash) and
never the expression.

Left out on purpose: non-affine functions (the tiny model's budget), multi-line programs, and
the ```python fence (a bare expression: the tiny tokenizer's completions stay a dozen characters).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field

import torch

from sdpo_kit.sandbox.batch import run_programs_many
from sdpo_kit.sandbox.feedback import render_feedback
from sdpo_kit.sandbox.runner import TestOutcome
from sdpo_kit.tasks.base import HINT_TEMPLATE, TASKS
from sdpo_kit.text.answers import completion_text

FN_NAME = "f"
TEST_INPUTS = (0, 1, 4, 7, 10, 13)   # the hidden tests: inside and beyond the shown range
SHOWN_INPUTS = tuple(range(1, 10))   # the prompt shows ``terms`` of these, sorted
ANSWER_RE = re.compile(r"(0|[1-9][0-9]*)\*x\+(0|[1-9][0-9]*)", re.ASCII)   # fullmatch: what Python reads as a*x+b
EMPTY_FEEDBACK = "Your answer is empty: write an expression in x, such as 2*x+1."


def expression(completion) -> str | None:
    """The program a completion writes: its first line, stripped; None when there is none."""
    text = completion_text(completion).strip()
    line = text.split("\n", 1)[0].strip() if text else ""
    return line or None


def program(expr: str | None) -> str | None:
    """``expr`` as the function the tests call (parentheses: ``return (expr)``)."""
    return None if expr is None else f"def {FN_NAME}(x):\n    return ({expr})\n"


def hidden_tests(answer: str) -> list[dict]:
    """Call tests of the canonical answer ``"a*x+b"``: f at every ``TEST_INPUTS`` value. Computed
    in the parent from the two integers, never by running the answer."""
    m = ANSWER_RE.fullmatch(str(answer).strip())
    if m is None:
        raise ValueError(f"answer {answer!r} is not of the form a*x+b")
    a, b = int(m.group(1)), int(m.group(2))
    return [{"fn_name": FN_NAME, "args": [x], "expected": a * x + b} for x in TEST_INPUTS]


@dataclass
class CodeTask:
    """Infer a hidden affine function from ``terms`` examples and write it as an expression."""

    digits: int = 1
    terms: int = 3
    n_eval: int = 60             # held-out rows (several shown-input sets per held-out function)
    n_train: int | None = None   # None: every (function, shown inputs) pair not held out, at most 20,000
    heldout_fraction: float = 0.2  # share of the functions held out
    seed: int = 0
    timeout_s: float = 1.0       # per program: an expression that loops costs one worker this long
    workers: int | None = None
    name: str = field(init=False, default="lab_code")
    answer_column: str = field(init=False, default="answer")

    def __post_init__(self):
        if self.digits < 1 or not 1 <= self.terms <= len(SHOWN_INPUTS):
            raise ValueError(f"digits must be >= 1 and terms in 1..{len(SHOWN_INPUTS)}, got {self.digits}, {self.terms}")

    # --- rows ---------------------------------------------------------------------------
    def functions(self) -> list[tuple[int, int]]:
        hi = 10**self.digits
        return [(a, b) for a in range(1, hi) for b in range(hi)]

    def question(self, fn: tuple[int, int], shown) -> str:
        a, b = fn
        return " ".join(f"f({x})={a * x + b}" for x in shown) + " f(x)="

    def row(self, fn: tuple[int, int], shown) -> dict:
        return {"prompt": [{"role": "user", "content": self.question(fn, shown)}], "answer": f"{fn[0]}*x+{fn[1]}"}

    def problem_key(self, fn: tuple[int, int], shown=None) -> tuple[int, int]:
        """What makes two prompts the same problem: the function, whatever inputs it shows."""
        return fn

    def rows_for(self, fns, n: int, rng: random.Random) -> list[dict]:
        """Up to ``n`` distinct (function, shown inputs) rows, spread round-robin over ``fns``."""
        per_fn = [rng.sample([tuple(sorted(s)) for s in self.shown_sets()], k=len(self.shown_sets())) for _ in fns]
        out = []
        for j in range(len(self.shown_sets())):
            for fn, sets in zip(fns, per_fn):
                if len(out) >= n:
                    return out
                out.append(self.row(fn, sets[j]))
        return out

    def shown_sets(self) -> list[tuple[int, ...]]:
        from itertools import combinations
        return list(combinations(SHOWN_INPUTS, self.terms))

    def splits(self) -> tuple[list[dict], list[dict]]:
        """(train_rows, heldout_rows), deterministic in ``seed``, disjoint by function."""
        fns = self.functions()
        rng = random.Random(self.seed)
        rng.shuffle(fns)
        n_held = max(1, round(len(fns) * self.heldout_fraction))
        if n_held >= len(fns):
            raise ValueError(f"heldout_fraction={self.heldout_fraction} holds out all {len(fns)} functions")
        held, train = fns[:n_held], fns[n_held:]
        n_train = 20_000 if self.n_train is None else self.n_train
        return self.rows_for(train, n_train, rng), self.rows_for(held, self.n_eval, rng)

    # --- scoring ------------------------------------------------------------------------
    def results(self, completions, answers, stats: dict | None = None) -> list:
        """One ``CodeResult`` per completion (one sandboxed child per distinct program)."""
        jobs = [(program(expression(c)), hidden_tests(a)) for c, a in zip(completions, answers)]
        return run_programs_many(jobs, workers=self.workers, stats=stats, timeout_s=self.timeout_s)

    def is_correct(self, completion, answer: str) -> bool:
        """Every test passes when the sandbox runs the completion's expression."""
        return self.results([completion], [answer])[0].score == 1.0

    def reward(self, prompts, completions, answer, **kwargs) -> list[float]:
        """TRL reward signature: 1.0 when every test passes, else 0.0 (the batch deduplicated)."""
        return [r.score for r in self.results(completions, answer)]

    def feedback(self, completion, answer) -> str:
        """The code reward's feedback on the completion's program ("" when right); never the answer."""
        return self.feedback_many([completion], [answer])[0]

    def feedback_many(self, completions, answers) -> list[str]:
        """``feedback`` for many completions, their programs run as one deduplicated batch."""
        return [s["feedback"] for s in self.scored(completions, answers)]

    def scored(self, completions, answers) -> list[dict]:
        """``{"score", "feedback"}`` per completion, the programs run as one deduplicated batch: the
        ``feedback`` reward's rows when the task is ``lab_code`` (SDPO's teacher reads the text)."""
        results = self.results(completions, answers)
        return [{"score": r.score, "feedback": EMPTY_FEEDBACK if expression(c) is None else r.feedback}
                for c, r in zip(completions, results)]

    def near_miss_feedback(self, wrongs: list[str], answers: list[str]) -> list[str]:
        """The sandbox's feedback on expressions of the form ``a*x+b`` (``near_miss``'s, which the
        skill dial writes by the thousand), rendered here: their values are known without running
        them. The same text as ``feedback_many`` (tested); model-written code always runs sandboxed."""
        out = []
        for wrong, answer in zip(wrongs, answers):
            m = ANSWER_RE.fullmatch(wrong)
            if m is None:
                raise ValueError(f"near_miss_feedback takes expressions a*x+b, got {wrong!r}")
            a, b = int(m.group(1)), int(m.group(2))
            outcomes = []
            for i, t in enumerate(hidden_tests(answer)):
                value = a * t["args"][0] + b
                outcomes.append(TestOutcome(i, "passed" if value == t["expected"] else "wrong_answer", t["args"],
                                            json.dumps(t["expected"]), output=json.dumps(value)))
            out.append(render_feedback(outcomes))
        return out

    def near_miss(self, answer: str, rng: random.Random) -> str:
        """A wrong expression of the answer's form (the skill dial's stand-in for a failed
        attempt): the slope or the intercept off by one, or, half the time, any other value."""
        m = ANSWER_RE.fullmatch(answer)
        a, b = int(m.group(1)), int(m.group(2))
        hi = 10**self.digits
        while True:
            if rng.random() < 0.5:
                a2, b2 = (a + rng.choice((-1, 1)), b) if rng.random() < 0.5 else (a, b + rng.choice((-1, 1)))
            else:
                a2, b2 = (rng.randrange(1, hi), b) if rng.random() < 0.5 else (a, rng.randrange(hi))
            if (a2, b2) != (a, b) and 1 <= a2 < hi and 0 <= b2 < hi:
                return f"{a2}*x+{b2}"

    # --- warm start and evaluation ------------------------------------------------------
    def format_answer(self, answer: str) -> str:
        return answer

    def sft_rows(self, rows: list[dict], copy_fraction: float = 0.3, seed: int = 0) -> list[dict]:
        """(prompt, completion) pairs for the warm start, as ``ArithmeticTask.sft_rows``: the task,
        and a ``copy_fraction`` of hinted rows (``HINT_TEMPLATE``) whose hint is half the time
        another function's expression, so copying the context is what the loss rewards."""
        rng = random.Random(seed)
        hi = 10**self.digits
        out = []
        for r in rows:
            out.append({"prompt": r["prompt"], "completion": r["answer"], "kind": "task"})
            if rng.random() < copy_fraction:
                sol = r["answer"] if rng.random() < 0.5 else f"{rng.randrange(1, hi)}*x+{rng.randrange(hi)}"
                hinted = HINT_TEMPLATE.format(question=r["prompt"][-1]["content"], solution=sol)
                out.append({"prompt": [{"role": "user", "content": hinted}], "completion": sol, "kind": "copy"})
        return out

    def max_completion_tokens(self) -> int:
        return len(f"{10**self.digits - 1}*x+{10**self.digits - 1}") + 2

    def evaluate(self, model, tokenizer, rows: list[dict] | None = None, batch_size: int = 256,
                 max_new_tokens: int | None = None) -> float:
        """Greedy accuracy of ``model`` on ``rows`` (default: the held-out split), in [0, 1]; the
        same rule as ``is_correct``, each batch's programs scored together (deduplicated)."""
        from sdpo_kit.core.sampling import generate_completions

        rows = self.splits()[1] if rows is None else rows
        if not rows:
            raise ValueError("evaluate() got no rows")
        scores = []
        for i in range(0, len(rows), batch_size):
            chunk = rows[i : i + batch_size]
            with torch.no_grad():
                texts = generate_completions(model, tokenizer, [r["prompt"] for r in chunk], do_sample=False,
                                             max_new_tokens=max_new_tokens or self.max_completion_tokens())
            scores += self.reward(None, texts, [r["answer"] for r in chunk])
        return sum(scores) / len(rows)

# registered here, not in tasks.py: this module imports tasks.py, so tasks.py cannot import it;
# ``sdpo_kit.lab`` imports it, so the name is there with TASKS
TASKS["lab_code"] = CodeTask
