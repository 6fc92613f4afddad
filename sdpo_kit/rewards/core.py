"""The contract every reward function meets, and the checks around it.

A reward function has TRL's signature, ``fn(prompts, completions, **columns) -> list[float]``:
``completions`` are strings or chat message lists, dataset columns arrive as keyword lists
(one entry per completion). The columns a reward needs are declared by its signature
(``def r(prompts, completions, target, **kw)`` needs ``target``) or a ``required_columns``
attribute; ``check_columns`` turns a missing one into an error naming both, before training.

``call_reward`` / ``checked`` turn a reward that raises, returns the wrong count, or NaN / inf
into a ``RewardError`` naming it (the scratch loop and the TRL path alike);
``compute_rewards`` scores with several functions and their weights. A reward may return
``{"score": ..., "feedback": ...}`` dicts instead of floats: the scores are the rewards, the
texts feed SDPO's teacher (``compute_rewards_with_feedback``).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable, Sequence

import torch

RewardFunc = Callable[..., list[float]]


# ---------------------------------------------------------------------------------------
# naming, column checks and safe calling (shared by the scratch loop and the TRL path)
# ---------------------------------------------------------------------------------------
def reward_name(fn) -> str:
    """A readable name for a reward function (TRL logs rewards under this name too)."""
    return getattr(fn, "__name__", None) or type(fn).__name__


# keyword arguments TRL's GRPOTrainer passes to every reward besides the dataset columns
TRL_REWARD_KWARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric",
                     "environments")


def required_columns(fn) -> tuple[str, ...]:
    """Dataset columns ``fn`` needs: its ``required_columns`` attribute, plus every parameter of
    its signature without a default that TRL does not fill itself (``TRL_REWARD_KWARGS``)."""
    declared = list(getattr(fn, "required_columns", ()))
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: only the attribute counts
        params = ()
    named = [p.name for p in params
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
             and p.name not in TRL_REWARD_KWARGS]
    return tuple(dict.fromkeys(declared + named))


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


def call_reward_with_feedback(fn: RewardFunc, prompts, completions, **columns) -> tuple[list[float], list[str | None]]:
    """Call one reward function; (scores, feedbacks), one of each per completion.

    A reward returns floats, or dicts ``{"score": float, "feedback": str}`` (feedback optional:
    text for the SDPO teacher's reprompt, e.g. "Your answer 12 is too large"). Raises
    ``RewardError`` naming the function when it raises (the original traceback is chained),
    returns the wrong number of values, a dict without ``score``, or NaN / inf.
    """
    name = reward_name(fn)
    try:
        values = fn(prompts=prompts, completions=completions, **columns)
    except TypeError as e:  # most often a signature that cannot take the batch
        hint = ("; a reward is called as fn(prompts=..., completions=..., **columns) with every dataset column "
                f"({', '.join(sorted(columns)) or 'none'}): give it a **kwargs") if "argument" in str(e) else ""
        raise RewardError(f"reward function {name!r} raised TypeError: {e}{hint}") from e
    except Exception as e:  # keep the traceback, add the name
        raise RewardError(f"reward function {name!r} raised {type(e).__name__}: {e}") from e
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise RewardError(f"reward function {name!r} returned a {type(values).__name__}; it must return a list with "
                          f"one score per completion ({len(completions)} here)")
    values = list(values)
    if len(values) != len(completions):
        raise RewardError(f"reward function {name!r} returned {len(values)} values for {len(completions)} completions")
    scores, feedbacks = [], []
    for i, v in enumerate(values):
        feedback = None
        if isinstance(v, dict):
            if "score" not in v:
                raise RewardError(f"reward function {name!r} returned a dict without 'score' for completion {i}: {v!r}")
            v, feedback = v["score"], v.get("feedback")
        if v is not None and (isinstance(v, (str, bytes)) or not isinstance(v, (int, float)) and not hasattr(v, "__float__")):
            raise RewardError(f"reward function {name!r} returned a {type(v).__name__} for completion {i} ({v!r}); "
                              "each score must be a number")
        v = float("nan") if v is None else float(v)
        if not math.isfinite(v):
            raise RewardError(f"reward function {name!r} returned {v} for completion {i}: {completions[i]!r}")
        scores.append(v)
        feedbacks.append(feedback if isinstance(feedback, str) and feedback.strip() else None)
    return scores, feedbacks


def call_reward(fn: RewardFunc, prompts, completions, **columns) -> list[float]:
    """``call_reward_with_feedback``'s scores only (feedback dicts are accepted and their text dropped)."""
    return call_reward_with_feedback(fn, prompts, completions, **columns)[0]


def checked(fn: RewardFunc, feedback_sink: list | None = None, log_columns: Sequence[str] = ()) -> RewardFunc:
    """Wrap ``fn`` so TRL's trainer gets the same named errors as the scratch loop, and floats
    (a feedback reward's texts go to ``feedback_sink``, replaced on each call, when given, and to
    TRL's completions table as ``feedback/<name>`` through the ``log_extra`` TRL passes). The dataset
    columns named in ``log_columns`` go to that table too, under their own names (``answer``: the
    reference each completion was scored against); give them to one reward only."""

    @functools.wraps(fn)
    def wrapper(prompts, completions, **columns):
        scores, feedbacks = call_reward_with_feedback(fn, prompts, completions, **columns)
        if feedback_sink is not None:
            feedback_sink[:] = feedbacks
        log_extra = columns.get("log_extra")
        if callable(log_extra):  # TRL's completions table (core.completions.trl_samples)
            if any(feedbacks):
                log_extra(f"feedback/{reward_name(fn)}", feedbacks)
            for name in log_columns:
                if name in columns:
                    log_extra(name, list(columns[name]))
        return scores

    wrapper.__name__ = reward_name(fn)
    return wrapper


def compute_rewards(reward_funcs: Sequence[RewardFunc], prompts, completions, columns: dict,
                    weights: Sequence[float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Score completions with every reward function.

    Returns ``(total, per_func)``: (B,) weighted sum and (B, F) one column per function.
    """
    total, per_func, _ = compute_rewards_with_feedback(reward_funcs, prompts, completions, columns, weights)
    return total, per_func


def compute_rewards_with_feedback(reward_funcs: Sequence[RewardFunc], prompts, completions, columns: dict,
                                  weights: Sequence[float] | None = None):
    """``compute_rewards`` plus each completion's feedback: the non-empty texts of the functions
    that gave one, joined by newlines (None when none did). Returns (total (B,), per_func (B, F), feedbacks)."""
    scored = [call_reward_with_feedback(fn, prompts, completions, **columns) for fn in reward_funcs]
    per_func = torch.tensor([s for s, _ in scored], dtype=torch.float32).T      # (B, F)
    w = torch.tensor(weights if weights is not None else [1.0] * len(reward_funcs))  # (F,)
    feedbacks = ["\n".join(t for t in texts if t) or None for texts in zip(*(f for _, f in scored))]
    return per_func @ w, per_func, feedbacks                                    # (B,), (B, F), [B]


