"""The math in one import: each algorithm's pure loss functions (torch only), re-exported.

    core/logprobs.py  ``tempered`` (logits at a temperature), per-token log-probs, masked reductions, KL
                      estimators k1 / k2 / k3, ``kl_penalty``
    grpo/loss.py      group-relative advantages, the four aggregations, ``grpo_loss``
    vapor/loss.py     VAPOR: ``preference_log_term``, ``vapor_loss``, ``preference_dpo_loss``, ``vapor_kl``
    sdpo/loss.py      SDPO: ``sdpo_loss`` (self-distillation, equal to trl.experimental.sdpo), ``generalized_jsd``
    ppo/loss.py       PPO with a critic (= trl 0.11.4): ``per_token_rewards``, ``gae``, ``ppo_loss``, KL
                      controllers, ``RunningMoments`` / ``scale_scores``, ``distillation_loss`` (Hinton's KD)

Every public name is re-exported here: ``from sdpo_kit.losses import grpo_loss``. The library's own
modules import from where a name lives, so no algorithm depends on another through this file.
"""

from sdpo_kit.core.logprobs import (
    CHUNK_ELEMENTS,
    check_same_shape,
    kl_k1,
    kl_k2,
    kl_k3,
    kl_penalty,
    masked_mean,
    masked_sum,
    tempered,
    token_logprobs,
)
from sdpo_kit.grpo.loss import LOSS_TYPES, SCALE_REWARDS, aggregate_loss, group_advantages, grpo_loss
from sdpo_kit.ppo.loss import (
    KL_PENALTIES,
    AdaptiveKLController,
    FixedKLController,
    RunningMoments,
    distillation_loss,
    early_stop,
    explained_variance,
    gae,
    gae_advantages,
    kl_penalty_terms,
    masked_var,
    masked_whiten,
    per_token_rewards,
    ppo_loss,
    scale_scores,
)
from sdpo_kit.sdpo.loss import SDPO_MODES, add_tail_bucket, generalized_jsd, sdpo_loss, sdpo_per_token_loss
from sdpo_kit.vapor.loss import preference_dpo_loss, preference_log_term, vapor_kl, vapor_loss

__all__ = [
    "CHUNK_ELEMENTS", "LOSS_TYPES", "SCALE_REWARDS", "aggregate_loss", "check_same_shape", "group_advantages",
    "grpo_loss", "kl_k1", "kl_k2", "kl_k3", "kl_penalty", "masked_mean", "masked_sum", "preference_dpo_loss",
    "preference_log_term", "tempered", "token_logprobs", "vapor_kl", "vapor_loss", "SDPO_MODES", "add_tail_bucket", "generalized_jsd",
    "sdpo_loss", "sdpo_per_token_loss", "KL_PENALTIES", "AdaptiveKLController", "FixedKLController", "RunningMoments",
    "distillation_loss", "early_stop", "explained_variance", "gae", "gae_advantages", "kl_penalty_terms", "masked_var", "masked_whiten",
    "per_token_rewards", "ppo_loss", "scale_scores",
]
