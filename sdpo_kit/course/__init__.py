"""The course's side of the library: what each notebook's first cells call, so the notebooks teach.

    P = setup("02")          # model, profile and sizes for notebook 02; seeds; prints them and the preflight
    P.task, P.steps, ...     # the chosen profile's settings (a dict with attribute access)

Each notebook has a profile table in ``course/profiles/nbNN.py``: the settings that follow the model
(task, prompts, completion budget, learning rate, steps, ...), one entry per profile (``core.profiles``:
the tiny lab, the real CPU model, the T4 model), each with the smaller sizes CI runs (``"smoke"``).
``setup`` picks the model (``$SDPO_KIT_MODEL``, else the notebook's default for the device), the profile
(``$SDPO_KIT_PROFILE`` names one outright), applies the smoke sizes when ``SDPO_KIT_SMOKE=1``, seeds
``random`` and ``torch`` and prints what it chose in a few lines, so a notebook's config cell is three. The
preflight reads the profile's ``group``, ``prompts``, ``max_new_tokens`` and ``teacher`` (a second model's
logits: a teacher or a frozen reference) when it has them.

``course.checks`` holds the exercises' checks (``exercise`` and the functions that compare a learner's
code with the library's); the reference answers live beside the notebooks, in ``notebooks/solutions``.
``course.show`` holds the small views a notebook prints, among them ``against_usual``: how much a run learned beside
the range a run like it usually lands in (printed, never asserted).

Left out on purpose: anything a notebook teaches. Profiles are data; the ideas stay in the notebooks.
"""

from __future__ import annotations

import importlib
import os
import random
import textwrap

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB, choose_model, pick_profile
from sdpo_kit.course.checks import (
    ExerciseFailed,
    check_gae,
    check_group_advantages,
    check_grpo_loss,
    check_sampled_token_loss,
    exercise,
)
from sdpo_kit.course.show import against_usual, group_to_show, side_by_side

SMOKE_ENV = "SDPO_KIT_SMOKE"
NOTEBOOKS = ("00", "01", "02", "03", "04", "05", "06", "07", "08")


class Profile(dict):
    """A notebook's settings: a dict whose keys also read as attributes (``P.steps`` is ``P["steps"]``)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"this profile has no setting {key!r} (it has {sorted(self)})") from None


def _profiles_module(notebook: str):
    """``course/profiles/nbNN.py`` for notebook ``"NN"`` (ValueError for a notebook the course has not)."""
    number = str(notebook).zfill(2)[:2]
    if number not in NOTEBOOKS:
        raise ValueError(f"no notebook {number!r}; the course has {list(NOTEBOOKS)}")
    return importlib.import_module(f"sdpo_kit.course.profiles.nb{number}")


def profile_table(notebook: str) -> dict:
    """The profile table of notebook ``"NN"`` (``course/profiles/nbNN.py``'s ``PROFILES``)."""
    return _profiles_module(notebook).PROFILES


def default_models(notebook: str) -> dict:
    """The model notebook ``"NN"`` runs when ``$SDPO_KIT_MODEL`` is unset: ``{"cpu": ..., "cuda": ...}``.
    Notebook 00 opens on the real model on a CPU; the others use the tiny lab there. On CUDA: the T4 model."""
    return {"cpu": TINY_LAB, "cuda": T4_MODEL, **getattr(_profiles_module(notebook), "DEFAULT_MODEL", {})}


def describe(P: dict, width: int = 100) -> str:
    """A profile's settings in a few wrapped ``key=value`` lines."""
    items = "  ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in P.items())
    return textwrap.fill(items, width=width, initial_indent="  ", subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


def setup(notebook: str, *, seed: int = 0, env=None, cuda: bool | None = None, verbose: bool = True) -> Profile:
    """Model, profile and sizes for notebook ``"NN"``: seeds ``random`` and ``torch`` with ``seed`` and
    prints the choice (model, profile, sizes, the settings, the preflight). ``env`` / ``cuda``: stated
    instead of read (tests). The returned profile also holds ``model``, ``smoke`` and ``seed``."""
    import torch

    from sdpo_kit.models import preflight

    env = os.environ if env is None else env
    cuda = torch.cuda.is_available() if cuda is None else cuda
    smoke = env.get(SMOKE_ENV) == "1"
    defaults = default_models(notebook)
    model = env.get("SDPO_KIT_MODEL") or defaults["cuda" if cuda else "cpu"]
    if env is os.environ:
        os.environ.setdefault("UNSLOTH_RETURN_LOGITS", "1")   # Unsloth (GPU path) keeps logits in forward()
    table = profile_table(notebook)
    chosen = pick_profile(table, model, smoke, cuda=cuda, verbose=verbose)
    P = Profile(chosen, model=model, smoke=smoke, seed=seed)
    random.seed(seed)
    torch.manual_seed(seed)
    if verbose:
        print(describe({k: v for k, v in chosen.items()}))
        print("preflight:", preflight(model, completions=int(P.get("group", 8)) * int(P.get("prompts", 1)),
                                      completion_len=int(P.get("max_new_tokens", 16)),
                                      teacher=bool(P.get("teacher", False))))
    return P


__all__ = ["Profile", "setup", "profile_table", "describe", "default_models", "choose_model", "REAL_CPU_MODEL",
           "T4_MODEL", "TINY_LAB", "ExerciseFailed", "check_gae", "check_group_advantages", "check_grpo_loss",
           "check_sampled_token_loss", "exercise", "against_usual", "group_to_show", "side_by_side"]
