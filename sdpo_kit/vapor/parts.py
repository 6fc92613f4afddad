"""The pieces both VAPOR trainers (scratch and TRL) share: span masks and the preference forwards.

    completion_span_mask(tokenizer, completion_ids, completion_mask, tags)   -> (B, T) mask
    preference_batch(tokenizer, prompts, chosen, rejected, tags, device)    -> PreferenceBatch
    preference_span_logps(model, batch, temperature)                        -> (chosen (P,), rejected (P,))
    reference_span_logps(model, ref_model, batch, temperature)              -> the same under pi_ref

A preference sequence is the prompt followed by the chosen (or rejected) text; its preference
span is the tokens between ``preference_term_split``'s tags, and log pi(y) is the sum of the
span's token log-probs (``vapor.loss.preference_log_term`` takes those sums).

The reference is a frozen copy of the starting policy, or, for a PEFT / LoRA policy, the same
model with its adapters disabled (no second copy of the weights on a T4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from sdpo_kit.core.sampling import completion_logprobs, encode_prompts
from sdpo_kit.vapor.spans import find_span_token_indices, token_char_offsets


def completion_span_mask(tokenizer, completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                         tags: Sequence[str]) -> torch.Tensor:
    """(B, T) 1 on each completion's tokens between ``tags`` (the first complete pair), 0 where
    the completion has no such span. The text is decoded from the generated ids themselves."""
    mask = torch.zeros_like(completion_mask)                                   # (B, T)
    for b, (ids, n) in enumerate(zip(completion_ids.tolist(), completion_mask.sum(1).tolist())):
        text, offsets = token_char_offsets(tokenizer, ids[:n])
        span = find_span_token_indices(text, tags[0], tags[1], offsets=offsets)
        if span is not None:
            mask[b, span.start:span.stop] = 1
    return mask


@dataclass
class PreferenceBatch:
    """P prompts' chosen and rejected sequences as one batch of 2P rows: chosen rows first."""

    prompt_ids: torch.Tensor       # (2P, L) left-padded
    prompt_mask: torch.Tensor      # (2P, L)
    completion_ids: torch.Tensor   # (2P, T) right-padded chosen / rejected text
    completion_mask: torch.Tensor  # (2P, T)
    span_mask: torch.Tensor        # (2P, T) 1 on the preference span's tokens
    found: torch.Tensor            # (P,) 1 where both the chosen and the rejected span were found


def preference_batch(tokenizer, prompts: Sequence, chosen: Sequence[str], rejected: Sequence[str],
                     tags: Sequence[str], device=None) -> PreferenceBatch:
    """Encode each prompt with its chosen and its rejected text, and find their preference spans."""
    P = len(prompts)
    texts = list(chosen) + list(rejected)
    enc = encode_prompts(tokenizer, list(prompts) + list(prompts), device)
    pieces = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    T = max((len(ids) for ids in pieces["input_ids"]), default=0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((2 * P, T), pad, dtype=torch.long)                        # (2P, T)
    mask = torch.zeros((2 * P, T), dtype=torch.long)                           # (2P, T)
    span = torch.zeros((2 * P, T), dtype=torch.long)                           # (2P, T)
    for r, (row_ids, offsets, text) in enumerate(zip(pieces["input_ids"], pieces["offset_mapping"], texts)):
        ids[r, :len(row_ids)] = torch.tensor(row_ids, dtype=torch.long)
        mask[r, :len(row_ids)] = 1
        found = find_span_token_indices(text, tags[0], tags[1], offsets=offsets)
        if found is not None:
            span[r, found.start:found.stop] = 1
    has = span.sum(1) > 0                                                      # (2P,)
    both = (has[:P] & has[P:]).long()                                          # (P,)
    to = (lambda x: x.to(device)) if device is not None else (lambda x: x)
    return PreferenceBatch(enc["input_ids"], enc["attention_mask"], to(ids), to(mask), to(span), to(both))


def preference_span_logps(model, batch: PreferenceBatch, temperature: float = 1.0):
    """(log pi(y_w), log pi(y_l)), each (P,): summed token log-probs over the preference spans."""
    logp = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                               batch.completion_mask, temperature)             # (2P, T)
    sums = (logp * batch.span_mask).sum(1)                                     # (2P,)
    P = sums.size(0) // 2
    return sums[:P], sums[P:]                                                  # (P,), (P,)


@contextlib.contextmanager
def as_reference(model, ref_model):
    """The model to score with under pi_ref: ``ref_model``, or the PEFT policy with adapters off."""
    if ref_model is not None:
        yield ref_model
    elif hasattr(model, "disable_adapter"):
        with model.disable_adapter():
            yield model
    else:
        raise ValueError("no reference: pass a frozen copy, or a PEFT model whose adapters can be disabled")


@torch.no_grad()
def reference_span_logps(model, ref_model, batch: PreferenceBatch, temperature: float = 1.0):
    """``preference_span_logps`` under the reference (no gradients)."""
    with as_reference(model, ref_model) as ref:
        return preference_span_logps(ref, batch, temperature)


@torch.no_grad()
def preference_margin(model, tokenizer, rows: Sequence[dict], tags: Sequence[str], batch_size: int = 256) -> dict:
    """Does the policy prefer chosen over rejected? Over ``rows`` (e.g. held-out pairs it never
    saw): ``margin`` = mean of log pi(y_w) - log pi(y_l) (span sums, no reference) and
    ``accuracy`` = fraction with a positive margin, over the pairs whose spans were found."""
    from sdpo_kit.core.utils import eval_mode

    margins = []
    device = next(model.parameters()).device
    with eval_mode(model):
        for i in range(0, len(rows), batch_size):
            chunk = rows[i:i + batch_size]
            batch = preference_batch(tokenizer, [r["prompt"] for r in chunk], [r["chosen"] for r in chunk],
                                     [r["rejected"] for r in chunk], tags, device)
            chosen, rejected = preference_span_logps(model, batch)                            # (P,), (P,)
            margins += [float(m) for m, f in zip((chosen - rejected).tolist(), batch.found.tolist()) if f]
    if not margins:
        return {"margin": 0.0, "accuracy": 0.0, "pairs": 0}
    return {"margin": sum(margins) / len(margins), "accuracy": sum(m > 0 for m in margins) / len(margins),
            "pairs": len(margins)}
