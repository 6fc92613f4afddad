"""Reference answers to the exercises of notebooks/00_setup_and_tiny_lab.ipynb (tiny lab, tasks, rewards)."""

from __future__ import annotations

import re

import torch


def _norm(s: str) -> str:
    """``" 1,000. "`` -> ``"1000"``: the notebook's ``my_norm`` (strip, one trailing ``.``, thousands commas)."""
    return s.strip().rstrip(".").replace(",", "").strip()


def my_tagged_match(completion: str, answer: str) -> float:
    """Exercise 1: 1.0 when the content of the first ``<answer>...</answer>`` (stripped and normalised
    as the plain reward does) equals the answer, else 0.0; the tags are case-sensitive."""
    m = re.search(r"<answer>(.*?)</answer>", completion, flags=re.DOTALL)
    return float(m is not None and _norm(m.group(1)) != "" and _norm(m.group(1)) == _norm(answer))


def frac_learnable(rewards: torch.Tensor, G: int) -> float:
    """Exercise 2: the fraction of groups (G consecutive rewards each) whose rewards are not all equal."""
    groups = rewards.view(-1, G)                                 # (B/G, G)
    return float((groups.max(1).values > groups.min(1).values).float().mean())


# Exercise 3: 2-digit sums of 3 terms: (10**2)**3 = 10**6 problems, largest answer 3 * 99 = 297
EX3_KW = dict(digits=2, terms=3)
