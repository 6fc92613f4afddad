"""Our run config -> verl's Hydra config: the same algorithm settings, said in verl's keys.

    verl_settings(cfg, paths)   {verl key: value} for algorithm grpo or ppo (pure; no verl import)
    overrides(settings)         ["key=value", ...] Hydra overrides for ``python -m verl.trainer.main_ppo``
    compose(overrides)          verl's own ``ppo_trainer`` config with them applied (an unknown key fails)
    validate(config)            verl's ``validate_config`` on the result

``compose`` and ``validate`` import verl (0.9.1, in ``.venv-verl``: it pins transformers < 5.11);
the mapping itself does not, so ``sdpo-kit export-verl`` runs in either venv.

GRPO (``algorithm: grpo``, either backend)
    num_generations G          -> actor_rollout_ref.rollout.n
    prompts_per_step           -> data.train_batch_size and actor.ppo_mini_batch_size (one update per pass)
    num_iterations mu          -> actor.ppo_epochs
    epsilon / epsilon_high     -> actor.clip_ratio_low / clip_ratio_high
    loss_type                  -> actor.loss_agg_mode (LOSS_AGG_MODE below; dr_grpo: loss_scale_factor = L)
    scale_rewards group | none -> algorithm.norm_adv_by_std_in_grpo true | false
    beta                       -> actor.use_kl_loss, kl_loss_coef, kl_loss_type=low_var_kl (k3, clamped to +-10)
PPO (``algorithm: ppo``, the teacher-student config; verl's critic is a separate model)
    gamma, lam                 -> algorithm.gamma, algorithm.lam, adv_estimator=gae, critic.enable
    cliprange, cliprange_value -> actor.clip_ratio(_low/_high), critic.cliprange_value
    batch_size, mini_batch_size, ppo_epochs -> data.train_batch_size, ppo_mini_batch_size, ppo_epochs (n = 1)
    init_kl_coef, adap_kl_ctrl, target, horizon, kl_penalty -> algorithm.use_kl_in_reward, kl_ctrl.*, kl_penalty
    kd_coef, teacher_model     -> distillation.* (forward_kl_topk, top-32, the teacher in its own 1-GPU pool)
Both: lengths, lr and its schedule, grad clip, sampling, LoRA rank, steps, eval and save cadence, seed.

What verl's config cannot say is returned in ``unmapped`` with the reason (PPO's target-KL early
stop, score scaling, the teacher's temperature, ...): the run on verl differs there, and the
export says so rather than dropping it silently. SDPO and VAPOR have no verl loss; they would
need a policy loss registered with ``verl.trainer.ppo.core_algos.register_policy_loss`` and a
trainer subclass (extension point, not written: see docs/concepts/verl.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

VERL_VERSION = "0.9.1"
LOSS_AGG_MODE = {"grpo": "seq-mean-token-mean", "bnpo": "token-mean", "dapo": "token-mean",
                 "dr_grpo": "seq-mean-token-sum-norm"}
ALGORITHMS = ("grpo", "ppo")
KD_TOPK = 32                      # teacher log-probs per token verl asks vLLM for (forward_kl_topk)
A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"


class VerlExportError(ValueError):
    """A config, reward or algorithm that cannot be run on verl through its config."""


@dataclass
class VerlPaths:
    """Where the run's files are, as verl's workers will see them (absolute, or ``$D/...`` in the script)."""

    train_files: str
    val_files: str
    reward_module: str
    model: str
    teacher_model: str | None = None


@dataclass
class VerlSettings:
    values: dict = field(default_factory=dict)    # verl key -> value, in order
    unmapped: list[str] = field(default_factory=list)  # "our key: why verl's config cannot say it"


def _common(cfg, paths: VerlPaths, s: VerlSettings, *, n_gpus_per_node: int, nnodes: int,
            max_prompt_length: int, micro_batch_size_per_gpu: int) -> None:
    tc, v = cfg.trainer, s.values
    v.update({
        "data.train_files": paths.train_files, "data.val_files": paths.val_files, "data.prompt_key": "prompt",
        "data.max_prompt_length": max_prompt_length, "data.max_response_length": tc.max_completion_length,
        "data.seed": tc.seed,
        "actor_rollout_ref.model.path": paths.model,
        # verl's engines clip at optim.clip_grad (actor.grad_clip is read by no engine); AdamW without decay, as ours
        f"{A}.optim.lr": tc.learning_rate, f"{A}.optim.clip_grad": tc.max_grad_norm, f"{A}.optim.weight_decay": 0.0,
        f"{A}.ppo_micro_batch_size_per_gpu": micro_batch_size_per_gpu,
        f"{A}.clip_ratio_c": 1.0e9,   # verl's dual clip (negative advantages, ratio > c): not in ours or TRL's, off
        f"{R}.name": "vllm", f"{R}.tensor_model_parallel_size": 1, f"{R}.gpu_memory_utilization": 0.5,
        f"{R}.log_prob_micro_batch_size_per_gpu": micro_batch_size_per_gpu,
        f"{R}.temperature": tc.temperature,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro_batch_size_per_gpu,
        "reward.custom_reward_function.path": paths.reward_module,
        "reward.custom_reward_function.name": "compute_score",
        # a step is one sampled batch on both sides; enough epochs that max_steps, not the data, ends the run;
        # eval_every 0 means at the start and the end here, so verl evaluates once at the last step
        "trainer.total_training_steps": tc.max_steps, "trainer.total_epochs": tc.max_steps,
        "trainer.test_freq": tc.eval_every or tc.max_steps, "trainer.val_before_train": True,
        "trainer.save_freq": getattr(tc, "save_steps", 0) or -1,
        "trainer.max_actor_ckpt_to_keep": getattr(tc, "save_total_limit", None),
        "trainer.n_gpus_per_node": n_gpus_per_node, "trainer.nnodes": nnodes, "trainer.logger": ["console"],
        "trainer.project_name": "sdpo_kit", "trainer.experiment_name": cfg.output_dir.rstrip("/").split("/")[-1] or "run",
        "trainer.default_local_dir": f"{cfg.output_dir.rstrip('/')}/verl",
    })
    from sdpo_kit.models import TINY_LAB, lora_kwargs

    lora = lora_kwargs(cfg.model.lora if cfg.model.lora is not None or cfg.model.name == TINY_LAB else True)
    if lora:   # None on a hub model means LoRA with the defaults, as load_policy does
        targets = lora["target_modules"]
        v.update({"actor_rollout_ref.model.lora_rank": lora["r"], "actor_rollout_ref.model.lora_alpha": lora["lora_alpha"],
                  "actor_rollout_ref.model.target_modules": targets if isinstance(targets, str) else list(targets)})
        if lora.get("lora_dropout"):
            s.unmapped.append(f"model.lora.lora_dropout={lora['lora_dropout']}: verl's LoRA has no dropout setting")
    if cfg.model.load_in_4bit:
        s.unmapped.append("model.load_in_4bit: verl trains bf16 weights under FSDP (no bitsandbytes 4-bit actor)")
    if getattr(tc, "trl_args", None):
        s.unmapped.append(f"trainer.trl_args={tc.trl_args}: TRL GRPOConfig arguments, not carried to verl")


def _schedule(name: str, key: str, s: VerlSettings, roles=(A,), kwargs: dict | None = None) -> None:
    for role in roles:
        s.values[f"{role}.optim.lr_scheduler_type"] = name if name in ("constant", "cosine") else "constant"
    if name not in ("constant", "cosine"):
        s.unmapped.append(f"trainer.{key}={name}: verl schedules constant or cosine; constant written")
    kwargs = dict(kwargs or {})
    for ours, theirs in (("warmup_steps", "lr_warmup_steps"), ("num_cycles", "num_cycles")):
        if ours in kwargs:
            value = kwargs.pop(ours)
            for role in roles:
                s.values[f"{role}.optim.{theirs}"] = value
    if kwargs:
        s.unmapped.append(f"trainer.scheduler_kwargs {sorted(kwargs)}: no verl counterpart")


def _grpo(cfg, s: VerlSettings) -> None:
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
    _schedule(tc.lr_scheduler_type, "lr_scheduler_type", s)


def _ppo(cfg, paths: VerlPaths, s: VerlSettings, micro_batch_size_per_gpu: int) -> None:
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
    _schedule(tc.scheduler_name, "scheduler_name", s, roles=(A, "critic"), kwargs=tc.scheduler_kwargs)
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


def verl_settings(cfg, paths: VerlPaths, *, n_gpus_per_node: int = 1, nnodes: int = 1,
                  max_prompt_length: int = 512, micro_batch_size_per_gpu: int = 8) -> VerlSettings:
    """verl's keys for a ``sdpo_kit.core.config.Config`` (algorithm grpo or ppo)."""
    if cfg.algorithm not in ALGORITHMS:
        raise VerlExportError(
            f"algorithm {cfg.algorithm!r} has no loss in verl {VERL_VERSION}; export-verl writes grpo and ppo "
            "configs (sdpo / vapor would need a policy loss registered with verl's register_policy_loss)")
    s = VerlSettings()
    _common(cfg, paths, s, n_gpus_per_node=n_gpus_per_node, nnodes=nnodes, max_prompt_length=max_prompt_length,
            micro_batch_size_per_gpu=micro_batch_size_per_gpu)
    if cfg.algorithm == "grpo":
        _grpo(cfg, s)
    else:
        _ppo(cfg, paths, s, micro_batch_size_per_gpu)
    return s


def hydra_value(x) -> str:
    """A value as Hydra's override grammar reads it back (strings quoted when they need it)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if x is None:
        return "null"
    if isinstance(x, (list, tuple)):
        return "[" + ",".join(hydra_value(i) for i in x) + "]"
    if isinstance(x, (int, float)):
        return repr(x)
    text = str(x)
    if text.startswith("$"):  # a shell variable in run_verl.sh: double quotes so the shell expands it
        return f'"{text}"'
    if any(c in text for c in " ,=[]{}()'\":\\") or text in ("true", "false", "null", ""):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def overrides(settings: VerlSettings | dict) -> list[str]:
    values = settings.values if isinstance(settings, VerlSettings) else settings
    return [f"{k}={hydra_value(v)}" for k, v in values.items()]


def verl_config_dir() -> str:
    import os

    import verl

    return os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def compose(override_list: list[str]):
    """verl's ``ppo_trainer`` config (its own YAML, its defaults list) with the overrides applied.

    An override naming a key verl does not have raises Hydra's ``ConfigCompositionException``.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=verl_config_dir(), version_base=None):
        return hydra_compose("ppo_trainer", overrides=list(override_list))


def validate(config) -> None:
    """verl's ``validate_config`` with the roles main_ppo derives (reference policy, critic), and the
    distillation section built as verl's trainer builds it."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if config.distillation.enabled:  # not in validate_config: the trainer builds it; its __post_init__ checks the pool
        from verl.utils.config import omega_conf_to_dataclass

        omega_conf_to_dataclass(config.distillation)
