"""Teacher-student PPO's settings in verl's keys (``sdpo-kit export-verl`` on ``algorithm: ppo``; verl's critic
is a separate model, not a value head on the policy).

    gamma, lam                 -> algorithm.gamma, algorithm.lam, adv_estimator=gae, critic.enable
    cliprange, cliprange_value -> actor.clip_ratio(_low/_high), critic.cliprange_value
    batch_size, mini_batch_size, ppo_epochs -> data.train_batch_size, ppo_mini_batch_size, ppo_epochs (n = 1)
    init_kl_coef, adap_kl_ctrl, target, horizon, kl_penalty -> algorithm.use_kl_in_reward, kl_ctrl.*, kl_penalty
    kd_coef, teacher_model     -> distillation.* (forward_kl_topk, top-32, the teacher in its own 1-GPU pool)

What verl's config cannot say goes to ``settings.unmapped`` with the reason (the target-KL early stop, score
scaling, the teacher's temperature, ...). Pure: no verl import.
"""

from __future__ import annotations

from sdpo_kit.core.verl_keys import ACTOR as A
from sdpo_kit.core.verl_keys import ROLLOUT as R
from sdpo_kit.core.verl_keys import VerlPaths, VerlSettings, schedule

KD_TOPK = 32                      # teacher log-probs per token verl asks vLLM for (forward_kl_topk)


def verl_settings(cfg, paths: VerlPaths, s: VerlSettings, micro_batch_size_per_gpu: int) -> None:
    """Teacher-student PPO's keys for ``cfg`` into ``s`` (the module docstring lists them)."""
    tc, v = cfg.trainer, s.values
    v.update({
        "algorithm.adv_estimator": "gae", "algorithm.gamma": tc.gamma, "algorithm.lam": tc.lam,
        # one optimizer step per mini-batch in verl: ours accumulates gradient_accumulation_steps of them
        f"{R}.n": 1, "data.train_batch_size": tc.batch_size,
        f"{A}.ppo_mini_batch_size": tc.mini_batch_size * tc.gradient_accumulation_steps,
        f"{A}.ppo_epochs": tc.ppo_epochs, f"{A}.shuffle": True, f"{A}.clip_ratio": tc.cliprange,
        f"{A}.clip_ratio_low": tc.cliprange, f"{A}.clip_ratio_high": tc.cliprange,
        f"{A}.loss_agg_mode": "token-mean", f"{A}.use_kl_loss": False,
        "algorithm.use_kl_in_reward": True, "algorithm.kl_penalty": tc.kl_penalty,
        "algorithm.kl_ctrl.type": "adaptive" if tc.adap_kl_ctrl else "fixed",
        # ours (0.11.4) steers the KL summed over a response, verl the per-token mean: target / L
        "algorithm.kl_ctrl.kl_coef": tc.init_kl_coef, "algorithm.kl_ctrl.target_kl": tc.target / tc.max_completion_length,
        "algorithm.kl_ctrl.horizon": int(tc.horizon),
        "critic.enable": True, "critic.model.path": paths.model, "critic.optim.lr": tc.learning_rate,
        "critic.cliprange_value": tc.cliprange_value, "critic.ppo_micro_batch_size_per_gpu": micro_batch_size_per_gpu,
        "critic.optim.clip_grad": tc.max_grad_norm, "critic.optim.weight_decay": 0.0,
    })
    schedule(tc.scheduler_name, "scheduler_name", s, roles=(A, "critic"), kwargs=tc.scheduler_kwargs)
    if tc.adap_kl_ctrl:
        s.unmapped.append(f"trainer.target={tc.target}: ours is the KL summed over a response, verl's the per-token "
                          f"mean; written as target / max_completion_length = {tc.target / tc.max_completion_length:g} "
                          "(the same only for full-length responses)")
    if tc.optimizer_name != "adamw" or tc.optimizer_kwargs:
        s.unmapped.append(f"trainer.optimizer_name={tc.optimizer_name}, optimizer_kwargs: verl's AdamW written")
    if tc.early_stopping:
        s.unmapped.append(f"trainer.early_stopping/target_kl={tc.target_kl}: verl has no per-minibatch "
                          "target-KL early stop (it runs every ppo_epoch)")
    if tc.use_score_scaling or tc.use_score_norm or tc.score_clip is not None:
        s.unmapped.append("trainer.use_score_scaling/use_score_norm/score_clip: verl feeds the raw score to "
                          "the KL-shaped reward (no running-moments scaling)")
    if tc.whiten_rewards:
        s.unmapped.append("trainer.whiten_rewards: not in verl's GAE")
    s.unmapped.append(f"trainer.vf_coef={tc.vf_coef}, value_head_dropout: verl's critic is a separate model "
                      "with its own optimizer (critic.optim.lr), not a value head on the policy")
    if tc.teacher_model is not None and tc.kd_coef > 0:
        D = "distillation"
        v.update({f"{D}.enabled": True, f"{D}.n_gpus_per_node": 1, f"{D}.nnodes": 1,
                  f"{D}.teacher_models.teacher_model.model_path": paths.teacher_model,
                  f"{D}.teacher_models.teacher_model.inference.tensor_model_parallel_size": 1,
                  f"{D}.distillation_loss.loss_mode": "forward_kl_topk", f"{D}.distillation_loss.topk": KD_TOPK,
                  f"{D}.distillation_loss.distillation_loss_coef": tc.kd_coef,
                  f"{D}.distillation_loss.use_task_rewards": tc.ppo_coef > 0,
                  # ours backpropagates the KD term; verl's default turns it into an advantage instead
                  f"{D}.distillation_loss.use_policy_gradient": False})
        s.unmapped.append(
            f"trainer.kd_temperature={tc.kd_temperature}: verl's forward_kl_topk reads the teacher's top-{KD_TOPK} "
            "log-probs from its own vLLM pool (one more GPU) at temperature 1; ours is the full-vocabulary KL at T")
    if tc.ppo_coef != 1.0:
        s.unmapped.append(f"trainer.ppo_coef={tc.ppo_coef}: verl weighs the PPO loss 1, or 0 without task rewards, "
                          "and then sets the distillation weight to 1 (kd_coef is not carried)")
