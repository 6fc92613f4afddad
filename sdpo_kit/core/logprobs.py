"""Pieces every loss shares: per-token log-probs, masked reductions, KL estimators.

Dimension letters, used in every shape comment of the ``losses`` package:

    B  sequences in the batch (prompts x group size)
    G  group size: completions sampled per prompt (TRL's ``num_generations``)
    T  completion tokens
    V  vocabulary
    N  rows of a flattened (B*T) batch

Pure functions of tensors and floats: no model, no config, no global state.

Left out on purpose: entropy and top-k helpers; the SDPO and PPO tracks add them next to
their losses.
"""

from __future__ import annotations

import torch

# rows of (B*T, V) logits turned into log-probs at once: bounds the fp32 temporaries of
# ``token_logprobs`` to about CHUNK_ELEMENTS floats (64 MiB) whatever B, T and V are
CHUNK_ELEMENTS = 2**24


# ---------------------------------------------------------------------------------------
# temperature and log-probs
# ---------------------------------------------------------------------------------------
def tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Logits at temperature tau: the distribution a sampler at tau draws from is their softmax,

        pi_tau(y) = softmax(z / tau)_y = exp(z_y / tau) / sum_v exp(z_v / tau)

    ``logits / temperature``, in the logits' dtype and shape (any), so every trainer scores the
    same pi its samples came from (TRL divides the same way). The one place the sampling
    temperature meets the logits: the scratch loops, the TRL trainers, test-time SDPO and
    ``token_logprobs`` all call it (and Hinton's distillation temperature in ``ppo.loss``).
    tau = 1 divides too, a bitwise copy: callers that skip it there say so.
    """
    return logits / temperature                                                # same shape as logits


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0,
                   chunk_rows: int | None = None) -> torch.Tensor:
    """log pi(y_t | y_<t) of the given ``labels`` under ``logits``:

        log pi(y) = z_y / tau - logsumexp(z / tau)

    logits: (B, T, V) already aligned with labels (logits[:, t] predicts labels[:, t]).
    labels: (B, T).  Returns (B, T), at least fp32 (bf16 / fp16 logits lose log-prob
    precision; fp64 stays fp64).

    No (B, T, V) ``log_softmax`` copy: a gather and a logsumexp, over chunks of
    ``chunk_rows`` of the B*T rows (default: as many rows as fit in ``CHUNK_ELEMENTS``
    floats), so the fp32 temporaries stay one chunk big however long the completions or
    large the vocabulary. Temperature divides the logits first, as TRL does for the
    sampling temperature. Same values as ``log_softmax(logits / tau).gather(labels)``.
    """
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (B, T, V) and labels (B, T), got {tuple(logits.shape)} "
                         f"and {tuple(labels.shape)}")
    B, T, V = logits.shape
    dtype = torch.promote_types(logits.dtype, torch.float32)
    if B * T == 0:
        return logits.new_zeros((B, T), dtype=dtype)                           # (B, T)
    rows = chunk_rows or max(1, CHUNK_ELEMENTS // max(V, 1))
    # chunks are slices of ``logits`` (views, also of a sliced ``logits[:, :-1]``): whole
    # sequences while they fit, else pieces of one sequence
    seqs, width = (max(1, rows // T), T) if rows >= T else (1, rows)
    out = []
    for b in range(0, B, seqs):
        row = []
        for t in range(0, T, width):
            z = logits[b:b + seqs, t:t + width].to(dtype)                      # (b, t, V) a copy only for bf16 / fp16
            if temperature != 1.0:
                z = tempered(z, temperature)                                   # (b, t, V)
            y = labels[b:b + seqs, t:t + width].unsqueeze(-1)                  # (b, t, 1)
            row.append(z.gather(-1, y).squeeze(-1) - torch.logsumexp(z, dim=-1))  # (b, t)
        out.append(torch.cat(row, 1))                                          # (b, T)
    return torch.cat(out, 0)                                                   # (B, T)


# ---------------------------------------------------------------------------------------
# masked reductions
# ---------------------------------------------------------------------------------------
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


def check_same_shape(logp: torch.Tensor, **others: torch.Tensor | None) -> None:
    """ValueError unless logp is (B, T) and every other tensor given has that same shape
    (broadcasting would otherwise hide a misaligned batch)."""
    if logp.dim() != 2:
        raise ValueError(f"logp must be (B, T), got {tuple(logp.shape)}")
    for name, x in others.items():
        if x is not None and x.shape != logp.shape:
            raise ValueError(f"{name} must have logp's shape {tuple(logp.shape)}, got {tuple(x.shape)}")


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


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp: torch.Tensor | None = None) -> torch.Tensor:
    """The per-token KL penalty of GRPO's loss: k3 weighed by the importance ratio (TRL's
    ``use_bias_correction_kl``, on by default), so it estimates KL(pi || pi_ref) for samples
    drawn from pi_old:

        ratio_t = exp(logp_t - old_logp_t)
        KL_t    = k3(logp_t, ref_logp_t) * ratio_t          (old_logp None: k3 alone)

    ``ratio`` carries the gradient of ``logp`` (old_logp is detached by the caller). On the first
    pass over a batch (old_logp = logp detached) ratio is 1, so the value is plain k3, but the
    gradient is not: d(k3 ratio) = dk3 + k3 dlogp there. Every trainer with a KL term (GRPO,
    VAPOR, both backends) adds this one. All (B, T); returns (B, T).
    """
    kl = kl_k3(logp, ref_logp)                                                # (B, T)
    if old_logp is None:
        return kl                                                             # (B, T)
    return kl * torch.exp(logp - old_logp)                                    # (B, T)
