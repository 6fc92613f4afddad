"""Reward functions with TRL's signature: ``fn(prompts, completions, **columns) -> list[float]``.

``completions`` are strings or chat message lists (TRL passes lists of
``{"role": "assistant", "content": ...}`` for conversational datasets); every reward here
takes both. Dataset columns arrive as keyword lists, one entry per completion.

Verifiable rewards never crash on empty or garbage text: they score it 0.0.

A reward function may declare the dataset columns it needs with a ``required_columns``
attribute; ``check_columns`` turns a missing column into an error that names both.

Left out on purpose: learned reward models (sequence classifiers); model-scored rewards
below score with a causal LM instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence

import torch

from .tasks import completion_text, extract_answer

RewardFunc = Callable[..., list[float]]


# ---------------------------------------------------------------------------------------
# naming, column checks and safe calling (shared by the scratch loop and the TRL path)
# ---------------------------------------------------------------------------------------
def reward_name(fn) -> str:
    """A readable name for a reward function (TRL logs rewards under this name too)."""
    return getattr(fn, "__name__", None) or type(fn).__name__


def required_columns(fn) -> tuple[str, ...]:
    return tuple(getattr(fn, "required_columns", ()))


def check_columns(columns: Iterable[str], reward_funcs: Sequence[RewardFunc]) -> None:
    """Fail early, naming the column and the reward, when a dataset lacks what a reward needs."""
    columns = set(columns)
    if "prompt" not in columns:
        raise ValueError(f"dataset has no 'prompt' column (columns: {sorted(columns)})")
    for fn in reward_funcs:
        for col in required_columns(fn):
            if col not in columns:
                raise ValueError(
                    f"reward {reward_name(fn)!r} needs the dataset column {col!r}, "
                    f"which is missing (columns: {sorted(columns)})"
                )


class RewardError(RuntimeError):
    """A reward function raised, or returned something that is not a finite float per completion."""


def call_reward(fn: RewardFunc, prompts, completions, **columns) -> list[float]:
    """Call one reward function and check what it returns.

    Raises ``RewardError`` naming the function when it raises (the original traceback is
    chained), returns the wrong number of values, or returns NaN / inf.
    """
    name = reward_name(fn)
    try:
        values = fn(prompts=prompts, completions=completions, **columns)
    except Exception as e:  # keep the traceback, add the name
        raise RewardError(f"reward function {name!r} raised {type(e).__name__}: {e}") from e
    values = list(values)
    if len(values) != len(completions):
        raise RewardError(f"reward function {name!r} returned {len(values)} values for {len(completions)} completions")
    out = []
    for i, v in enumerate(values):
        v = float("nan") if v is None else float(v)
        if not math.isfinite(v):
            raise RewardError(f"reward function {name!r} returned {v} for completion {i}: {completions[i]!r}")
        out.append(v)
    return out


def checked(fn: RewardFunc) -> RewardFunc:
    """Wrap ``fn`` so TRL's trainer gets the same named errors as the scratch loop."""

    @functools.wraps(fn)
    def wrapper(prompts, completions, **columns):
        return call_reward(fn, prompts, completions, **columns)

    wrapper.__name__ = reward_name(fn)
    return wrapper


def compute_rewards(reward_funcs: Sequence[RewardFunc], prompts, completions, columns: dict,
                    weights: Sequence[float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Score completions with every reward function.

    Returns ``(total, per_func)``: (B,) weighted sum and (B, F) one column per function.
    """
    per_func = torch.tensor(
        [call_reward(fn, prompts, completions, **columns) for fn in reward_funcs], dtype=torch.float32
    ).T                                                                        # (B, F)
    w = torch.tensor(weights if weights is not None else [1.0] * len(reward_funcs))  # (F,)
    return per_func @ w, per_func                                               # (B,), (B, F)


# ---------------------------------------------------------------------------------------
# verifiable rewards
# ---------------------------------------------------------------------------------------
def _normalise(ans: str) -> str:
    return ans.strip().rstrip(".").replace(",", "").strip()


def exact_match_reward(answer_field: str = "answer", tagged: bool = False) -> RewardFunc:
    """1.0 when the completion's answer equals the dataset's answer, else 0.0.

    Plain: the answer is the completion's first line. Tagged: the content of the first
    ``<answer>...</answer>``; no tags scores 0.
    """

    def exact_match(prompts, completions, **columns) -> list[float]:
        answers = columns[answer_field]
        out = []
        for c, a in zip(completions, answers):
            got = extract_answer(completion_text(c), tagged)
            out.append(float(got is not None and _normalise(got) == _normalise(str(a))))
        return out

    exact_match.required_columns = (answer_field,)
    exact_match.__name__ = "tagged_exact_match" if tagged else "exact_match"
    return exact_match


def tag_format_reward(tag: str = "answer") -> RewardFunc:
    """1.0 when the completion holds exactly one well-formed ``<tag>...</tag>`` with text inside."""
    open_t, close_t = f"<{tag}>", f"</{tag}>"

    def tag_format(prompts, completions, **columns) -> list[float]:
        out = []
        for c in completions:
            t = completion_text(c)
            i, j = t.find(open_t), t.find(close_t)
            ok = (t.count(open_t) == 1 and t.count(close_t) == 1 and i < j
                  and t[i + len(open_t):j].strip() != "")
            out.append(float(ok))
        return out

    tag_format.__name__ = f"{tag}_format"
    return tag_format


def format_and_match_reward(answer_field: str = "answer", format_weight: float = 0.2) -> RewardFunc:
    """``format_weight * tag_format + (1 - format_weight) * tagged_exact_match``, in [0, 1]."""
    fmt, match = tag_format_reward(), exact_match_reward(answer_field, tagged=True)

    def format_and_match(prompts, completions, **columns) -> list[float]:
        f = fmt(prompts, completions, **columns)
        m = match(prompts, completions, **columns)
        return [format_weight * a + (1 - format_weight) * b for a, b in zip(f, m)]

    format_and_match.required_columns = (answer_field,)
    return format_and_match
