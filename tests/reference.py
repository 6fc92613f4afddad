"""Naive reference implementations of ``sdpo_kit.losses``, for the tests only.

Each function loops in plain Python over sequences and tokens (and over the vocabulary),
on Python floats in double precision, and shares no code with the library: it is written
from the equations in the library's docstrings and TRL 1.16's ``GRPOTrainer._compute_loss``.
Inputs are tensors or nested lists; outputs are floats or nested lists of floats.
"""

from __future__ import annotations

import math


def _rows(x):
    """A (B, T) tensor or nested list as a list of lists of floats."""
    return [[float(v) for v in row] for row in (x.tolist() if hasattr(x, "tolist") else x)]


def _vec(x):
    """A (B,) tensor or list as a list of floats."""
    return [float(v) for v in (x.tolist() if hasattr(x, "tolist") else x)]


def token_logprobs(logits, labels, temperature: float = 1.0):
    """log softmax(logits[b, t] / temperature)[labels[b, t]], one token at a time."""
    logits = logits.tolist()
    labels = labels.tolist()
    out = []
    for b in range(len(labels)):
        row = []
        for t in range(len(labels[b])):
            z = [v / temperature for v in logits[b][t]]
            m = max(z)
            log_norm = m + math.log(sum(math.exp(v - m) for v in z))
            row.append(z[labels[b][t]] - log_norm)
        out.append(row)
    return out


def masked_mean(x, mask, dim=None):
    """Mean of x over the positions where mask is 1: all (dim=None) or per row (dim=1)."""
    x, mask = _rows(x), _rows(mask)
    if dim is None:
        total, count = 0.0, 0.0
        for b in range(len(x)):
            for t in range(len(x[b])):
                total += x[b][t] * mask[b][t]
                count += mask[b][t]
        return total / max(count, 1.0)
    assert dim == 1
    out = []
    for b in range(len(x)):
        total, count = 0.0, 0.0
        for t in range(len(x[b])):
            total += x[b][t] * mask[b][t]
            count += mask[b][t]
        out.append(total / max(count, 1.0))
    return out


def kl(kind: str, logp, ref_logp):
    """Per-token KL estimator ``kind`` in {"k1", "k2", "k3"}, with r = pi_ref / pi."""
    logp, ref_logp = _rows(logp), _rows(ref_logp)
    out = []
    for b in range(len(logp)):
        row = []
        for t in range(len(logp[b])):
            log_r = ref_logp[b][t] - logp[b][t]
            if kind == "k1":
                row.append(-log_r)
            elif kind == "k2":
                row.append(0.5 * log_r * log_r)
            else:
                row.append(math.exp(log_r) - 1.0 - log_r)
        out.append(row)
    return out


def _mean(xs):
    return sum(xs) / len(xs)


def _std_unbiased(xs):
    if len(xs) < 2:
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def group_advantages(rewards, num_generations: int, scale_rewards: str = "group", eps: float = 1e-4):
    """(r_i - mean of its group) / (unbiased std of the group or the batch + eps), or no division."""
    rewards = _vec(rewards)
    batch_std = _std_unbiased(rewards)
    out = []
    for start in range(0, len(rewards), num_generations):
        group = rewards[start:start + num_generations]
        mean, std = _mean(group), _std_unbiased(group)
        for r in group:
            if scale_rewards == "group":
                out.append((r - mean) / (std + eps))
            elif scale_rewards == "batch":
                out.append((r - mean) / (batch_std + eps))
            else:
                out.append(r - mean)
    return out


def aggregate_loss(per_token_loss, mask, loss_type: str, max_completion_length=None):
    """The four GRPO normalisations, written as TRL 1.16 computes them for one process."""
    loss, mask = _rows(per_token_loss), _rows(mask)
    B, T = len(loss), len(loss[0])
    if loss_type == "grpo":  # mean over sequences of the per-sequence token mean
        total = 0.0
        for b in range(B):
            seq = sum(loss[b][t] * mask[b][t] for t in range(T))
            total += seq / max(sum(mask[b]), 1.0)
        return total / B
    masked_total = sum(loss[b][t] * mask[b][t] for b in range(B) for t in range(T))
    if loss_type in ("bnpo", "dapo"):  # token mean over the batch (dapo: num_items_in_batch)
        return masked_total / max(sum(sum(row) for row in mask), 1.0)
    if loss_type == "dr_grpo":  # constant normaliser B * L_max
        L = T if max_completion_length is None else max_completion_length
        return masked_total / (B * L)
    raise ValueError(loss_type)


def grpo_loss(logp, old_logp, advantages, mask, *, ref_logp=None, beta=0.0, epsilon=0.2,
              epsilon_high=None, loss_type="dapo", max_completion_length=None,
              use_bias_correction_kl=True):
    """Token by token: ratio, two-sided clip, pessimistic min, k3 KL; then aggregate.

    Returns ``(loss, stats)`` as floats; stats has clip_frac_low/high, clip_frac, ratio_mean,
    kl (the raw k3, no ratio correction) and policy_loss (the surrogate alone, no beta * KL).
    """
    logp, old_logp, mask = _rows(logp), _rows(old_logp), _rows(mask)
    ref = _rows(ref_logp) if ref_logp is not None else None
    adv = advantages.tolist() if hasattr(advantages, "tolist") else advantages
    eps_high = epsilon if epsilon_high is None else epsilon_high
    B, T = len(logp), len(logp[0])

    per_token, surrogate, low, high, region, ratios, kls = [], [], [], [], [], [], []
    for b in range(B):
        rows = [[] for _ in range(7)]
        for t in range(T):
            a = float(adv[b][t]) if isinstance(adv[b], list) else float(adv[b])
            ratio = math.exp(logp[b][t] - old_logp[b][t])
            clipped = min(max(ratio, 1.0 - epsilon), 1.0 + eps_high)
            surr = -min(ratio * a, clipped * a)
            loss, k = surr, 0.0
            if ref is not None:
                log_r = ref[b][t] - logp[b][t]
                k = math.exp(log_r) - 1.0 - log_r
                loss += beta * k * (ratio if use_bias_correction_kl else 1.0)
            is_low = 1.0 if (ratio < 1.0 - epsilon and a < 0) else 0.0
            is_high = 1.0 if (ratio > 1.0 + eps_high and a > 0) else 0.0
            for lst, v in zip(rows, (loss, surr, is_low, is_high, max(is_low, is_high), ratio, k)):
                lst.append(v)
        for lst, v in zip((per_token, surrogate, low, high, region, ratios, kls), rows):
            lst.append(v)

    loss = aggregate_loss(per_token, mask, loss_type, max_completion_length)
    stats = {
        "clip_frac_low": masked_mean(low, mask),
        "clip_frac_high": masked_mean(high, mask),
        "clip_frac": masked_mean(region, mask),
        "ratio_mean": masked_mean(ratios, mask),
        "kl": masked_mean(kls, mask),
        "policy_loss": aggregate_loss(surrogate, mask, loss_type, max_completion_length),
    }
    return loss, stats
