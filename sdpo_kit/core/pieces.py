"""Your own piece of an algorithm in place of the library's, checked where it runs.

    Piece(name, signature, library, check, refuse)   a piece an algorithm lets you replace
    checked(fn, piece) -> fn'                        ``fn`` that stops the run at a wrong answer
    PieceError                                       what stops it: the piece, your function, what was wrong

An algorithm's package declares its pieces (``grpo/pieces.py``: the group-relative advantage and the
clipped loss); ``sdpo_kit.train(cfg, advantage_fn=my_advantages)`` runs the config with yours. Before the
model loads, ``refuse(trainer_config)`` names a setting your function cannot express (a KL weight for a loss
that has no KL term); during the run every call goes through ``checked``: an exception of yours, or a result
of the wrong type, shape or with a NaN, stops the run there, naming the piece, your function, where it is
defined and what was wrong.

Left out on purpose: comparing your answer with the library's (``course.checks`` does that on chosen
inputs; here a right-shaped wrong answer trains, as it would in your own code).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch


class PieceError(RuntimeError):
    """A learner's piece raised or returned something the run cannot use (the message says which and why)."""


@dataclass(frozen=True)
class Piece:
    """A piece of an algorithm a learner may replace.

    ``signature``: how it is called, for messages (``"advantage_fn(rewards, num_generations) -> advantages"``);
    ``library``: the library's function it stands in for; ``check(result, *args) -> problem or None``;
    ``refuse(trainer_config) -> problem or None``: a setting the piece cannot express."""

    name: str
    signature: str
    library: str
    check: Callable
    refuse: Callable = lambda config: None


def describe(fn) -> str:
    """``name (file:line)`` of a function (``name (a notebook cell)`` for one defined in a notebook), or its
    name alone when Python cannot say where it is defined."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    try:
        path, line = inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return name
    if path and "ipykernel" in path:   # a cell's code: its temporary file says nothing to the reader
        return f"{name} (a notebook cell)"
    where = os.path.relpath(path)       # relative to the working directory, or the file's name from elsewhere
    return f"{name} ({os.path.basename(path) if where.startswith('..') else where}:{line})"


def checked(fn: Callable, piece: Piece) -> Callable:
    """``fn`` called as ``piece``: its exceptions and wrong results raise ``PieceError`` (module docstring)."""

    def run(*args):
        try:
            result = fn(*args)
        except Exception as e:
            raise PieceError(f"{piece.name}: your {describe(fn)} raised {type(e).__name__}: {e}. "
                             f"It is called as {piece.signature}") from e
        problem = piece.check(result, *args)
        if problem:
            raise PieceError(f"{piece.name}: your {describe(fn)} {problem}. It is called as {piece.signature} "
                             f"(the library's: {piece.library})")
        return result

    run.learner_fn = fn
    return run


def tensor_problem(result, shape: tuple, what: str, needs_grad: bool = False) -> str | None:
    """Why ``result`` is not a finite tensor of ``shape`` (``what`` names it), or None."""
    if not isinstance(result, torch.Tensor):
        return f"returned a {type(result).__name__}, not a torch.Tensor ({what})"
    if tuple(result.shape) != tuple(shape):
        return f"returned shape {tuple(result.shape)}; {what} is {tuple(shape)}"
    if result.is_floating_point() and not torch.isfinite(result).all():
        return f"returned nan or inf ({what}): a division by zero?"
    if needs_grad and not result.requires_grad:
        return (f"returned a value with no gradient ({what}): a .detach(), .item() or torch.no_grad() "
                "in the way?")
    return None


def refusals(pieces: dict[str, Piece], config, names) -> list[str]:
    """What keeps each piece in ``names`` from training ``config``: a piece this trainer does not take, or a
    setting the piece cannot express (its ``refuse``). Empty when every one can train."""
    out = []
    for name in names:
        if name not in pieces:
            takes = ", ".join(sorted(pieces)) or "none"
            out.append(f"{name}: this trainer does not take it (it takes: {takes})")
        elif problem := pieces[name].refuse(config):
            out.append(problem)
    return out


def prepare(pieces: dict[str, Piece], config, **given) -> tuple:
    """The functions ``given`` (piece name -> function or None), each ``checked``, in the order given.
    ValueError, before anything runs, when one cannot train ``config`` (``refusals``)."""
    chosen = {name: fn for name, fn in given.items() if fn is not None}
    for name, fn in chosen.items():
        if not callable(fn):
            raise ValueError(f"{name}: expected a function, got a {type(fn).__name__}")
    problems = refusals(pieces, config, chosen)
    if problems:
        raise ValueError("; ".join(problems))
    return tuple(checked(fn, pieces[name]) if fn is not None else None for name, fn in given.items())
