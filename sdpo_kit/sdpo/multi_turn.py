"""Multi-turn reprompting (also called iterative refinement): solve one question by
reprompting it with feedback. Nothing is trained: the policy's weights never change.

    round 1:   sample N candidates for the question; score them (reward and feedback)
    round r:   reprompt with the feedback of the best candidate so far (and, with a partial-credit
               reward, the best candidate itself as the attempt to improve on), sample N again
    stop at the first success or after R rounds

``multi_turn_reprompting`` runs it on one question; ``compare_multi_turn_with_best_of_n``
measures it on held-out rows against the fair baseline, best-of-N with the same number of
samples the reprompting loop may use (N x R), on the rows the greedy policy gets wrong: how many
each solves (discovery rate) and how many samples that took. ``first_success`` is best-of-N's
sampling stream itself: the 1-based index of the first right one of N plain samples.

This is not test-time SDPO: the paper's test-time method trains a copy of the policy on the
question (``sdpo/at_test_time.py``); here the feedback only ever reaches the prompt.

Left out on purpose: carrying earlier rounds' turns in the context (each reprompt is the question
plus the latest feedback only, as SDPO's teacher prompt is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from sdpo_kit.core.sampling import generate_completions, sample
from sdpo_kit.rewards import call_reward_with_feedback
from sdpo_kit.text.answers import completion_text
from sdpo_kit.text.reprompt import FEEDBACK_TEMPLATE, REPROMPT_TEMPLATE, SOLUTION_TEMPLATE, reprompt


@dataclass
class MultiTurnResult:
    """What one question's reprompting loop did."""

    solved: bool
    rounds: int                  # rounds run (1 = solved or stopped in the first)
    samples: int                 # completions sampled in all (rounds x n)
    answer: str | None           # the best completion of the successful round
    prompts: list = field(default_factory=list)  # the prompt of each round (the reprompts, for reading)
    attempts: int = 0            # 1-based index, in sampling order, of the first success ((round - 1) x n +
                                 # its index in the round); ``samples`` when none succeeded


def score_completions(reward_fn: Callable, prompt, texts: Sequence[str], columns: dict):
    """(scores, feedbacks) of ``texts`` sampled for ``prompt`` (chat completions for a chat prompt)."""
    n = len(texts)
    completions = [t if isinstance(prompt, str) else [{"role": "assistant", "content": t}] for t in texts]
    scores, feedbacks = call_reward_with_feedback(reward_fn, [prompt] * n, completions,
                                                  **{k: [v] * n for k, v in columns.items()})
    return completions, scores, feedbacks


@torch.no_grad()
def multi_turn_reprompting(model, tokenizer, prompt, reward_fn: Callable, *, columns: dict, n: int = 8,
                           rounds: int = 3, max_new_tokens: int = 8, temperature: float = 1.0,
                           success_threshold: float = 1.0, show_best_attempt: bool = False,
                           reprompt_template: str = REPROMPT_TEMPLATE, solution_template: str = SOLUTION_TEMPLATE,
                           feedback_template: str = FEEDBACK_TEMPLATE) -> MultiTurnResult:
    """Reprompt one question until a candidate succeeds or ``rounds`` run out (module docstring).
    Multi-turn reprompting only: ``model`` is sampled from, never trained.

    ``reward_fn``: a TRL-signature reward (floats or ``{"score", "feedback"}``); ``columns`` its
    dataset columns for this one row (``{"answer": "9"}``). ``show_best_attempt`` also puts the
    best-scoring failed candidate in the reprompt (useful with partial credit)."""
    if n < 1 or rounds < 1:
        raise ValueError(f"need n >= 1 and rounds >= 1, got {n} and {rounds}")
    templates = dict(reprompt_template=reprompt_template, solution_template=solution_template,
                     feedback_template=feedback_template)
    current, seen = prompt, []
    for r in range(1, rounds + 1):
        seen.append(current)
        ro = sample(model, tokenizer, [current], max_new_tokens=max_new_tokens, temperature=temperature,
                    num_return_sequences=n)
        completions, scores, feedbacks = score_completions(reward_fn, prompt, ro.texts, columns)  # scored vs q
        best = max(range(n), key=lambda i: scores[i])
        if scores[best] >= success_threshold:
            first = next(i for i in range(n) if scores[i] >= success_threshold)
            return MultiTurnResult(True, r, r * n, ro.texts[best], seen, (r - 1) * n + first + 1)
        attempt = (completion_text(completions[best]) or None) if show_best_attempt else None
        current = reprompt(prompt, attempt, feedbacks[best] or None, **templates)   # "" or None: no section
    return MultiTurnResult(False, rounds, rounds * n, None, seen, rounds * n)


@torch.no_grad()
def first_success(model, tokenizer, prompt, reward_fn: Callable, *, columns: dict, n: int,
                  batch_size: int | None = None, max_new_tokens: int = 8, temperature: float = 1.0,
                  success_threshold: float = 1.0) -> int | None:
    """The 1-based index of the first success among up to ``n`` plain samples of ``prompt`` (None:
    none succeeded). ``batch_size`` samples a call, stopping after the batch with a success
    (None: all ``n`` in one call, best-of-N's draws)."""
    if n < 1 or (batch_size is not None and batch_size < 1):
        raise ValueError(f"need n >= 1 and batch_size >= 1, got {n} and {batch_size}")
    drawn, step = 0, batch_size or n
    while drawn < n:
        b = min(step, n - drawn)
        texts = sample(model, tokenizer, [prompt], max_new_tokens=max_new_tokens, temperature=temperature,
                       num_return_sequences=b).texts
        _, scores, _ = score_completions(reward_fn, prompt, texts, columns)
        hit = next((i for i, s in enumerate(scores) if s >= success_threshold), None)
        if hit is not None:
            return drawn + hit + 1
        drawn += b
    return None


def best_of_n(model, tokenizer, prompt, reward_fn: Callable, *, columns: dict, n: int, max_new_tokens: int = 8,
              temperature: float = 1.0, success_threshold: float = 1.0) -> bool:
    """Does any of ``n`` samples of the plain prompt succeed?"""
    return first_success(model, tokenizer, prompt, reward_fn, columns=columns, n=n, max_new_tokens=max_new_tokens,
                         temperature=temperature, success_threshold=success_threshold) is not None


def compare_multi_turn_with_best_of_n(model, tokenizer, task, rows: Sequence[dict], reward_fn: Callable, *,
                                      n: int = 8, rounds: int = 3, max_new_tokens: int | None = None,
                                      temperature: float = 1.0, seed: int = 0, **kwargs) -> dict:
    """On the rows the greedy policy gets wrong: the fraction each method solves and the samples
    multi-turn reprompting used (best-of-N always draws N x R). Returns a dict of figures:
    ``multi_turn_solved``, ``multi_turn_mean_samples``, ``multi_turn_solved_after_round`` (R,
    cumulative), ``best_of_n_solved``, ``best_of_n_samples``, and ``rows``, ``greedy_failed``,
    ``n``, ``rounds``. ``kwargs`` go to ``multi_turn_reprompting`` (templates, ...)."""
    max_new_tokens = max_new_tokens or task.max_completion_tokens()
    greedy = generate_completions(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens=max_new_tokens)
    failed = [r for r, g in zip(rows, greedy) if not task.is_correct(g, r[task.answer_column])]
    torch.manual_seed(seed)
    multi = [multi_turn_reprompting(model, tokenizer, r["prompt"], reward_fn, columns={"answer": r["answer"]}, n=n,
                                    rounds=rounds, max_new_tokens=max_new_tokens, temperature=temperature, **kwargs)
             for r in failed]
    torch.manual_seed(seed)
    bon = [best_of_n(model, tokenizer, r["prompt"], reward_fn, columns={"answer": r["answer"]}, n=n * rounds,
                     max_new_tokens=max_new_tokens, temperature=temperature) for r in failed]
    k = max(1, len(failed))
    return {"rows": len(rows), "greedy_failed": len(failed), "n": n, "rounds": rounds,
            "multi_turn_solved": sum(t.solved for t in multi) / k, "best_of_n_solved": sum(bon) / k,
            "multi_turn_mean_samples": sum(t.samples for t in multi) / k, "best_of_n_samples": n * rounds,
            "multi_turn_solved_after_round": [sum(t.solved and t.rounds <= r for t in multi) / k
                                              for r in range(1, rounds + 1)]}
