"""PPO with a critic, the classic RLHF way (trl 0.11.4's ``PPOTrainer``), as pure functions.

One step, for B responses of T tokens with a scalar score each:

    per-token reward   r_t = -beta * kl_t  (+ score at the last response token)
                       kl_t = log pi(o_t) - log pi_ref(o_t)   ("kl"; also "abs", "mse")
    GAE                delta_t = r_t + gamma V_{t+1} - V_t;  A_t = delta_t + gamma lam A_{t+1}
                       returns R_t = A_t + V_t (before whitening); A whitened over the mask
    loss               pg = mean_mask max(-A ratio, -A clip(ratio, 1 +- eps))
                       vf = 0.5 mean_mask max((V' - R)^2, (clip(V', V +- eps_v) - R)^2)
                       loss = pg + vf_coef * vf
    KL control         adaptive: beta <- beta (1 + clip(KL / target - 1, +-0.2) n / horizon)
    score processing   running mean / std of the scores (scaling, normalising), clipping
    distillation       T^2 * mean_mask KL(softmax(teacher / T) || softmax(student / T))  (Hinton)

Each piece equals trl 0.11.4 (``tests/ppo_reference_trl0114.py`` transcribes that source;
``tests/test_losses_ppo.py`` compares). Differences on purpose, each tested: score scaling works
(0.11.4 crashes with ``'float' object has no attribute 'to'``); a response with an empty mask gets
no score instead of an IndexError. Shapes: B responses, T response tokens, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sdpo_kit.core.logprobs import masked_mean, tempered

KL_PENALTIES = ("kl", "abs", "mse")


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of ``x`` over ``mask`` (0.11.4's ``masked_var``: Bessel-corrected by default)."""
    n = mask.to(x.dtype).sum()
    var = masked_mean((x - masked_mean(x, mask)) ** 2, mask)
    if unbiased:
        if n <= 1:
            raise ValueError("masked_var needs at least 2 unmasked values (a mini-batch of one token?)")
        var = var * n / (n - 1)
    return var


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """(x - mean) / sqrt(var + 1e-8) over ``mask``; ``shift_mean=False`` adds the mean back."""
    mean = masked_mean(x, mask)
    out = (x - mean) * torch.rsqrt(masked_var(x, mask) + 1e-8)
    return out if shift_mean else out + mean


def kl_penalty_terms(logp: torch.Tensor, ref_logp: torch.Tensor, kl_penalty: str = "kl") -> torch.Tensor:
    """Per-token KL estimate, (B, T): "kl" log p - log p_ref, "abs" its absolute value, "mse" half its square."""
    d = logp - ref_logp
    if kl_penalty == "kl":
        return d
    if kl_penalty == "abs":
        return d.abs()
    if kl_penalty == "mse":
        return 0.5 * d.square()
    raise ValueError(f"kl_penalty must be one of {KL_PENALTIES}, got {kl_penalty!r}")


def per_token_rewards(scores: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor,
                      kl_coef: float, kl_penalty: str = "kl"):
    """Per-token rewards: -kl_coef * kl_t everywhere, plus the score at the last unmasked token.

    scores (B,), logp / ref_logp / mask (B, T). Returns ``(rewards, non_score, kl)``, each (B, T).
    A row whose mask is all zero gets no score (0.11.4 raises IndexError there)."""
    kl = kl_penalty_terms(logp, ref_logp, kl_penalty)                              # (B, T)
    non_score = -kl_coef * kl                                                      # (B, T)
    T = mask.size(1)
    positions = torch.arange(T, device=mask.device).expand_as(mask)                # (B, T)
    last = torch.where(mask.bool(), positions, -1).max(1).values                   # (B,) -1: empty row
    at_last = (positions == last[:, None]) & (last[:, None] >= 0)                  # (B, T)
    rewards = non_score + at_last.to(non_score) * scores.to(non_score)[:, None]   # a reward on the CPU too
    return rewards, non_score, kl


def gae_advantages(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """The GAE recursion over every position of (B, T) rewards and values (already masked), (B, T) out:

        delta_t = r_t + gamma * V_{t+1} - V_t   (V_T = 0),   A_t = delta_t + gamma * lam * A_{t+1}"""
    T = rewards.size(1)
    last = torch.zeros_like(rewards[:, 0])                                         # (B,)
    out = []
    for t in reversed(range(T)):
        next_value = values[:, t + 1] if t < T - 1 else torch.zeros_like(last)     # (B,)
        delta = rewards[:, t] + gamma * next_value - values[:, t]                  # (B,)
        last = delta + gamma * lam * last                                          # (B,)
        out.append(last)
    return torch.stack(out[::-1], dim=1)                                           # (B, T)


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *, gamma: float, lam: float,
        whiten_rewards: bool = False, advantages_fn=None):
    """Generalised advantage estimation, (B, T) in, ``(advantages, returns)`` out (0.11.4's).

    Values and rewards are masked first; the reversed recursion (``gae_advantages``, or a learner's
    ``advantages_fn`` with its signature, ``ppo/pieces.py``) runs over every position; returns = A + V
    before whitening; the advantages are then whitened over the mask and detached."""
    values, rewards = values * mask, rewards * mask                                # (B, T)
    if whiten_rewards:
        rewards = masked_whiten(rewards, mask, shift_mean=False)
    advantages = (advantages_fn or gae_advantages)(rewards, values, gamma, lam)    # (B, T)
    returns = advantages + values                                                  # (B, T)
    return masked_whiten(advantages, mask).detach(), returns


def ppo_loss(logp: torch.Tensor, old_logp: torch.Tensor, values: torch.Tensor, old_values: torch.Tensor,
             advantages: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, *, cliprange: float = 0.2,
             cliprange_value: float = 0.2, vf_coef: float = 0.1, logits: torch.Tensor | None = None):
    """PPO's clipped policy loss plus ``vf_coef`` x the clipped value loss (0.11.4's ``loss``).

    logp / old_logp / values (the value head now) / old_values (at rollout) / advantages /
    returns / mask: (B, T); logits (B, T, V) optional, for the entropy. Returns ``(loss, stats)``
    with ``loss = pg_loss + vf_coef * vf_loss`` and stats: ``pg_loss``, ``vf_loss`` (unscaled),
    ``approx_kl`` (0.5 mean (log ratio)^2), ``policy_kl`` (mean old_logp - logp), ``clip_frac``,
    ``vf_clip_frac``, ``explained_variance`` (1 - var(R - V') / var(R)), ``entropy`` (with logits)."""
    v_clipped = torch.max(torch.min(values, old_values + cliprange_value), old_values - cliprange_value)
    vf_1, vf_2 = (values - returns) ** 2, (v_clipped - returns) ** 2               # (B, T)
    vf_loss = 0.5 * masked_mean(torch.max(vf_1, vf_2), mask)
    ratio = torch.exp(logp - old_logp)                                             # (B, T)
    pg_1 = -advantages * ratio
    pg_2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)
    pg_loss = masked_mean(torch.max(pg_1, pg_2), mask)
    loss = pg_loss + vf_coef * vf_loss
    with torch.no_grad():
        stats = {"pg_loss": pg_loss.detach(), "vf_loss": vf_loss.detach(),
                 "approx_kl": 0.5 * masked_mean((logp - old_logp) ** 2, mask),
                 "policy_kl": masked_mean(old_logp - logp, mask),
                 "clip_frac": masked_mean((pg_2 > pg_1).to(pg_1.dtype), mask),
                 "vf_clip_frac": masked_mean((vf_2 > vf_1).to(vf_1.dtype), mask),
                 "explained_variance": explained_variance(values.detach(), returns, mask)}
        if logits is not None:
            p = torch.softmax(logits, -1)
            stats["entropy"] = masked_mean(torch.logsumexp(logits, -1) - (p * logits).sum(-1), mask)
    return loss, stats


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1 - var(returns - values) / var(returns) over the mask: 1 a perfect critic, 0 a constant one."""
    var_r = masked_var(returns, mask, unbiased=False)
    return 1.0 - masked_var(returns - values, mask, unbiased=False) / var_r.clamp(min=1e-12)


class AdaptiveKLController:
    """Ziegler et al.'s adaptive KL coefficient: ``value *= 1 + clip(kl / target - 1, +-0.2) * n / horizon``."""

    def __init__(self, init_kl_coef: float = 0.2, target: float = 6.0, horizon: float = 10000.0):
        if init_kl_coef < 0 or target <= 0 or horizon <= 0:
            raise ValueError(f"need init_kl_coef >= 0, target > 0, horizon > 0; got {init_kl_coef}, {target}, {horizon}")
        self.value, self.target, self.horizon = float(init_kl_coef), float(target), float(horizon)

    def update(self, current: float, n_steps: int) -> float:
        error = min(max(float(current) / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = float(state["value"])


class FixedKLController:
    """A constant KL coefficient (``update`` does nothing)."""

    def __init__(self, kl_coef: float = 0.2):
        self.value = float(kl_coef)

    def update(self, current: float, n_steps: int) -> float:
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = float(state["value"])


@dataclass
class RunningMoments:
    """Running mean and standard deviation of a stream of scores (0.11.4's parallel update).

    ``std`` is the Bessel-corrected running standard deviation, ``var`` the population one."""

    mean: float = 0.0
    std: float = 1.0
    var: float = 1.0
    count: float = 1e-24

    @torch.no_grad()
    def update(self, xs: torch.Tensor) -> tuple[float, float]:
        """Fold a batch in; returns the batch's (mean, Bessel-corrected std)."""
        n = xs.numel()
        xs_var, xs_mean = torch.var_mean(xs.float(), unbiased=False)
        delta = xs_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + delta**2 * self.count * n / total + xs_var * n
        self.mean += (delta * n / total).item()
        new_var = m2 / total
        self.std = (new_var * total / (total - 1)).sqrt().item()
        self.var, self.count = new_var.item(), total
        return xs_mean.item(), (xs_var * n / max(n - 1, 1)).sqrt().item()

    def state_dict(self) -> dict:
        return {"mean": self.mean, "std": self.std, "var": self.var, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.std, self.var, self.count = (float(state[k]) for k in ("mean", "std", "var", "count"))


def scale_scores(scores: torch.Tensor, moments: RunningMoments, *, use_score_scaling: bool = False,
                 use_score_norm: bool = False, score_clip: float | None = None) -> torch.Tensor:
    """0.11.4's score processing, (B,) -> (B,): with scaling, update ``moments`` and divide by the
    running std (+ eps), or with ``use_score_norm`` also subtract the running mean; then clip."""
    scores = scores.clone()
    if use_score_scaling:
        moments.update(scores)
        eps = torch.finfo(scores.dtype).eps
        scale = torch.as_tensor(moments.std, dtype=scores.dtype, device=scores.device) + eps
        if use_score_norm:
            scores = (scores - torch.as_tensor(moments.mean, dtype=scores.dtype, device=scores.device)) / scale
        else:
            scores = scores / scale
    elif use_score_norm:
        raise ValueError("use_score_norm needs use_score_scaling (as in trl 0.11.4, where it is ignored without it)")
    if score_clip is not None:
        scores = torch.clip(scores.float(), -score_clip, score_clip).to(scores.dtype)
    return scores


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor, *,
                      temperature: float = 1.0):
    """Hinton's soft-target knowledge distillation, per token then a masked mean:

        T^2 * mean_mask sum_v p_T(v) (log p_T(v) - log p_S(v)),   p = softmax(logits / T)

    (B, T, V) logits, (B, T) mask; the teacher's are detached. Returns ``(loss, stats)`` with
    ``kd_kl`` (the masked mean KL at temperature T, without the T^2)."""
    if temperature <= 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a positive number, got {temperature}")
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(f"student and teacher logits differ in shape: {tuple(student_logits.shape)} vs "
                         f"{tuple(teacher_logits.shape)} (the same tokenizer and tokens are needed)")
    log_s = torch.log_softmax(tempered(student_logits, temperature), -1)           # (B, T, V)
    log_t = torch.log_softmax(tempered(teacher_logits.detach(), temperature), -1)  # (B, T, V)
    kl = (log_t.exp() * (log_t - log_s)).sum(-1)                                   # (B, T)
    m = mask.to(kl.dtype)
    kd = (kl * m).sum() / m.sum().clamp(min=1.0)
    return temperature**2 * kd, {"kd_kl": kd.detach()}


def early_stop(policy_kl: float, target_kl: float, enabled: bool = True) -> bool:
    """0.11.4's rule: stop the PPO epochs when the policy KL exceeds 1.5 x target_kl."""
    return bool(enabled) and float(policy_kl) > 1.5 * target_kl
