"""Synthetic verifiable tasks, generated in code (no downloads), the tiny lab's and the SDPO skill lab's.

Each is a ``Task`` (``tasks/base.py``): chat rows split into train / held-out disjoint by problem
(``problem_key``: a sum's operands as a multiset, so no reordering of a held-out question is trained on), a
verifiable reward, greedy held-out accuracy. ``answers_match`` forgives
surrounding spaces, a trailing ``.`` and thousands commas (``"9."`` and ``"1,000"`` are right) on both sides.

Difficulty knobs (``digits``, ``terms``) let the same task serve the tiny CPU model
(1-digit, 3 terms) and a 0.5B model on a T4 (3-digit, 4 terms, say); ``long_addition`` (two
4-digit operands, feedback that names the wrong digits) is the SDPO skill lab's task.

Left out on purpose: multi-turn environments (``environments.py``) and natural-language word problems
(``word_problems.py``).
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field

from sdpo_kit.tasks.base import HINT_TEMPLATE, TASKS, extract_answer, greedy_accuracy, is_correct, prompt_text
from sdpo_kit.tasks.feedback import FEEDBACK_STYLES
from sdpo_kit.text import answers
from sdpo_kit.text.answers import as_rule

# large spaces (3 digits x 4 terms = 10^12 problems) are sampled, not enumerated: cap the default
DEFAULT_MAX_TRAIN = 20_000


def arithmetic_feedback(completion, answer, rule=False, style: str = "direction") -> str:
    """A checker's feedback on a sum ("" when right): whether the answer is missing or not a
    number, else by ``style`` (``tasks/feedback.py``): ``"direction"``, too large or too small
    ("Your answer 12 is too large; the sum is smaller."); ``"digits"``, which digits are wrong
    ("Your answer 13391 is wrong in the hundreds and tens digits: 13??1"). ``rule`` as
    ``extract_answer``: "76 + 88 = 154" read by ``auto`` is the answer 154."""
    if style not in FEEDBACK_STYLES:
        raise ValueError(f"unknown feedback style {style!r}; choose one of {sorted(FEEDBACK_STYLES)}")
    rule = as_rule(rule)
    if is_correct(completion, answer, rule):
        return ""
    got = extract_answer(completion, rule)
    # the styles compare numbers ("0154" is 154); the rule compares as written: a wrong answer is never told it is right
    return FEEDBACK_STYLES[style](got, str(answer), rule) or f"Your answer {got!r} is not written as the plain number."

@dataclass
class ArithmeticTask:
    """Sum of ``terms`` non-negative integers of at most ``digits`` digits each.

    Prompt ``"3+5+1="`` (plain) or ``"3+5+1= <answer>"`` (tagged), answer ``"9"``.
    With ``tagged=True`` the completion must be ``<answer>9</answer>``.

    Prompt settings (what a real instruct model needs; the tiny lab uses none of them):
    ``system_prompt`` (a system turn before the question), ``instruction`` (a template around
    the question, ``"{question}"`` standing for it), ``chat`` (True: chat messages, rendered with
    the model's chat template; False: one plain string). ``answer_rule`` names how an answer is
    read from a completion (``text/answers.py``; None: ``answer_tag`` when tagged, else
    ``first_line``), for the reward, the feedback and held-out evaluation alike.
    """

    digits: int = 1
    terms: int = 3
    tagged: bool = False
    n_eval: int = 200
    n_train: int | None = None  # None: every problem not held out, at most DEFAULT_MAX_TRAIN
    seed: int = 0
    feedback_style: str = "direction"   # what feedback() says of a wrong sum: direction | digits (tasks/feedback.py)
    answer_rule: str | None = None      # text/answers.py; None: answer_tag when tagged, else first_line
    system_prompt: str | None = None    # a system turn before the question (chat) or a first paragraph (plain)
    instruction: str | None = None      # a template around the question: "{question} Answer with a number."
    chat: bool = True                   # chat messages (the model's chat template) or one plain string
    name: str = field(init=False, default="arithmetic")
    answer_column: str = field(init=False, default="answer")

    def __post_init__(self):
        if self.digits < 1 or self.terms < 1:
            raise ValueError(f"digits and terms must be >= 1, got {self.digits}, {self.terms}")
        if self.feedback_style not in FEEDBACK_STYLES:
            raise ValueError(f"unknown feedback_style {self.feedback_style!r}; choose one of {sorted(FEEDBACK_STYLES)}")
        answers.rule_for(self.tagged, self.answer_rule)   # an unknown rule fails here
        if self.instruction is not None:
            if "{question}" not in self.instruction:
                raise ValueError(f"instruction must hold '{{question}}' where the question goes, got {self.instruction!r}")
            try:
                self.instruction.format(question="")
            except (KeyError, IndexError, ValueError) as e:
                raise ValueError(f"instruction {self.instruction!r} is not a template with only "
                                 f"'{{question}}' in it ({type(e).__name__}: {e}); write other braces as {{{{ }}}}") from None

    @property
    def rule(self) -> str:
        """The answer rule this task reads completions with (``text/answers.py``)."""
        return answers.rule_for(self.tagged, self.answer_rule)

    # --- rows ---------------------------------------------------------------------------
    def prompt(self, question: str):
        """The prompt of a row: ``question`` in the instruction template, with the system prompt, as chat
        messages (``chat``) or one string."""
        text = self.instruction.format(question=question) if self.instruction else question
        if not self.chat:
            return f"{self.system_prompt}\n\n{text}" if self.system_prompt else text
        head = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return head + [{"role": "user", "content": text}]

    def question(self, operands) -> str:
        q = "+".join(str(x) for x in operands) + "="
        return q + " <answer>" if self.tagged else q

    def format_answer(self, answer: str) -> str:
        """The completion a perfect model writes for ``answer``."""
        return f"<answer>{answer}</answer>" if self.tagged else answer

    def row(self, operands) -> dict:
        return {"prompt": self.prompt(self.question(operands)), "answer": str(sum(operands))}

    def problem_key(self, operands) -> tuple[int, ...]:
        """What makes two prompts the same problem: a sum's operands as a multiset (sorted), so
        ``3+5+1=`` and ``1+3+5=`` share a key and always land on the same side of the split."""
        return tuple(sorted(operands))

    def _problems(self, rng: random.Random, n: int, exclude: set = frozenset()) -> list[tuple[int, ...]]:
        """``n`` distinct operand tuples in a seeded random order, none whose key is in ``exclude``
        (fewer when the space runs out)."""
        hi = 10**self.digits
        space = hi**self.terms
        if space <= 200_000:  # enumerate and shuffle: exact
            all_ops = [ops for ops in itertools.product(range(hi), repeat=self.terms)
                       if self.problem_key(ops) not in exclude]
            rng.shuffle(all_ops)
            return all_ops[:n]
        seen, out = set(), []
        while len(out) < n:
            ops = tuple(rng.randrange(hi) for _ in range(self.terms))
            if ops not in seen and self.problem_key(ops) not in exclude:
                seen.add(ops)
                out.append(ops)
        return out

    def _heldout_problems(self, rng: random.Random) -> list[tuple[int, ...]]:
        """``n_eval`` held-out problems: whole problems (every ordering of a multiset that the space
        enumerates) in a seeded order, the last group cut to size; its other orderings are held
        out too (never trained on), so no permutation of a held-out problem reaches training."""
        hi = 10**self.digits
        if hi**self.terms > 200_000:   # sampled space: orderings of one multiset rarely meet
            return self._problems(rng, self.n_eval)
        groups: dict[tuple, list] = {}
        for ops in itertools.product(range(hi), repeat=self.terms):
            groups.setdefault(self.problem_key(ops), []).append(ops)
        keys = sorted(groups)
        rng.shuffle(keys)
        out = []
        for k in keys:
            members = groups[k][:]
            rng.shuffle(members)
            out.extend(members)
            if len(out) >= self.n_eval:
                break
        return out[: self.n_eval]

    def splits(self) -> tuple[list[dict], list[dict]]:
        """(train_rows, heldout_rows), deterministic in ``seed`` and disjoint by problem: no
        held-out question, nor any reordering of its operands, is a training row (``problem_key``)."""
        if self.n_eval < 1 or (self.n_train is not None and self.n_train < 0):
            raise ValueError(f"n_eval must be >= 1 and n_train >= 0, got {self.n_eval}, {self.n_train}")
        space = (10**self.digits) ** self.terms
        if self.n_eval >= space:
            raise ValueError(f"task space has {space} problems; n_eval={self.n_eval} leaves none to train on")
        rng = random.Random(self.seed)
        heldout = self._heldout_problems(rng)
        held_keys = {self.problem_key(p) for p in heldout}
        n_train = self.n_train if self.n_train is not None else DEFAULT_MAX_TRAIN
        train = self._problems(rng, n_train, exclude=held_keys)
        if not train and n_train:
            raise ValueError(f"task space has {space} problems; n_eval={self.n_eval} holds out every "
                             f"problem (by multiset of operands) and leaves none to train on")
        return [self.row(p) for p in train], [self.row(p) for p in heldout]

    # --- scoring ------------------------------------------------------------------------
    def is_correct(self, completion, answer: str) -> bool:
        """``tasks.is_correct`` with this task's answer rule."""
        return is_correct(completion, answer, self.rule)

    def reward(self, prompts, completions, answer, **kwargs) -> list[float]:
        """TRL reward signature: 1.0 for the right answer, else 0.0 (``is_correct``)."""
        return [float(self.is_correct(c, a)) for c, a in zip(completions, answer)]

    def feedback(self, completion, answer) -> str:
        """What a checker would tell a wrong answer (SDPO's feedback); "" for a right one."""
        return arithmetic_feedback(completion, answer, self.rule, self.feedback_style)

    # --- warm-start rows ----------------------------------------------------------------
    def sft_rows(self, rows: list[dict], copy_fraction: float = 0.3, seed: int = 0) -> list[dict]:
        """(prompt, completion) pairs for the warm start.

        Besides plain question -> answer, a ``copy_fraction`` of rows show a solution in the
        prompt (``HINT_TEMPLATE``) that the model learns to copy: the skill SDPO's reprompted
        teacher relies on. Half of those hints carry a random number instead of the sum, so
        copying the context, not recalling the sum, is what the loss rewards.
        """
        rng = random.Random(seed)
        out = []
        for r in rows:
            q = prompt_text(r["prompt"])
            out.append({"prompt": r["prompt"], "completion": self.format_answer(r["answer"]), "kind": "task"})
            if rng.random() < copy_fraction:
                sol = r["answer"] if rng.random() < 0.5 else str(rng.randrange(10 ** (self.digits + 1)))
                hinted = HINT_TEMPLATE.format(question=q, solution=self.format_answer(sol))
                out.append({"prompt": [{"role": "user", "content": hinted}],
                            "completion": self.format_answer(sol), "kind": "copy"})
        return out

    # --- evaluation ---------------------------------------------------------------------
    def evaluate(self, model, tokenizer, rows: list[dict] | None = None, batch_size: int = 256,
                 max_new_tokens: int | None = None) -> float:
        """Greedy accuracy of ``model`` on ``rows`` (default: the held-out split), in [0, 1]."""
        rows = self.splits()[1] if rows is None else rows
        if max_new_tokens is None:
            max_new_tokens = self.max_completion_tokens()
        return greedy_accuracy(self, model, tokenizer, rows, max_new_tokens=max_new_tokens, batch_size=batch_size)

    def max_completion_tokens(self) -> int:
        """Enough new tokens for a perfect answer plus slack (character-level tokens)."""
        n = len(str(self.terms * (10**self.digits - 1)))
        return n + (len("<answer></answer>") if self.tagged else 0) + 2

@dataclass
class VaporArithmeticTask(ArithmeticTask):
    """The tagged arithmetic task with one preference pair per prompt (VAPOR's data).

    Rows add ``chosen`` (the well-formed completion with the right answer, ``<answer>9</answer>``)
    and ``rejected`` (the same form with a near miss: the sum off by 1 or 2, as a model that
    drops a carry writes). The near miss is drawn from ``seed`` and the question, so rows are
    the same in every run."""

    tagged: bool = True
    name: str = field(init=False, default="vapor_arithmetic")

    def row(self, operands) -> dict:
        row = super().row(operands)
        rng = random.Random(f"{self.seed}:{tuple(operands)}")
        answer = int(row["answer"])
        wrong = answer + rng.choice([d for d in (-2, -1, 1, 2) if answer + d >= 0])
        return {**row, "chosen": self.format_answer(str(answer)), "rejected": self.format_answer(str(wrong))}


TASKS.update({
    "arithmetic": ArithmeticTask,
    "tagged_arithmetic": functools.partial(ArithmeticTask, tagged=True),
    "vapor_arithmetic": VaporArithmeticTask,
    # the SDPO skill lab (lab/skill.py): two 4-digit operands, a 4-5 digit answer, feedback that
    # names the wrong digits (tasks/feedback.py)
    "long_addition": functools.partial(ArithmeticTask, digits=4, terms=2, feedback_style="digits"),
})
TASKS["tagged"] = TASKS["tagged_arithmetic"]  # short alias
