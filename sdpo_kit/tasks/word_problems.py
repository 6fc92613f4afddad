"""Tasks a real instruct model can answer: sums and short word problems in words, graded by difficulty.

    WordProblemTask(kind="sum", max_operand=20, terms=2, ops="+-")   registered as "word_problems"
    LEVELS[k]                                                        graded settings, 1 (easiest) to 5

The tiny lab's ``arithmetic`` task asks ``"7+5="`` and reads the first line of the answer: what a
model trained on that format writes. A real instruct model is asked in words and answers in
sentences ("7 + 5 = 12. So Tom has 12 apples."), so these tasks ask

    kind="sum":   "What is 7 + 5?"
    kind="word":  "Tom has 7 apples. He buys 5 more. How many apples does Tom have now?"

and read the answer with the ``auto`` rule (``text/answers.py``: a ``####``, ``\\boxed{}`` or
``<answer>`` mark if the model writes one, else the last number). A problem is its start number
and its events (``ops``: "+" buys or finds more, "-" gives away or loses some, never below zero);
the story around it (name, object, verbs) is drawn from the problem itself, so one problem is
always told the same way. Train and held-out are disjoint by ``problem_key``, the multiset of
added and of taken-away numbers: no rewording or reordering of a held-out problem is trained on.

Difficulty, measured on SmolLM2-135M-Instruct (``benchmarks/bench_real.py --tasks``): ``LEVELS``
names five settings from one-digit sums to three-event stories; the config's ``task:`` section
takes a level's keys or any of its own.

Left out on purpose: multiplication, division and multi-step reasoning chains (GSM8K proper): at
135M parameters the model has no room on them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sdpo_kit.tasks.arithmetic import ArithmeticTask
from sdpo_kit.tasks.base import TASKS

NAMES = ("Tom", "Anna", "Ben", "Maya", "Sam", "Lily", "Omar", "Zoe", "Leo", "Nina", "Jack", "Emma")
THINGS = ("apples", "marbles", "books", "stickers", "pencils", "cookies", "cards", "shells", "stamps", "coins")
MORE = ("buys {n} more", "finds {n} more", "gets {n} more from a friend", "picks up {n} more")
LESS = ("gives {n} to a friend", "loses {n}", "gives away {n}", "trades away {n}")
# a GSM8K-style format request: the ``auto`` rule reads "#### 12" first, and the format reward can teach it
INSTRUCTION = "{question} Show your work, then end with #### and the number."
# graded settings, easiest first (their measured accuracy is in benchmarks/results/real_tasks.json)
LEVELS = {
    1: dict(kind="sum", max_operand=9, terms=2, ops="+"),
    2: dict(kind="word", max_operand=9, terms=2, ops="+-"),
    3: dict(kind="word", max_operand=20, terms=2, ops="+-"),
    4: dict(kind="word", max_operand=9, terms=3, ops="+-"),
    5: dict(kind="sum", max_operand=99, terms=2, ops="+"),
}


@dataclass
class WordProblemTask(ArithmeticTask):
    """Sums and word problems for a real instruct model (see the module docstring).

    ``max_operand``: numbers from 1 to it (None: ``10**digits - 1``); ``terms``: the start number
    and ``terms - 1`` events; ``ops``: which events a problem may have ("+", "-" or "+-").
    Prompt settings and ``answer_rule`` as ``ArithmeticTask`` (default ``auto``)."""

    kind: str = "sum"
    max_operand: int | None = 20
    ops: str = "+-"
    terms: int = 2
    answer_rule: str | None = "auto"
    instruction: str | None = INSTRUCTION
    n_eval: int = 100
    name: str = field(init=False, default="word_problems")

    def __post_init__(self):
        super().__post_init__()
        if self.kind not in ("sum", "word"):
            raise ValueError(f"kind must be 'sum' or 'word', got {self.kind!r}")
        if not self.ops or set(self.ops) - {"+", "-"}:
            raise ValueError(f"ops must be '+', '-' or '+-', got {self.ops!r}")
        if self.ops == "-" and self.terms > 2:   # a first event can take all: the next has nothing left to take
            raise ValueError(f"ops='-' with terms={self.terms} can take everything away before the last event: "
                             "use ops='+-' (an empty hand only gains) or terms=2")
        if self.max_operand is not None and self.max_operand < 1:
            raise ValueError(f"max_operand must be >= 1, got {self.max_operand}")
        if self.tagged:
            raise ValueError("word problems are not tagged: set answer_rule='answer_tag' and an instruction instead")

    @property
    def top(self) -> int:
        return self.max_operand if self.max_operand is not None else 10**self.digits - 1

    # --- problems: (start, (sign, n), ...) ------------------------------------------------
    def _problem(self, rng: random.Random) -> tuple:
        start = rng.randint(1, self.top)
        events, total = [], start
        for _ in range(self.terms - 1):
            sign = rng.choice([s for s in self.ops if s == "+" or total >= 1])
            n = rng.randint(1, self.top if sign == "+" else min(total, self.top))
            total += n if sign == "+" else -n
            events.append((sign, n))
        return (start, *events)

    def problem_key(self, problem) -> tuple:
        """What makes two problems the same: the multiset of numbers added (the start among them)
        and of numbers taken away, so no reordering or rewording of a held-out problem is trained on."""
        start, *events = problem
        added = sorted([start] + [n for s, n in events if s == "+"])
        taken = sorted(n for s, n in events if s == "-")
        return (tuple(added), tuple(taken))

    def _all_keys(self) -> set | None:
        """Every ``problem_key`` this setting can draw (None when the space is too large to list)."""
        if self.space_size() > 200_000:
            return None
        keys = set()

        def walk(start, total, events):
            if len(events) == self.terms - 1:
                keys.add(self.problem_key((start, *events)))
                return
            for sign in (s for s in self.ops if s == "+" or total >= 1):
                for n in range(1, (self.top if sign == "+" else min(total, self.top)) + 1):
                    walk(start, total + (n if sign == "+" else -n), [*events, (sign, n)])

        for start in range(1, self.top + 1):
            walk(start, start, [])
        return keys

    def _problems(self, rng: random.Random, n: int, exclude: set = frozenset()) -> list[tuple]:
        """Up to ``n`` problems in a seeded random order, distinct by key, none whose key is in ``exclude``;
        a small space runs out: the draws stop after 50 n + 1000 tries, or as soon as every key the
        setting has is taken (the same rows, without the tries that could find nothing new)."""
        keys = self._all_keys()
        left = len(keys - set(exclude)) if keys is not None else None   # keys a draw can still add
        seen, out, tries = set(), [], 0
        while len(out) < n and tries < 50 * n + 1000 and len(out) != left:
            tries += 1
            p = self._problem(rng)
            key = self.problem_key(p)
            if key not in seen and key not in exclude:
                seen.add(key)
                out.append(p)
        return out

    def _heldout_problems(self, rng: random.Random) -> list[tuple]:
        return self._problems(rng, self.n_eval)

    def space_size(self) -> int:
        """An upper bound on the number of distinct problems (the splits check it)."""
        return self.top ** self.terms * len(self.ops) ** (self.terms - 1)

    def splits(self) -> tuple[list[dict], list[dict]]:
        """(train_rows, heldout_rows), disjoint by ``problem_key``; ValueError when the space is too
        small for ``n_eval`` held-out problems and a training set."""
        rng = random.Random(self.seed)
        heldout = self._heldout_problems(rng)
        if len(heldout) < self.n_eval:
            raise ValueError(f"this setting has only {len(heldout)} distinct problems; n_eval={self.n_eval} "
                             "needs more (raise max_operand or terms, or lower n_eval)")
        held = {self.problem_key(p) for p in heldout}
        n_train = self.n_train if self.n_train is not None else 5_000
        train = self._problems(rng, n_train, exclude=held)
        if not train and n_train:
            raise ValueError(f"n_eval={self.n_eval} holds out every problem of this setting; none is left to train on")
        return [self.row(p) for p in train], [self.row(p) for p in heldout]

    # --- rows -----------------------------------------------------------------------------
    @staticmethod
    def answer_of(problem) -> int:
        start, *events = problem
        return start + sum(n if s == "+" else -n for s, n in events)

    def question(self, problem) -> str:
        start, *events = problem
        if self.kind == "sum":
            return "What is " + " ".join([str(start)] + [f"{s} {n}" for s, n in events]) + "?"
        rng = random.Random(repr(problem))   # the same problem is always told the same way
        name, things = rng.choice(NAMES), rng.choice(THINGS)
        steps = [rng.choice(MORE if s == "+" else LESS).format(n=n) for s, n in events]
        story = f"{name} has {start} {things}. " + " ".join(f"Then {name} {step}." for step in steps)
        return f"{story} How many {things} does {name} have now?"

    def row(self, problem) -> dict:
        return {"prompt": self.prompt(self.question(problem)), "answer": str(self.answer_of(problem))}

    def max_completion_tokens(self) -> int:
        """A real model explains before it answers: 48 BPE tokens hold "7 + 5 = 12. So Tom has 12 apples."
        with room (measured on SmolLM2-135M-Instruct, ``docs/real_model.md``)."""
        return 48

    def sft_rows(self, rows, copy_fraction: float = 0.3, seed: int = 0):
        raise NotImplementedError("word problems are for real pretrained models: there is no warm start to build")


TASKS["word_problems"] = WordProblemTask
