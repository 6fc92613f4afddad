"""How good is the self-teacher? What the model does with the context SDPO gives it.

    teacher_quality(model, tokenizer, task, rows) -> dict

SDPO's teacher is the model itself with a successful sibling's answer or the checker's feedback
in its prompt (``reprompt.py``); it can only teach what the model can read out of that context.
On ``rows`` (held-out, say) this measures, greedy and teacher-forced:

    plain_acc            the student: greedy accuracy on the plain prompt
    demo_acc             reprompted with the right answer as a successful sibling's
    feedback_acc         on the rows the student gets wrong: reprompted with the checker's feedback
                         on the student's own (greedy) attempt, no demonstration
    right_token_frac     in the student's wrong completions of the right length: the share of
                         tokens that are right (is a wrong answer wrong in a few tokens only?)
    token_win_demo       at each wrong token of those completions, whether the teacher puts more
    token_win_feedback   probability than the student on the right token, given the same prefix
                         (teacher-forced on the student's completion): the share of wrong tokens
                         where it does, with the demonstration / with the feedback in context

A teacher that only copies the demonstration scores 1 on ``demo_acc``; a token win above 0.5
means the teacher's per-token signal points the right way more often than not.

Per-token comparisons read one token per character (the tiny lab's tokenizer).

Left out on purpose: sampled attempts (greedy keeps the probe deterministic; SDPO samples at
its temperature) and the chat template's system turn.
"""

from __future__ import annotations

import torch

from sdpo_kit.core.sampling import completion_logits, encode_prompts, generate_completions
from sdpo_kit.text.reprompt import reprompt


def _greedy(model, tokenizer, prompts, max_new_tokens, batch_size) -> list[str]:
    out = []
    for i in range(0, len(prompts), batch_size):
        out += generate_completions(model, tokenizer, prompts[i:i + batch_size], max_new_tokens=max_new_tokens)
    return out


def _judge(task, completions, answers) -> tuple[list[bool], list[str | None]]:
    """(right?, the checker's feedback on each wrong one) per completion: one batch where the task scores
    batches (``task.scored``: the lab's code task, each distinct program run once in the sandbox), else
    ``task.is_correct`` and ``task.feedback``."""
    if hasattr(task, "scored"):
        scored = task.scored(completions, answers)
        return [s["score"] == 1.0 for s in scored], [None if s["score"] == 1.0 else s["feedback"] for s in scored]
    ok = [task.is_correct(c, a) for c, a in zip(completions, answers)]
    return ok, [None if good else task.feedback(c, a) for c, a, good in zip(completions, answers, ok)]


def _correct(task, completions, answers) -> list[bool]:
    return _judge(task, completions, answers)[0]


@torch.no_grad()
def _right_token_probs(model, tokenizer, prompts, completions, rights, batch_size) -> list[list[float]]:
    """p(right token at t | prompt, completion_<t) for each row's characters (teacher forcing)."""
    probs = []
    device = next(model.parameters()).device   # the model's device: a GPU on Colab
    for i in range(0, len(prompts), batch_size):
        enc = encode_prompts(tokenizer, prompts[i:i + batch_size], device)
        comp = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in completions[i:i + batch_size]]
        want = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in rights[i:i + batch_size]]
        T = max(len(c) for c in comp)
        ids = torch.full((len(comp), T), tokenizer.pad_token_id, dtype=torch.long)   # (b, T)
        mask = torch.zeros((len(comp), T), dtype=torch.long)                         # (b, T)
        for j, c in enumerate(comp):
            ids[j, :len(c)], mask[j, :len(c)] = torch.tensor(c), 1
        p = completion_logits(model, enc["input_ids"], enc["attention_mask"], ids.to(device),
                              mask.to(device)).softmax(-1)                                  # (b, T, V)
        for j, w in enumerate(want):
            probs.append([p[j, t, w[t]].item() for t in range(len(w))])
    return probs


def teacher_quality(model, tokenizer, task, rows: list[dict], *, batch_size: int = 128,
                    max_new_tokens: int | None = None, **templates) -> dict:
    """The measures in the module docstring, on ``rows`` (chat rows with the task's answer column).
    ``templates``: ``reprompt``'s template keywords (TRL's defaults when left out)."""
    if not rows:
        raise ValueError("teacher_quality needs at least one row")
    col = task.answer_column
    max_new_tokens = max_new_tokens or task.max_completion_tokens()
    prompts = [r["prompt"] for r in rows]
    rights = [task.format_answer(r[col]) for r in rows]
    student = _greedy(model, tokenizer, prompts, max_new_tokens, batch_size)
    answers = [r[col] for r in rows]
    ok, feedback = _judge(task, student, answers)       # a task that scores batches: the sandbox runs once
    demo_prompts = [reprompt(p, right, None, **templates) for p, right in zip(prompts, rights)]
    demo = _greedy(model, tokenizer, demo_prompts, max_new_tokens, batch_size)
    wrong = [i for i, good in enumerate(ok) if not good]
    said = [feedback[i] for i in wrong]
    fb_prompts = [reprompt(prompts[i], None, text, **templates) for i, text in zip(wrong, said)]
    fb = _greedy(model, tokenizer, fb_prompts, max_new_tokens, batch_size) if wrong else []
    out = {"n": len(rows), "plain_acc": sum(ok) / len(rows),
           "demo_acc": sum(_correct(task, demo, answers)) / len(rows),
           "feedback_acc": (sum(_correct(task, fb, [answers[i] for i in wrong])) / len(wrong)
                            if wrong else float("nan")),
           "n_wrong": len(wrong)}
    # the student's wrong completions with as many characters as the right one: per-token comparisons
    same = [i for i in wrong if len(student[i].strip()) == len(rights[i])]
    out["n_wrong_same_length"] = len(same)
    if not same:
        return {**out, "right_token_frac": float("nan"), "token_win_demo": float("nan"),
                "token_win_feedback": float("nan")}
    comps = [student[i].strip() for i in same]
    rts = [rights[i] for i in same]
    p_student = _right_token_probs(model, tokenizer, [prompts[i] for i in same], comps, rts, batch_size)
    p_demo = _right_token_probs(model, tokenizer, [demo_prompts[i] for i in same], comps, rts, batch_size)
    fb_of = dict(zip(wrong, fb_prompts))
    p_fb = _right_token_probs(model, tokenizer, [fb_of[i] for i in same], comps, rts, batch_size)
    n_right = n_tok = 0
    wins_demo, wins_fb = [], []
    for k, (c, r) in enumerate(zip(comps, rts)):
        n_tok += len(r)
        for t, (a, b) in enumerate(zip(c, r)):
            if a == b:
                n_right += 1
            else:
                wins_demo.append(p_demo[k][t] > p_student[k][t])
                wins_fb.append(p_fb[k][t] > p_student[k][t])
    out.update(right_token_frac=n_right / n_tok,
               token_win_demo=sum(wins_demo) / len(wins_demo),
               token_win_feedback=sum(wins_fb) / len(wins_fb))
    return out
