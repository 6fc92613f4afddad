"""Classic TRL 0.11.4 PPO pieces, part 2 of the test oracle: the ``PPOTrainer`` methods as functions.

Source, and the rules of the transcription: ``trl0114_core.py`` (part 1: ``trl/core.py`` and
``trl/trainer/utils.py``). Every change from the source is marked with a ``# CHANGED`` comment.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from trl0114_core import (  # noqa: F401  (re-exported for the tests)
    AdaptiveKLController,
    FixedKLController,
    RunningMoments,
    clip_by_value,
    entropy_from_logits,
    flatten_dict,
    logprobs_from_logits,
    masked_mean,
    masked_var,
    masked_whiten,
)

# trl/trainer/ppo_trainer.py (v0.11.4), PPOTrainer methods as functions
# ---------------------------------------------------------------------------------------------


def process_scores(
    scores,
    running: RunningMoments,
    use_score_scaling: bool,
    use_score_norm: bool,
    score_clip: Optional[float],
    fix_float_to_crash: bool = True,
) -> torch.Tensor:
    """Score processing at the top of ``PPOTrainer.step`` (after ``_step_safety_checker``).

    ``scores``: a list of 0-d tensors (as ``step`` receives them, after the safety checker squeezed
    them) or a (B,) tensor. ``running`` is ``self.running``; it is updated in place.

    In 0.11.4, ``use_score_scaling=True`` crashes on the very first step with
    ``AttributeError: 'float' object has no attribute 'to'``: ``RunningMoments.update`` stores
    ``self.std``/``self.mean`` as Python floats (``.item()``, since commit 9929370de "Move BCO to
    separate BCOTrainer with fixes (#1869)", first released in v0.10), while ``step`` still calls
    ``self.running.std.to(**tensor_to_kwargs)`` (and ``self.running.mean.to(...)`` with
    ``use_score_norm``), written (commit decc832d3, #727) when they were tensors. The values
    returned by ``update`` (``scores_mean, scores_std``) are not used by ``step``.
    With ``fix_float_to_crash=True`` (default) the minimal fix is applied: ``torch.as_tensor(x,
    **tensor_to_kwargs)`` instead of ``x.to(**tensor_to_kwargs)``; with ``False`` the original
    lines run and raise the original error.
    """
    # source: `scores = torch.tensor(scores, device=self.current_device)`
    if isinstance(scores, torch.Tensor):
        # CHANGED: accept a tensor too; clone (not torch.tensor(tensor), which warns) so that the
        # in-place `/=` below never touches the caller's tensor, as with torch.tensor(list).
        scores = scores.clone()
    else:
        scores = torch.tensor(scores)
    if use_score_scaling:
        # Score scaling
        scores_mean, scores_std = running.update(scores)
        tensor_to_kwargs = dict(dtype=scores.dtype, device=scores.device)
        if fix_float_to_crash:
            # CHANGED (minimal fix): source is `self.running.std.to(**tensor_to_kwargs)`
            score_scaling_factor = torch.as_tensor(running.std, **tensor_to_kwargs) + torch.finfo(scores.dtype).eps
        else:
            score_scaling_factor = running.std.to(**tensor_to_kwargs) + torch.finfo(scores.dtype).eps
        if use_score_norm:
            if fix_float_to_crash:
                # CHANGED (minimal fix): source is `self.running.mean.to(**tensor_to_kwargs)`
                scores = (scores - torch.as_tensor(running.mean, **tensor_to_kwargs)) / score_scaling_factor
            else:
                scores = (scores - running.mean.to(**tensor_to_kwargs)) / score_scaling_factor
        else:
            scores /= score_scaling_factor

    if score_clip is not None:
        # Score clipping
        scores_dtype = scores.dtype
        scores = torch.clip(scores.float(), -score_clip, score_clip).to(dtype=scores_dtype)
    return scores


def early_stop(policykl, early_stopping: bool, target_kl: float) -> bool:
    """``PPOTrainer._early_stop``, single-process branch.

    Source side effects left out: ``self.optimizer.zero_grad()`` when stopping; in the distributed
    branch ``policykl`` is first all-reduced (SUM) and divided by ``num_processes``.
    How ``step`` uses it: with ``early_stopping`` on, after each PPO epoch (all its minibatches),
    ``policykl = train_stats["policy/policykl"]`` of the *last* minibatch is tested and, if true, the
    remaining epochs are skipped.
    """
    early_stop = False
    if not early_stopping:
        return early_stop

    if policykl > 1.5 * target_kl:
        early_stop = True
    return early_stop


def _kl_penalty(logprob: torch.FloatTensor, ref_logprob: torch.FloatTensor, kl_penalty: str) -> torch.FloatTensor:
    """``PPOTrainer._kl_penalty``; ``kl_penalty`` is ``self.config.kl_penalty``.

    For "full", ``logprob``/``ref_logprob`` are full (…, V) log-softmax tensors
    (``logprobs_from_logits(logits, None, gather=False)``) and the result sums over V.
    """
    if kl_penalty == "kl":
        return logprob - ref_logprob

    if kl_penalty == "abs":
        return (logprob - ref_logprob).abs()

    if kl_penalty == "mse":
        return 0.5 * (logprob - ref_logprob).square()

    if kl_penalty == "full":
        # Flip is required due to this issue? :https://github.com/pytorch/pytorch/issues/57459
        return F.kl_div(ref_logprob, logprob, log_target=True, reduction="none").sum(-1)

    raise NotImplementedError


def compute_rewards(
    scores: torch.FloatTensor,
    logprobs: torch.FloatTensor,
    ref_logprobs: torch.FloatTensor,
    masks: torch.LongTensor,
    kl_ctl_value: float,
    kl_penalty: str,
):
    """
    Compute per token rewards from scores and KL-penalty.

    Args:
        scores (`torch.FloatTensor`):
            Scores from the reward model, shape (`batch_size`)
        logprobs (`torch.FloatTensor`):
            Log probabilities of the model, shape (`batch_size`, `response_length`)
        ref_logprobs (`torch.FloatTensor`):
            Log probabilities of the reference model, shape (`batch_size`, `response_length`)
        kl_ctl_value: ``self.kl_ctl.value``; kl_penalty: ``self.config.kl_penalty``.

    Returns:
        `torch.FloatTensor`: Per token rewards, shape (`batch_size`, `response_length`)
        `torch.FloatTensor`: Non score rewards, shape (`batch_size`, `response_length`)
        `torch.FloatTensor`: KL penalty, shape (`batch_size`, `response_length`)
    """
    rewards, non_score_rewards, kls = [], [], []
    for score, logprob, ref_logprob, mask in zip(scores, logprobs, ref_logprobs, masks):
        # compute KL penalty (from difference in logprobs)
        kl = _kl_penalty(logprob, ref_logprob, kl_penalty)
        kls.append(kl)
        non_score_reward = -kl_ctl_value * kl
        non_score_rewards.append(non_score_reward)
        reward = non_score_reward.clone()
        # (a shape-(1,) index: the last position where mask != 0; an all-zero mask raises IndexError)
        last_non_masked_index = mask.nonzero()[-1]

        # reward is preference model score + KL penalty
        reward[last_non_masked_index] += score
        rewards.append(reward)
    return torch.stack(rewards), torch.stack(non_score_rewards), torch.stack(kls)


def compute_advantages(
    values: torch.FloatTensor,
    rewards: torch.FloatTensor,
    mask: torch.FloatTensor,
    gamma: float,
    lam: float,
    whiten_rewards: bool,
):
    """``PPOTrainer.compute_advantages``. Returns ``(values * mask, advantages, returns)``:
    the *masked* values (``step`` stores these as the old values), whitened and detached
    advantages, and unwhitened ``returns = advantages + values`` (computed before whitening)."""
    lastgaelam = 0
    advantages_reversed = []
    gen_len = rewards.shape[-1]

    values = values * mask
    rewards = rewards * mask

    if whiten_rewards:
        rewards = masked_whiten(rewards, mask, shift_mean=False)

    for t in reversed(range(gen_len)):
        nextvalues = values[:, t + 1] if t < gen_len - 1 else 0.0
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam = delta + gamma * lam * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = torch.stack(advantages_reversed[::-1]).transpose(0, 1)

    returns = advantages + values
    advantages = masked_whiten(advantages, mask)
    advantages = advantages.detach()
    return values, advantages, returns


def loss(
    old_logprobs: torch.FloatTensor,
    values: torch.FloatTensor,
    logits: torch.FloatTensor,
    vpreds: torch.FloatTensor,
    logprobs: torch.FloatTensor,
    mask: torch.LongTensor,
    advantages: torch.FloatTensor,
    returns: torch.FloatTensor,
    cliprange: float,
    cliprange_value: float,
    vf_coef: float,
):
    """
    Calculate policy and value losses (``PPOTrainer.loss``).

    Returns ``(pg_loss, vf_coef * vf_loss, flatten_dict(stats))``, as the source does
    (``train_minibatch`` backpropagates ``loss_p + loss_v``). In the stats, ``loss/value`` is the
    *unscaled* ``vf_loss`` and ``loss/total`` is ``pg_loss + vf_coef * vf_loss``.

    Args:
        old_logprobs (`torch.FloatTensor`):
            Log probabilities of the model, shape (`batch_size`, `response_length`)
        values (`torch.FloatTensor`):
            Values of the value head, shape (`batch_size`, `response_length`)
        logits (`torch.FloatTensor`):
            Logits of the model, shape (`batch_size`, `response_length`, `vocab_size`)
        v_pred (`torch.FloatTensor`):
            Values of the value head, shape (`batch_size`, `response_length`)
        logprobs (`torch.FloatTensor`):
            Log probabilities of the model, shape (`batch_size`, `response_length`)
    """

    vpredclipped = clip_by_value(
        vpreds,
        values - cliprange_value,
        values + cliprange_value,
    )

    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    vf_loss = 0.5 * masked_mean(torch.max(vf_losses1, vf_losses2), mask)
    vf_clipfrac = masked_mean(torch.gt(vf_losses2, vf_losses1).float(), mask)

    ratio = torch.exp(logprobs - old_logprobs)

    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)

    pg_loss = masked_mean(torch.max(pg_losses, pg_losses2), mask)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses).float(), mask)

    loss = pg_loss + vf_coef * vf_loss

    # CHANGED: left out (a guard, not part of the objective); the source has, with
    # self.config.ratio_threshold (default 10.0):
    #     avg_ratio = masked_mean(ratio, mask).item()
    #     if avg_ratio > self.config.ratio_threshold:
    #         warnings.warn(
    #             f"The average ratio of batch ({avg_ratio:.2f}) exceeds threshold {self.config.ratio_threshold:.2f}. Skipping batch."
    #         )
    #         pg_loss = pg_loss * 0.0
    #         vf_loss = vf_loss * 0.0
    #         loss = loss * 0.0

    entropy = masked_mean(entropy_from_logits(logits), mask)

    approxkl = 0.5 * masked_mean((logprobs - old_logprobs) ** 2, mask)
    policykl = masked_mean(old_logprobs - logprobs, mask)

    return_mean, return_var = masked_mean(returns, mask), masked_var(returns, mask)
    value_mean, value_var = masked_mean(values, mask), masked_var(values, mask)

    stats = dict(
        loss=dict(policy=pg_loss.detach(), value=vf_loss.detach(), total=loss.detach()),
        policy=dict(
            entropy=entropy.detach(),
            approxkl=approxkl.detach(),
            policykl=policykl.detach(),
            clipfrac=pg_clipfrac.detach(),
            advantages=advantages.detach(),
            advantages_mean=masked_mean(advantages, mask).detach(),
            ratio=ratio.detach(),
        ),
        returns=dict(mean=return_mean.detach(), var=return_var.detach()),
        val=dict(
            vpred=masked_mean(vpreds, mask).detach(),
            error=masked_mean((vpreds - returns) ** 2, mask).detach(),
            clipfrac=vf_clipfrac.detach(),
            mean=value_mean.detach(),
            var=value_var.detach(),
        ),
    )
    return pg_loss, vf_coef * vf_loss, flatten_dict(stats)
