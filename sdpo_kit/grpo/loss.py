"""GRPO: group-relative advantages, the four loss aggregations and the clipped surrogate.

Dimension letters as in ``core.logprobs``: B sequences (prompts x G), G group size, T
completion tokens. Every function takes tensors and floats, never a model or a config;
losses return ``(loss, stats)``: ``loss`` a scalar to minimise, ``stats`` detached tensors.

Samples drawn by another policy than the one trained (a bf16 copy, ``core.sampler_copy``) get TRL's
correction for vLLM's samples, ``sampler_weights``. Left out on purpose: sequence-level importance
sampling (GSPO), CISPO / SAPO / VESPO and entropy bonuses; TRL has them, and later tracks add the
pieces they need here as small, separate functions.
"""

from __future__ import annotations

import torch

from sdpo_kit.core.logprobs import check_same_shape, kl_k3, kl_penalty, masked_mean, masked_sum

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
SAMPLER_CORRECTIONS = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")   # TRL's names
SCALE_REWARDS = ("group", "batch", "none")


# ---------------------------------------------------------------------------------------
# advantages
# ---------------------------------------------------------------------------------------
def _unbiased_std(x: torch.Tensor, dim=None) -> torch.Tensor:
    if dim is None:
        return x.std(unbiased=True) if x.numel() > 1 else torch.zeros((), dtype=x.dtype)
    return x.std(dim=dim, unbiased=True) if x.size(dim) > 1 else torch.zeros_like(x.mean(dim))


def group_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: str = "group",
                     eps: float = 1e-4) -> torch.Tensor:
    """Group-relative advantages, TRL GRPOTrainer's definition (DeepSeekMath, arXiv:2402.03300).

        A_i = (r_i - mean_g(r)) / (std + eps)

    ``rewards``: (B,) with the G = ``num_generations`` completions of each prompt in a row.
    mean_g is the mean over the completion's own group. ``std`` is the unbiased std of the
    group ("group"), of the whole batch ("batch", Dr. GRPO / "Part I: tricks or traps"), or
    no division at all ("none"). Returns (B,).
    """
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards must be one of {SCALE_REWARDS}, got {scale_rewards!r}")
    if num_generations < 1 or rewards.dim() != 1 or rewards.numel() % num_generations:
        raise ValueError(
            f"rewards must be 1-D with a multiple of num_generations={num_generations} entries, "
            f"got shape {tuple(rewards.shape)}"
        )
    grouped = rewards.view(-1, num_generations)                                # (B/G, G)
    mean = grouped.mean(1).repeat_interleave(num_generations)                  # (B,)
    advantages = rewards - mean                                                # (B,)
    if scale_rewards == "group":
        std = _unbiased_std(grouped, dim=1).repeat_interleave(num_generations)  # (B,)
        advantages = advantages / (std + eps)                                  # (B,)
    elif scale_rewards == "batch":
        advantages = advantages / (_unbiased_std(rewards) + eps)               # (B,)
    return advantages


# ---------------------------------------------------------------------------------------
# GRPO
# ---------------------------------------------------------------------------------------
def aggregate_loss(per_token_loss: torch.Tensor, mask: torch.Tensor, loss_type: str,
                   max_completion_length: int | None = None) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar; the four GRPO normalisations.

    grpo    : mean_i [ sum_t l_it / |o_i| ]         (DeepSeekMath; weight 1/|o_i| per token: long wrong
                                                    answers are pushed down less, so they grow)
    bnpo    : sum_it l_it / sum_i |o_i|             (token mean over the local batch)
    dr_grpo : sum_it l_it / (B * L_max)             (Dr. GRPO, arXiv:2503.20783; constant normaliser)
    dapo    : sum_it l_it / sum_i |o_i|             (DAPO, arXiv:2503.14476; token mean over the whole
                                                    generation batch; equals bnpo for one process and
                                                    no gradient accumulation)
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if per_token_loss.dim() != 2 or mask.shape != per_token_loss.shape:
        raise ValueError(f"per_token_loss and mask must both be (B, T), got {tuple(per_token_loss.shape)} "
                         f"and {tuple(mask.shape)}")
    mask = mask.to(per_token_loss.dtype)
    if loss_type == "grpo":
        return masked_mean(per_token_loss, mask, dim=1).mean()                  # scalar
    if loss_type in ("bnpo", "dapo"):
        return masked_sum(per_token_loss, mask) / mask.sum().clamp(min=1.0)     # scalar
    if loss_type == "dr_grpo":
        L = max_completion_length if max_completion_length is not None else per_token_loss.size(1)
        return masked_sum(per_token_loss, mask) / (per_token_loss.size(0) * L)  # scalar
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


def sampler_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                    mode: str = "sequence_mask", clip_min: float | None = None,
                    clip_max: float | None = 3.0) -> torch.Tensor:
    """Importance weights for tokens another policy drew, TRL 1.16's correction of vLLM's samples
    (``vllm_importance_sampling_mode``, ``_clip_min``, ``_clip_max``; the same defaults).

        d_t = (old_logp_t - sampler_logp_t) * mask_t          log pi_old / pi_sampler per token
        w_t = exp(d_t)                      token_* modes      (B, T)
        w   = exp(sum_t d_t)                sequence_* modes   (B, 1)
        *_truncate: w clamped to [clip_min, clip_max]; *_mask: w set to 0 outside it (that sample is dropped)

    ``grpo_loss(..., sampler_weights=w)`` multiplies each token's clipped surrogate by w (not the KL term),
    as TRL does. Detached: weights, not a path for gradients. Shapes: (B, T) in; (B, T) or (B, 1) out."""
    if mode not in SAMPLER_CORRECTIONS:
        raise ValueError(f"sampler correction must be one of {SAMPLER_CORRECTIONS}, got {mode!r}")
    check_same_shape(old_logp, sampler_logp=sampler_logp, mask=mask)
    diff = torch.nan_to_num((old_logp - sampler_logp).detach() * mask, nan=0.0)   # (B, T)
    if mode.startswith("sequence"):
        diff = diff.sum(-1, keepdim=True)                                         # (B, 1)
    w = torch.exp(diff)
    if mode.endswith("truncate"):
        return w if clip_min is None and clip_max is None else torch.clamp(w, min=clip_min, max=clip_max)
    low = -float("inf") if clip_min is None else clip_min
    high = float("inf") if clip_max is None else clip_max
    return w.masked_fill((w < low) | (w > high), 0.0)


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, ref_logp: torch.Tensor | None = None, beta: float = 0.0,
              epsilon: float = 0.2, epsilon_high: float | None = None, loss_type: str = "dapo",
              max_completion_length: int | None = None, use_bias_correction_kl: bool = True,
              sampler_weights: torch.Tensor | None = None):
    """GRPO's clipped surrogate with a k3 KL penalty (DeepSeekMath arXiv:2402.03300; DAPO's
    two-sided epsilon arXiv:2503.14476). Equals TRL 1.16 GRPOTrainer's token-level loss for one
    process without gradient accumulation.

        ratio_t = exp(logp_t - old_logp_t)
        l_t     = -min(ratio_t * A, clip(ratio_t, 1 - epsilon, 1 + epsilon_high) * A) * w_t
                  + beta * KL_t                    (w_t = 1 unless ``sampler_weights``)
        KL_t    = k3(logp_t, ref_logp_t) * (ratio_t if use_bias_correction_kl else 1)   (core.logprobs.kl_penalty)
        loss    = aggregate(l, mask, loss_type)

    Args (shapes):

        logp, old_logp, ref_logp: (B, T) per-token log-probs; only ``logp`` carries gradients.
        advantages: (B,) one per sequence, or (B, T) per token.
        mask: (B, T) 1 on completion tokens that count.
        sampler_weights: (B, T) or (B, 1) from ``sampler_weights``, when another policy drew the tokens.
    Returns ``(loss, stats)`` with stats ``clip_frac_low``, ``clip_frac_high``, ``clip_frac``
    (TRL's region clip ratio: the clip is active and the gradient is zero), ``ratio_mean``,
    ``policy_loss`` (the clipped surrogate alone: ``loss`` without ``beta * KL``) and ``kl``
    (the raw k3 estimate, masked token mean, without the ratio correction; 0 without
    ``ref_logp``). TRL logs its ``kl`` with the ratio correction: equal on the first pass
    over a batch, where ratio == 1.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if beta != 0.0 and ref_logp is None:
        raise ValueError("beta != 0 needs ref_logp")
    check_same_shape(logp, old_logp=old_logp, mask=mask, ref_logp=ref_logp)
    if advantages.shape not in ((logp.size(0),), logp.shape):
        raise ValueError(f"advantages must be (B,) or (B, T) with (B, T) = {tuple(logp.shape)}, "
                         f"got {tuple(advantages.shape)}")
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    mask = mask.to(logp.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)                                    # (B, 1)

    ratio = torch.exp(logp - old_logp)                                          # (B, T)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)                 # (B, T)
    surrogate = -torch.min(ratio * advantages, clipped * advantages)            # (B, T)
    if sampler_weights is not None:
        surrogate = surrogate * sampler_weights.detach()                        # (B, T)
    policy_loss = aggregate_loss(surrogate, mask, loss_type, max_completion_length)  # scalar

    kl = None
    loss = policy_loss                                                          # scalar
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp)                                              # (B, T) raw estimate
        if beta != 0.0:
            # the penalty is aggregated like the surrogate (TRL adds it per token, same sum)
            penalty = kl_penalty(logp, ref_logp, old_logp if use_bias_correction_kl else None)  # (B, T)
            loss = policy_loss + beta * aggregate_loss(penalty, mask, loss_type, max_completion_length)  # scalar

    with torch.no_grad():
        low = ((ratio < 1 - epsilon) & (advantages < 0)).to(logp.dtype)         # (B, T)
        high = ((ratio > 1 + epsilon_high) & (advantages > 0)).to(logp.dtype)   # (B, T)
        stats = {
            "clip_frac_low": masked_mean(low, mask),
            "clip_frac_high": masked_mean(high, mask),
            "clip_frac": masked_mean(torch.maximum(low, high), mask),
            "ratio_mean": masked_mean(ratio.detach(), mask),
            "kl": masked_mean(kl.detach(), mask) if kl is not None else torch.zeros(()),
            "policy_loss": policy_loss.detach(),
        }
    return loss, stats
