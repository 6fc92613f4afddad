"""VAPOR: a verifiable-reward ratio on a tagged span times a DPO-style preference term, inside
PPO's clipped surrogate. Not a published method: an objective this project's own design proposed,
made precise here and studied as a case.

For a prompt p with G sampled completions o_i, the verifiable span S_i of each (the tokens
between the verifiable tags, ``span_mask``) and one chosen / rejected pair (y_w, y_l):

    log v_i = mean_{t in S_i} (logp_it - old_logp_it)          (0 when S_i is empty / not found)
    log P_p = preference_beta * ((log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l)))
    log h_i = clamp(log v_i + log P_p, -20, 20),   h_i = exp(log h_i)     (log space: no overflow)
    A_i     = r_i - mean_{j in group} r_j                        (no std scaling, as VAPOR is specified)
    loss    = mean_i -min(h_i A_i, clip(h_i, 1 - epsilon, 1 + epsilon_high) A_i)

Names: in TRL, ``beta`` is the KL weight, and it keeps that meaning here (the trainers add
``beta * vapor_kl``, GRPO's ratio-weighted k3 KL to the reference, separately); the preference
term's temperature is ``preference_beta``. Dimension letters as in ``core.logprobs``, plus P prompts (B = P * G).

Also here: ``preference_dpo_loss``, DPO's ``-log sigmoid(log P)`` on the same pairs, the
preference half of the additive variant (GRPO on the span plus lambda x DPO) that the VAPOR
notebook compares with the product form.

Left out on purpose: token-level preference terms and several pairs per prompt (one pair per
prompt, as VAPOR is specified).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sdpo_kit.core.logprobs import check_same_shape, kl_k3, kl_penalty, masked_mean

LOG_H_BOUND = 20.0  # |log h| is clamped here: exp(20) ~ 5e8 is finite in fp32, exp(1000) is not


def preference_log_term(policy_chosen: torch.Tensor, ref_chosen: torch.Tensor, policy_rejected: torch.Tensor,
                        ref_rejected: torch.Tensor, beta: float) -> torch.Tensor:
    """log P = beta * ((log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))), DPO's
    implicit reward margin (Rafailov et al. 2023, arXiv:2305.18290).

    Each argument is (P,): the sum of token log-probs over a preference span, under the policy
    or the frozen reference. ``beta`` here is VAPOR's ``preference_beta``. Returns (P,). A pair
    whose span was not found should get log P = 0 (the caller masks it)."""
    for name, x in (("ref_chosen", ref_chosen), ("policy_rejected", policy_rejected), ("ref_rejected", ref_rejected)):
        if x.shape != policy_chosen.shape or policy_chosen.dim() != 1:
            raise ValueError(f"policy_chosen and {name} must both be (P,), got {tuple(policy_chosen.shape)} "
                             f"and {tuple(x.shape)}")
    return beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected))  # (P,)


def vapor_loss(logp: torch.Tensor, old_logp: torch.Tensor, span_mask: torch.Tensor, advantages: torch.Tensor,
               log_preference: torch.Tensor, *, num_generations: int, epsilon: float = 0.2,
               epsilon_high: float | None = None):
    """VAPOR's clipped surrogate (module docstring), exactly; nothing added.

    Args (shapes):

        logp, old_logp: (B, T) per-token log-probs of the completions (only ``logp`` has gradients).
        span_mask: (B, T) 1 on the verifiable span's tokens (all 0 where no span was found: v = 1).
        advantages: (B,) A_i = r_i - mean of its group (``group_advantages(r, G, "none")``).
        log_preference: (P,) log P_p of each prompt, B = P * G rows in groups of G.

    Returns ``(loss, stats)``; stats: ``h_mean``, ``log_preference_mean``, ``verifiable_ratio_mean``
    (mean v), ``clip_frac_low``, ``clip_frac_high``, ``clip_frac`` (sequences whose clip is
    active), ``span_found_frac``.
    """
    check_same_shape(logp, old_logp=old_logp, span_mask=span_mask)
    B, G = logp.size(0), num_generations
    if G < 1 or B % G or log_preference.shape != (B // G,) or advantages.shape != (B,):
        raise ValueError(f"need B = P * G rows: logp {tuple(logp.shape)}, G={G}, advantages "
                         f"{tuple(advantages.shape)}, log_preference {tuple(log_preference.shape)}")
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    span_mask = span_mask.to(logp.dtype)

    log_v = masked_mean(logp - old_logp, span_mask, dim=1)                     # (B,) 0 on an empty span
    log_P = log_preference.repeat_interleave(G)                                # (B,)
    log_h = torch.clamp(log_v + log_P, -LOG_H_BOUND, LOG_H_BOUND)              # (B,)
    h = torch.exp(log_h)                                                       # (B,)
    clipped = torch.clamp(h, 1 - epsilon, 1 + epsilon_high)                    # (B,)
    loss = (-torch.min(h * advantages, clipped * advantages)).mean()           # scalar

    with torch.no_grad():
        low = ((h < 1 - epsilon) & (advantages < 0)).to(logp.dtype)           # (B,)
        high = ((h > 1 + epsilon_high) & (advantages > 0)).to(logp.dtype)     # (B,)
        stats = {
            "h_mean": h.mean(),
            "log_preference_mean": log_preference.detach().mean(),
            "verifiable_ratio_mean": torch.exp(log_v).mean(),
            "clip_frac_low": low.mean(),
            "clip_frac_high": high.mean(),
            "clip_frac": torch.maximum(low, high).mean(),
            "span_found_frac": (span_mask.sum(1) > 0).to(logp.dtype).mean(),
        }
    return loss, stats


def preference_dpo_loss(log_preference: torch.Tensor, found: torch.Tensor | None = None):
    """DPO's loss on the pairs: mean_p -log sigmoid(log P_p) over the pairs whose spans were found.

    ``log_preference`` (P,) from ``preference_log_term``; ``found`` (P,) 1 where both spans were
    found (default: all). Returns ``(loss, stats)`` with ``margin_mean`` (mean log P) and
    ``accuracy`` (fraction with log P > 0)."""
    found = torch.ones_like(log_preference) if found is None else found.to(log_preference.dtype)
    per_pair = -F.logsigmoid(log_preference)                                   # (P,)
    loss = (per_pair * found).sum() / found.sum().clamp(min=1.0)               # scalar
    with torch.no_grad():
        n = found.sum().clamp(min=1.0)
        stats = {"margin_mean": (log_preference * found).sum() / n,
                 "accuracy": ((log_preference > 0).to(found.dtype) * found).sum() / n}
    return loss, stats


def vapor_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, old_logp: torch.Tensor | None = None):
    """The KL term both VAPOR trainers add as ``beta * penalty``: GRPO's per-token penalty
    (``core.logprobs.kl_penalty``: k3 times the importance ratio, as ``grpo_loss`` and TRL's
    ``use_bias_correction_kl``), token mean over the completion mask (DAPO's aggregation, which
    is ``grpo_loss``'s default ``loss_type`` for one process):

        ratio_t = exp(logp_t - old_logp_t)
        penalty = sum_bt mask_bt k3_bt ratio_bt / sum_bt mask_bt

    logp, ref_logp, mask, old_logp: (B, T); ``old_logp`` None drops the ratio (plain k3).
    Returns ``(penalty, kl)``: the scalar to weigh by ``beta``, and the raw k3 masked mean,
    detached (the logged ``loss/kl``, as ``grpo_loss``'s ``stats["kl"]``)."""
    check_same_shape(logp, ref_logp=ref_logp, mask=mask, old_logp=old_logp)
    mask = mask.to(logp.dtype)
    penalty = masked_mean(kl_penalty(logp, ref_logp, old_logp), mask)          # scalar
    kl = masked_mean(kl_k3(logp.detach(), ref_logp), mask)                     # scalar
    return penalty, kl
