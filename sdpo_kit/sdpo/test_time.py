"""Test-time self-distillation (the design notes' phase 9): solve one question by reprompting, no training.

    round 1:   sample N candidates for the question; score them (reward and feedback)
    round r:   reprompt with the feedback of the best candidate so far (and, with a partial-credit
               reward, the best candidate itself as the attempt to improve on), sample N again
    stop at the first success or after R rounds

``test_time_self_distillation`` runs it on one question; ``compare_with_best_of_n`` measures it
on held-out rows against the fair baseline, best-of-N with the same number of samples the
reprompting loop may use (N x R), on the rows the greedy policy gets wrong: how many each
solves (discovery rate) and how many samples that took.

Optional test-time *training* (``train_steps > 0``, off by default): after each failed round,
a few SDPO steps on that question alone. The student is a copy of the policy (the policy itself
is never changed), trained on the round's candidates towards the frozen policy reprompted with
the round's feedback (``teacher_model_kind="base"``, ``losses.sdpo_loss``); the next round
samples from the trained copy. Needs feedback: a round whose best candidate has none trains nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from sdpo_kit.core.sampling import completion_logits, encode_prompts, generate_completions, sample
from sdpo_kit.lab.tasks import completion_text
from sdpo_kit.rewards import call_reward_with_feedback
from sdpo_kit.sdpo.loss import sdpo_loss
from sdpo_kit.sdpo.reprompt import FEEDBACK_TEMPLATE, REPROMPT_TEMPLATE, SOLUTION_TEMPLATE


@dataclass
class TestTimeResult:
    """What one question's reprompting loop did."""

    solved: bool
    rounds: int                  # rounds run (1 = solved or stopped in the first)
    samples: int                 # completions sampled in all
    answer: str | None           # the first successful completion's text
    prompts: list = field(default_factory=list)  # the prompt of each round (the reprompts, for reading)
    distill_losses: list = field(default_factory=list)  # test-time training: the loss of every SDPO step


def _reprompt(prompt, attempt: str | None, feedback: str | None, reprompt_template: str, solution_template: str,
              feedback_template: str):
    solution = solution_template.format(successful_previous_attempt=attempt) if attempt else ""
    fb = feedback_template.format(feedback_raw=feedback) if feedback else ""
    if isinstance(prompt, str):
        return reprompt_template.format(prompt=prompt, solution=solution, feedback=fb)
    text = reprompt_template.format(prompt=prompt[-1]["content"], solution=solution, feedback=fb)
    return list(prompt[:-1]) + [{"role": "user", "content": text}]


def test_time_step(student, optimizer, teacher, tokenizer, prompt, teacher_prompt, ro, temperature: float) -> float:
    """One SDPO step of test-time training: the student on (question, candidates) towards the
    frozen teacher on (reprompt, the same candidates); sampled-token loss. Returns the loss."""
    n = ro.completion_ids.size(0)
    s_enc = encode_prompts(tokenizer, [prompt] * n, ro.completion_ids.device)              # (n, P)
    t_enc = encode_prompts(tokenizer, [teacher_prompt] * n, ro.completion_ids.device)      # (n, P')
    with torch.no_grad():
        t = completion_logits(teacher, t_enc["input_ids"], t_enc["attention_mask"], ro.completion_ids,
                              ro.completion_mask) / temperature                            # (n, T, V)
    with torch.enable_grad():
        s = completion_logits(student, s_enc["input_ids"], s_enc["attention_mask"], ro.completion_ids,
                              ro.completion_mask) / temperature                            # (n, T, V)
        loss, _ = sdpo_loss(s, t, ro.completion_ids, ro.completion_mask.to(s.dtype), mode="sampled_token")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return loss.item()


@torch.no_grad()
def test_time_self_distillation(model, tokenizer, prompt, reward_fn: Callable, *, columns: dict, n: int = 8,
                                rounds: int = 3, max_new_tokens: int = 8, temperature: float = 1.0,
                                success_threshold: float = 1.0, show_best_attempt: bool = False,
                                reprompt_template: str = REPROMPT_TEMPLATE, solution_template: str = SOLUTION_TEMPLATE,
                                feedback_template: str = FEEDBACK_TEMPLATE, train_steps: int = 0,
                                train_lr: float = 1e-4) -> TestTimeResult:
    """Reprompt one question until a candidate succeeds or ``rounds`` run out (module docstring).

    ``reward_fn``: a TRL-signature reward (floats or ``{"score", "feedback"}``); ``columns`` its
    dataset columns for this one row (``{"answer": "9"}``). ``show_best_attempt`` also puts the
    best-scoring failed candidate in the reprompt (useful with partial credit). ``train_steps``
    SDPO steps (AdamW, ``train_lr``) on a copy of ``model`` after each failed round with feedback;
    0 (default): no training, ``model`` is the only model."""
    if train_steps < 0 or n < 1 or rounds < 1:
        raise ValueError(f"need n >= 1, rounds >= 1 and train_steps >= 0, got {n}, {rounds}, {train_steps}")
    current, seen, losses = prompt, [], []
    student, optimizer = model, None
    for r in range(1, rounds + 1):
        seen.append(current)
        ro = sample(student, tokenizer, [current], max_new_tokens=max_new_tokens, temperature=temperature,
                    num_return_sequences=n)
        chat = not isinstance(prompt, str)
        completions = [[{"role": "assistant", "content": t}] if chat else t for t in ro.texts]
        scores, feedbacks = call_reward_with_feedback(reward_fn, [prompt] * n, completions,
                                                      **{k: [v] * n for k, v in columns.items()})
        best = max(range(n), key=lambda i: scores[i])
        if scores[best] >= success_threshold:
            return TestTimeResult(True, r, r * n, ro.texts[best], seen, losses)
        attempt = completion_text(completions[best]) if show_best_attempt else None
        current = _reprompt(prompt, attempt, feedbacks[best], reprompt_template, solution_template, feedback_template)
        if train_steps and feedbacks[best] and r < rounds:   # the teacher: the frozen policy, shown the feedback
            if optimizer is None:
                student = copy.deepcopy(model).requires_grad_(True)
                optimizer = torch.optim.AdamW(student.parameters(), lr=train_lr)
            losses += [test_time_step(student, optimizer, model, tokenizer, prompt, current, ro, temperature)
                       for _ in range(train_steps)]
    return TestTimeResult(False, rounds, rounds * n, None, seen, losses)


@torch.no_grad()
def best_of_n(model, tokenizer, prompt, reward_fn: Callable, *, columns: dict, n: int, max_new_tokens: int = 8,
              temperature: float = 1.0, success_threshold: float = 1.0) -> bool:
    """Does any of ``n`` samples of the plain prompt succeed?"""
    ro = sample(model, tokenizer, [prompt], max_new_tokens=max_new_tokens, temperature=temperature,
                num_return_sequences=n)
    chat = not isinstance(prompt, str)
    completions = [[{"role": "assistant", "content": t}] if chat else t for t in ro.texts]
    scores, _ = call_reward_with_feedback(reward_fn, [prompt] * n, completions, **{k: [v] * n for k, v in columns.items()})
    return max(scores) >= success_threshold


def compare_with_best_of_n(model, tokenizer, task, rows: Sequence[dict], reward_fn: Callable, *, n: int = 8,
                           rounds: int = 3, max_new_tokens: int | None = None, temperature: float = 1.0,
                           seed: int = 0, **kwargs) -> dict:
    """On the rows the greedy policy gets wrong: the fraction each method solves and the samples
    test-time self-distillation used (best-of-N always draws N x R). Returns a dict of figures."""
    max_new_tokens = max_new_tokens or task.max_completion_tokens()
    greedy = generate_completions(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens=max_new_tokens)
    failed = [r for r, g in zip(rows, greedy) if not task.is_correct(g, r[task.answer_column])]
    torch.manual_seed(seed)
    ttsd = [test_time_self_distillation(model, tokenizer, r["prompt"], reward_fn, columns={"answer": r["answer"]},
                                        n=n, rounds=rounds, max_new_tokens=max_new_tokens, temperature=temperature,
                                        **kwargs) for r in failed]
    torch.manual_seed(seed)
    bon = [best_of_n(model, tokenizer, r["prompt"], reward_fn, columns={"answer": r["answer"]}, n=n * rounds,
                     max_new_tokens=max_new_tokens, temperature=temperature) for r in failed]
    k = max(1, len(failed))
    return {"rows": len(rows), "greedy_failed": len(failed), "n": n, "rounds": rounds,
            "ttsd_solved": sum(t.solved for t in ttsd) / k, "best_of_n_solved": sum(bon) / k,
            "ttsd_mean_samples": sum(t.samples for t in ttsd) / k, "best_of_n_samples": n * rounds,
            "ttsd_solved_after_round": [sum(t.solved and t.rounds <= r for t in ttsd) / k for r in range(1, rounds + 1)]}
