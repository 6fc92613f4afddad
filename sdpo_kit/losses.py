"""Pure tensor functions for RL post-training losses (torch only).

Dimension letters, used in every shape comment below:

    B  sequences in the batch (prompts x group size)
    G  group size: completions sampled per prompt (TRL's ``num_generations``)
    T  completion tokens
    V  vocabulary

Every function takes tensors and floats, never a model or a config, and the losses return
``(loss, stats)``: ``loss`` a scalar to minimise, ``stats`` a dict of detached tensors.

Left out on purpose: sequence-level importance sampling (GSPO), CISPO / SAPO / VESPO,
entropy bonuses and vLLM importance correction; TRL has them, and later tracks add the
pieces they need here as small, separate functions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
SCALE_REWARDS = ("group", "batch", "none")


# ---------------------------------------------------------------------------------------
# log-probs and masked reductions
# ---------------------------------------------------------------------------------------
def token_logprobs(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log pi(y_t | y_<t) of the given ``labels`` under ``logits``.

    logits: (B, T, V) already aligned with labels (logits[:, t] predicts labels[:, t]).
    labels: (B, T).  Returns (B, T).

    log_softmax then gather; for large V this is the memory peak, which is why TRL chunks
    it. Temperature divides the logits first, as TRL does for the sampling temperature.
    """
    if temperature != 1.0:
        logits = logits / temperature                                          # (B, T, V)
    # at least fp32 for the softmax (bf16/fp16 logits lose log-prob precision); fp64 stays fp64
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))       # (B, T, V)
    logp_all = F.log_softmax(logits, dim=-1)                                   # (B, T, V)
    return logp_all.gather(-1, labels.unsqueeze(-1)).squeeze(-1)               # (B, T)


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    """sum of x where mask == 1 (over ``dim``, or everything)."""
    x = x * mask
    return x.sum() if dim is None else x.sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    """mean of x where mask == 1; 0 where the mask is empty (never NaN)."""
    mask = mask.to(x.dtype)
    if dim is None:
        return masked_sum(x, mask) / mask.sum().clamp(min=1.0)
    return masked_sum(x, mask, dim) / mask.sum(dim).clamp(min=1.0)


# ---------------------------------------------------------------------------------------
# KL estimators (joschu.net/blog/kl-approx.html), estimating KL(pi || pi_ref) from samples
# y ~ pi, with log_ratio = log pi_ref(y) - log pi(y)
# ---------------------------------------------------------------------------------------
def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = -log r = log pi - log pi_ref.  Unbiased, high variance, can be negative."""
    return logp - ref_logp                                                    # (B, T)


def kl_k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = (log r)^2 / 2.  Biased, low variance, always >= 0."""
    return 0.5 * (ref_logp - logp) ** 2                                        # (B, T)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = r - 1 - log r, r = pi_ref / pi.  Unbiased, low variance, always >= 0 (GRPO's)."""
    log_r = ref_logp - logp                                                   # (B, T)
    return torch.exp(log_r) - log_r - 1                                       # (B, T)


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


def _check_shapes(logp: torch.Tensor, **others: torch.Tensor | None) -> None:
    """ValueError unless logp is (B, T) and every other tensor given has that same shape
    (broadcasting would otherwise hide a misaligned batch)."""
    if logp.dim() != 2:
        raise ValueError(f"logp must be (B, T), got {tuple(logp.shape)}")
    for name, x in others.items():
        if x is not None and x.shape != logp.shape:
            raise ValueError(f"{name} must have logp's shape {tuple(logp.shape)}, got {tuple(x.shape)}")


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, ref_logp: torch.Tensor | None = None, beta: float = 0.0,
              epsilon: float = 0.2, epsilon_high: float | None = None, loss_type: str = "dapo",
              max_completion_length: int | None = None, use_bias_correction_kl: bool = True):
    """GRPO's clipped surrogate with a k3 KL penalty (DeepSeekMath arXiv:2402.03300; DAPO's
    two-sided epsilon arXiv:2503.14476). Equals TRL 1.16 GRPOTrainer's token-level loss for one
    process without gradient accumulation.

        ratio_t = exp(logp_t - old_logp_t)
        l_t     = -min(ratio_t * A, clip(ratio_t, 1 - epsilon, 1 + epsilon_high) * A)
                  + beta * KL_t
        KL_t    = k3(logp_t, ref_logp_t) * (ratio_t if use_bias_correction_kl else 1)
        loss    = aggregate(l, mask, loss_type)

    Args (shapes):

        logp, old_logp, ref_logp: (B, T) per-token log-probs; only ``logp`` carries gradients.
        advantages: (B,) one per sequence, or (B, T) per token.
        mask: (B, T) 1 on completion tokens that count.
    Returns ``(loss, stats)`` with stats ``clip_frac_low``, ``clip_frac_high``, ``clip_frac``
    (TRL's region clip ratio: the clip is active and the gradient is zero), ``ratio_mean``, ``kl``.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if beta != 0.0 and ref_logp is None:
        raise ValueError("beta != 0 needs ref_logp")
    _check_shapes(logp, old_logp=old_logp, mask=mask, ref_logp=ref_logp)
    if advantages.shape not in ((logp.size(0),), logp.shape):
        raise ValueError(f"advantages must be (B,) or (B, T) with (B, T) = {tuple(logp.shape)}, "
                         f"got {tuple(advantages.shape)}")
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    mask = mask.to(logp.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)                                    # (B, 1)

    ratio = torch.exp(logp - old_logp)                                          # (B, T)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)                 # (B, T)
    per_token_loss = -torch.min(ratio * advantages, clipped * advantages)       # (B, T)

    kl = None
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp)                                              # (B, T)
        if use_bias_correction_kl:
            kl = kl * ratio                                                     # (B, T)
        if beta != 0.0:
            per_token_loss = per_token_loss + beta * kl                         # (B, T)

    loss = aggregate_loss(per_token_loss, mask, loss_type, max_completion_length)  # scalar

    with torch.no_grad():
        low = ((ratio < 1 - epsilon) & (advantages < 0)).to(logp.dtype)         # (B, T)
        high = ((ratio > 1 + epsilon_high) & (advantages > 0)).to(logp.dtype)   # (B, T)
        stats = {
            "clip_frac_low": masked_mean(low, mask),
            "clip_frac_high": masked_mean(high, mask),
            "clip_frac": masked_mean(torch.maximum(low, high), mask),
            "ratio_mean": masked_mean(ratio.detach(), mask),
            "kl": masked_mean(kl.detach(), mask) if kl is not None else torch.zeros(()),
            "policy_loss": loss.detach(),
        }
    return loss, stats
