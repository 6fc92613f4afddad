"""Classic TRL 0.11.4 PPO pieces, part 1 of the test oracle: ``trl/core.py`` and ``trl/trainer/utils.py``
(torch only, no ``trl`` import). Part 2, the ``PPOTrainer`` methods: ``ppo_reference_trl0114.py``.

TRL 0.11.4 cannot be installed beside TRL 1.16, so the pieces of the classic ``PPOTrainer`` that
our implementation must reproduce are copied here, formula for formula.

Source: https://github.com/huggingface/trl, tag ``v0.11.4`` (tag object
714cd42f67cb2c8bef91546dbb2258e326c03c89 -> commit 1f8ba929fbb6962249386f7dce20155da8a26cda,
"Version `0.11.3` -> `0.11.4`", 2024-10-15). Files (blob ids at that commit):

* ``trl/core.py`` (5e7bb840f6e1465ba337509dd2a3aadf3608d4ab): ``flatten_dict`` (L73),
  ``logprobs_from_logits`` (L115), ``masked_mean`` (L136), ``masked_var`` (L144),
  ``masked_whiten`` (L163), ``clip_by_value`` (L172), ``entropy_from_logits`` (L181).
* ``trl/trainer/utils.py`` (eba237c494f949eacb922852dbc42ce9d093f5c1): ``AdaptiveKLController``
  (L54), ``FixedKLController`` (L72), ``RunningMoments`` (L669).
* ``trl/trainer/ppo_trainer.py`` (42f916ddde7a8f92aa436637e28837bb73d7375e), methods of
  ``class PPOTrainer(BaseTrainer)``: score processing at the top of ``step`` (L684-697),
  ``_early_stop`` (L899), ``compute_rewards`` (L1112), ``_kl_penalty`` (L1150),
  ``compute_advantages`` (L1166), ``loss`` (L1194).

The ``PPOTrainer`` methods are turned into functions; whatever they read from ``self`` / ``self.config``
is an argument (``self.kl_ctl.value`` -> ``kl_ctl_value``, ``self.config.gamma`` -> ``gamma``, ...).
Every other change from the source is marked with a ``# CHANGED`` comment saying why.

PPOConfig defaults in 0.11.4 (``trl/trainer/ppo_config.py``), for reference: adap_kl_ctrl=True,
init_kl_coef=0.2, kl_penalty="kl", target=6.0, horizon=10000.0, gamma=1.0, lam=0.95, cliprange=0.2,
cliprange_value=0.2, vf_coef=0.1, early_stopping=False, target_kl=1.0, ratio_threshold=10.0,
use_score_scaling=False, use_score_norm=False, score_clip=None, whiten_rewards=False.
(``PPOTrainer.__init__``: ``AdaptiveKLController(init_kl_coef, target, horizon)`` if adap_kl_ctrl else
``FixedKLController(init_kl_coef)``; after each step ``kl_ctl.update(stats["objective/kl"],
batch_size * num_processes)`` where ``objective/kl`` is ``((kls * masks).sum(-1)).mean()``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# trl/core.py (v0.11.4)
# ---------------------------------------------------------------------------------------------


def flatten_dict(nested: Dict, sep: str = "/") -> Dict:
    """Flatten dictionary and concatenate nested keys with separator."""

    def recurse(nest: Dict, prefix: str, into: Dict) -> None:
        for k, v in nest.items():
            if sep in k:
                raise ValueError(f"separator '{sep}' not allowed to be in key '{k}'")
            if isinstance(v, Mapping):
                recurse(v, prefix + k + sep, into)
            else:
                into[prefix + k] = v

    flat = {}
    recurse(nested, "", flat)
    return flat


def logprobs_from_logits(logits: torch.Tensor, labels: Optional[torch.Tensor], gather: bool = True) -> torch.Tensor:
    """
    See: https://github.com/pytorch/pytorch/issues/563#issuecomment-330103591
    (``step()`` uses ``gather=False`` to get the full (B, T, V) log-probs for ``kl_penalty="full"``.)
    """
    logp = F.log_softmax(logits, dim=2)

    if not gather:
        return logp
    logpy = torch.gather(logp, 2, labels.unsqueeze(2)).squeeze(-1)
    return logpy


def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis: Optional[bool] = None) -> torch.Tensor:
    """Compute mean of tensor with a masked values."""
    if axis is not None:
        return (values * mask).sum(axis=axis) / mask.sum(axis=axis)
    else:
        return (values * mask).sum() / mask.sum()


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Compute variance of tensor with masked values."""
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError(
                "The sum of the mask is zero, which can happen when `mini_batch_size=1`;"
                "try increase the `mini_batch_size` or `gradient_accumulation_steps`"
            )
        # note that if mask_sum == 1, then there is a division by zero issue
        # to avoid it you just need to use a larger minibatch_size
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """Whiten values with masked values."""
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


def clip_by_value(x: torch.Tensor, tensor_min: torch.Tensor, tensor_max: torch.Tensor) -> torch.Tensor:
    """
    Tensor extension to torch.clamp
    https://github.com/pytorch/pytorch/issues/2793#issuecomment-428784713

    (The source annotates the bounds as ``float``, but ``torch.min``/``torch.max`` need tensors here;
    ``loss`` passes ``values -/+ cliprange_value``, which are tensors.)
    """
    clipped = torch.max(torch.min(x, tensor_max), tensor_min)
    return clipped


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Calculate entropy from logits."""
    pd = torch.nn.functional.softmax(logits, dim=-1)
    entropy = torch.logsumexp(logits, axis=-1) - torch.sum(pd * logits, axis=-1)
    return entropy


# ---------------------------------------------------------------------------------------------
# trl/trainer/utils.py (v0.11.4)
# ---------------------------------------------------------------------------------------------


class AdaptiveKLController:
    """
    Adaptive KL controller described in the paper:
    https://huggingface.co/papers/1909.08593
    """

    def __init__(self, init_kl_coef, target, horizon):
        self.value = init_kl_coef
        self.target = target
        self.horizon = horizon

    def update(self, current, n_steps):
        target = self.target
        # Source: `proportional_error = np.clip(current / target - 1, -0.2, 0.2)`.
        # CHANGED: numpy is imported lazily (this module otherwise needs torch only), with a
        # torch.clamp fallback that gives the same value in float64 (NaN stays NaN, as in np.clip).
        # Note: in `step()`, `current` is `stats["objective/kl"]` after `stats_to_np`, i.e. a 0-d
        # float32 np.ndarray, so with numpy >= 2 (NEP 50) this arithmetic, and then `self.value`,
        # is float32; pass a Python float to get float64.
        try:
            import numpy as np
        except ImportError:  # pragma: no cover
            proportional_error = float(
                torch.clamp(torch.as_tensor(current / target - 1, dtype=torch.float64), -0.2, 0.2)
            )
        else:
            proportional_error = np.clip(current / target - 1, -0.2, 0.2)
        mult = 1 + proportional_error * n_steps / self.horizon
        self.value *= mult


class FixedKLController:
    """Fixed KL controller."""

    def __init__(self, kl_coef):
        self.value = kl_coef

    def update(self, current, n_steps):
        pass


@dataclass
class RunningMoments:
    """
    Calculates the running mean and standard deviation of a data stream. Reference:
    https://github.com/OpenLMLab/MOSS-RLHF/blob/40b91eb2f2b71b16919addede0341d2bef70825d/utils.py#L75

    CHANGED: the source dataclass has a first field ``accelerator: Accelerator`` and ``update`` uses
    ``get_global_statistics(accelerator, xs)`` (an all-reduce of sum/count and of the squared
    deviations) when ``accelerator.use_distributed``. Only the single-process branch is kept here,
    which is what the distributed branch reduces to on one process (population variance, count =
    ``xs.numel()``). ``save_to_json``/``load_from_json`` are left out.

    Note (as in the source): after the first ``update``, ``mean``, ``std`` and ``var`` are Python
    floats (``.item()``), not tensors, and ``update`` returns Python floats too.
    """

    mean: float = 0
    std: float = 1
    var: float = 1
    count: float = 1e-24

    @torch.no_grad()
    def update(self, xs: torch.Tensor) -> Tuple[float, float]:
        """
        Updates running moments from batch's moments computed across ranks
        """
        # CHANGED: source is
        #   if self.accelerator.use_distributed:
        #       xs_mean, xs_var, xs_count = get_global_statistics(self.accelerator, xs)
        #   else:
        # single process only:
        xs_count = xs.numel()
        xs_var, xs_mean = torch.var_mean(xs, unbiased=False)
        xs_mean, xs_var = xs_mean.float(), xs_var.float()

        delta = xs_mean - self.mean
        tot_count = self.count + xs_count

        new_sum = xs_var * xs_count
        # correct old_sum deviation accounting for the new mean
        old_sum = self.var * self.count + delta**2 * self.count * xs_count / tot_count
        tot_sum = old_sum + new_sum

        self.mean += (delta * xs_count / tot_count).item()
        new_var = tot_sum / tot_count
        self.std = (new_var * tot_count / (tot_count - 1)).float().sqrt().item()
        self.var = new_var.item()
        self.count = tot_count

        return xs_mean.item(), (xs_var * xs_count / (xs_count - 1)).float().sqrt().item()


# ---------------------------------------------------------------------------------------------
