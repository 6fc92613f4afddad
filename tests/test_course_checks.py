"""The exercises' checks (``course.checks``): a right answer passes, each usual mistake is named, a stub is
"not written yet" for a learner and an error in CI; the notebooks' reference answers pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from sdpo_kit.course.checks import ExerciseFailed, check_group_advantages, check_grpo_loss, exercise

SOLUTIONS = Path(__file__).resolve().parents[1] / "notebooks" / "solutions"


def reference(notebook: str):
    spec = importlib.util.spec_from_file_location(f"ref_nb{notebook}", SOLUTIONS / f"nb{notebook}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def advantages(scale, eps=1e-4, mean="group"):
    def fn(rewards, G):
        g = rewards.view(-1, G)                                                    # (B/G, G)
        centred = g - (g.mean(1, keepdim=True) if mean == "group" else rewards.mean())  # (B/G, G)
        return (centred / (scale(g) + eps)).flatten()                             # (B,)
    return fn


def test_a_right_advantage_passes_and_each_usual_mistake_is_named():
    """The unbiased group std plus eps passes; the population std, no division, the batch mean and the batch
    std each fail with their own explanation; a wrong shape and a nan say so."""
    assert "equal the library's" in check_group_advantages(advantages(lambda g: g.std(1, keepdim=True)))
    mistakes = {
        "population std": advantages(lambda g: g.std(1, unbiased=False, keepdim=True)),
        "do not divide": lambda r, G: (r.view(-1, G) - r.view(-1, G).mean(1, keepdim=True)).flatten(),
        "mean of the whole batch": advantages(lambda g: g.std(1, keepdim=True), mean="batch"),
        "std of the whole batch": lambda r, G: ((r.view(-1, G) - r.view(-1, G).mean(1, keepdim=True)) / (r.std() + 1e-4)).flatten(),
        "shape": lambda r, G: r.view(-1, G),
        "eps": lambda r, G: ((r.view(-1, G) - r.view(-1, G).mean(1, keepdim=True)) / r.view(-1, G).std(1, keepdim=True)).flatten(),
    }
    for words, fn in mistakes.items():
        with pytest.raises(ExerciseFailed, match=words):
            check_group_advantages(fn)


def grpo(logp, old, A, mask, eps, *, sign=1.0, clip=True, mean="tokens"):
    ratio = torch.exp(logp - old)                                                  # (B, T)
    A = A[:, None]                                                                 # (B, 1)
    surrogate = torch.min(ratio * A, ratio.clamp(1 - eps, 1 + eps) * A) if clip else ratio * A  # (B, T)
    if mean == "all":
        return -sign * surrogate.mean()
    return -sign * (surrogate * mask).sum() / mask.sum()


def test_a_right_grpo_loss_passes_and_each_usual_mistake_is_named():
    """The token-mean clipped surrogate passes (value and gradient); the wrong sign, no clip, the padding
    counted, and a detached result each fail with their own explanation."""
    assert "equal the library's" in check_grpo_loss(grpo)
    mistakes = {"the sign": lambda *a: grpo(*a, sign=-1.0), "no clip": lambda *a: grpo(*a, clip=False),
                "padding counts": lambda *a: grpo(*a, mean="all"),
                "carries no gradient": lambda *a: grpo(*a).detach(), "one number": lambda *a: torch.zeros(2)}
    for words, fn in mistakes.items():
        with pytest.raises(ExerciseFailed, match=words):
            check_grpo_loss(fn)


def stub(*_):
    raise NotImplementedError("write it")


def test_a_stub_is_not_written_yet_for_a_learner_and_an_error_in_ci(monkeypatch, capsys):
    monkeypatch.delenv("SDPO_KIT_SOLUTIONS", raising=False)
    with exercise("exercise 1"):
        check_group_advantages(stub)
    assert "exercise 1: not written yet" in capsys.readouterr().out
    monkeypatch.setenv("SDPO_KIT_SOLUTIONS", "1")
    with pytest.raises(AssertionError, match="reference answer was not loaded"):
        with exercise("exercise 1"):
            check_group_advantages(stub)
    with pytest.raises(ExerciseFailed):   # a wrong answer fails whatever the setting
        with exercise("exercise 1"):
            check_group_advantages(lambda r, G: r)


@pytest.mark.parametrize("notebook,name,check", [("01", "my_group_advantages", check_group_advantages),
                                                 ("02", "my_grpo_loss", check_grpo_loss)])
def test_the_notebooks_reference_answers_pass(notebook, name, check):
    """The learner-written pieces of notebooks 01 and 02 (the advantage, the GRPO loss): their references pass."""
    assert "equal the library's" in check(getattr(reference(notebook), name))
