"""GRPO's settings in verl's keys (``sdpo-kit export-verl`` on ``algorithm: grpo``, either backend).

    num_generations G          -> actor_rollout_ref.rollout.n
    prompts_per_step           -> data.train_batch_size and actor.ppo_mini_batch_size (one update per pass)
    num_iterations mu          -> actor.ppo_epochs
    epsilon / epsilon_high     -> actor.clip_ratio_low / clip_ratio_high
    loss_type                  -> actor.loss_agg_mode (LOSS_AGG_MODE below; dr_grpo: loss_scale_factor = L)
    scale_rewards group | none -> algorithm.norm_adv_by_std_in_grpo true | false
    beta                       -> actor.use_kl_loss, kl_loss_coef, kl_loss_type=low_var_kl (k3, clamped to +-10)

What verl's config cannot say goes to ``settings.unmapped`` with the reason. Pure: no verl import.
"""

from __future__ import annotations

from sdpo_kit.core.verl_keys import ACTOR as A
from sdpo_kit.core.verl_keys import ROLLOUT as R
from sdpo_kit.core.verl_keys import VerlPaths, VerlSettings, schedule

LOSS_AGG_MODE = {"grpo": "seq-mean-token-mean", "bnpo": "token-mean", "dapo": "token-mean",
                 "dr_grpo": "seq-mean-token-sum-norm"}


def verl_settings(cfg, paths: VerlPaths, s: VerlSettings, micro_batch_size_per_gpu: int) -> None:
    """GRPO's keys for ``cfg`` into ``s`` (the module docstring lists them)."""
    tc, v = cfg.trainer, s.values
    v.update({
        "algorithm.adv_estimator": "grpo", "critic.enable": False, f"{R}.n": tc.num_generations,
        "data.train_batch_size": tc.prompts_per_step, f"{A}.ppo_mini_batch_size": tc.prompts_per_step,
        f"{A}.ppo_epochs": tc.num_iterations,
        f"{A}.clip_ratio_low": tc.epsilon,
        f"{A}.clip_ratio_high": tc.epsilon if tc.epsilon_high is None else tc.epsilon_high,
        f"{A}.loss_agg_mode": LOSS_AGG_MODE[tc.loss_type],
        f"{A}.use_kl_loss": tc.beta > 0, f"{A}.kl_loss_coef": tc.beta, f"{A}.kl_loss_type": "low_var_kl",
        "algorithm.use_kl_in_reward": False,
        "algorithm.norm_adv_by_std_in_grpo": tc.scale_rewards != "none",
        f"{R}.top_k": tc.top_k or -1, f"{R}.top_p": tc.top_p,
    })
    if tc.loss_type == "dr_grpo":
        v[f"{A}.loss_scale_factor"] = tc.max_completion_length
    if tc.scale_rewards == "batch":
        s.unmapped.append("trainer.scale_rewards=batch: verl's GRPO divides by the group's std (group written)")
    if tc.beta > 0:
        s.unmapped.append("trainer.beta: ours weighs each token's k3 by the importance ratio (bias-corrected, "
                          "as TRL's use_bias_correction_kl); verl's kl_loss is plain k3: the same value at ratio 1 "
                          "(on-policy), another gradient on every pass (d(k3 x ratio) = dk3 + k3 dlogp at ratio 1)")
    schedule(tc.lr_scheduler_type, "lr_scheduler_type", s)
