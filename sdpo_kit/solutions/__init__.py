"""Reference answers to the notebooks' exercises (what CI runs them with).

An exercise ships as a stub the reader fills in, followed by a check that fails on the stub.
The stub cell hands its function (or value) to ``solution``:

    def my_rloo_advantages(rewards, G):
        ...  # your code here
        raise NotImplementedError("exercise 1")

    my_rloo_advantages = solution("01", my_rloo_advantages)

Normally ``solution`` gives back the reader's own answer. With ``SDPO_KIT_SOLUTIONS=1`` (set by
``make test``, so CI executes every check) it returns the reference answer of the same name
from ``sdpo_kit/solutions/nbNN.py``. Values use ``name=``: ``EX3_KW = solution("00", None, name="EX3_KW")``.

The answers are here to be read after trying; ``tests/test_notebook_exercises.py`` checks that
every exercise's check fails on its stub and passes on its reference answer.
"""

from __future__ import annotations

import importlib
import os

ENV = "SDPO_KIT_SOLUTIONS"


def solutions_enabled() -> bool:
    """True when ``SDPO_KIT_SOLUTIONS=1``: exercises run with the reference answers."""
    return os.environ.get(ENV) == "1"


def solution(notebook: str, yours, name: str | None = None):
    """The reader's answer, or with ``SDPO_KIT_SOLUTIONS=1`` the reference answer from
    ``sdpo_kit.solutions.nb<notebook>`` (looked up by ``name``, default ``yours.__name__``)."""
    if not solutions_enabled():
        return yours
    name = name or getattr(yours, "__name__", None)
    if not name:
        raise ValueError("solution() needs name= for a value that has no __name__")
    module = importlib.import_module(f"{__name__}.nb{notebook}")
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"no reference answer {name!r} in {module.__name__}") from None
