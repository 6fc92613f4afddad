"""Our run config -> verl's Hydra config: the same algorithm settings, said in verl's keys.

    verl_settings(cfg, paths)   {verl key: value}: every run's keys here, the algorithm's from its own ``verl.py``
                                (pure; no verl import)
    overrides(settings)         ["key=value", ...] Hydra overrides for ``python -m verl.trainer.main_ppo``
    compose(overrides)          verl's own ``ppo_trainer`` config with them applied (an unknown key fails)
    validate(config)            verl's ``validate_config`` on the result

``compose`` and ``validate`` import verl (0.9.1, in ``.venv-verl``: it pins transformers < 5.11);
the mapping itself does not, so ``sdpo-kit export-verl`` runs in either venv.

The algorithm's own keys are declared in its package (``Algorithm.verl``: ``grpo/verl.py``, ``ppo/verl.py``).
Both: lengths, lr and its schedule, grad clip, sampling, LoRA rank, steps, eval and save cadence, seed.

What verl's config cannot say is returned in ``unmapped`` with the reason (PPO's target-KL early
stop, score scaling, the teacher's temperature, ...): the run on verl differs there, and the
export says so rather than dropping it silently. SDPO and VAPOR have no verl loss; they would
need a policy loss registered with ``verl.trainer.ppo.core_algos.register_policy_loss`` and a
trainer subclass (extension point, not written: see docs/concepts/verl.md).
"""

from __future__ import annotations

from sdpo_kit.core.verl_keys import ACTOR as A
from sdpo_kit.core.verl_keys import ROLLOUT as R
from sdpo_kit.core.verl_keys import VerlPaths, VerlSettings

VERL_VERSION = "0.9.1"


class VerlExportError(ValueError):
    """A config, reward or algorithm that cannot be run on verl through its config."""


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


def verl_settings(cfg, paths: VerlPaths, *, n_gpus_per_node: int = 1, nnodes: int = 1,
                  max_prompt_length: int = 512, micro_batch_size_per_gpu: int = 8) -> VerlSettings:
    """verl's keys for a ``sdpo_kit.core.config.Config``: every run's, then its algorithm's (``Algorithm.verl``)."""
    from sdpo_kit.core.algorithm import resolve
    from sdpo_kit.registry import get_algorithm, verl_algorithms

    mapping = get_algorithm(cfg.algorithm).verl
    if mapping is None:
        raise VerlExportError(
            f"algorithm {cfg.algorithm!r} has no loss in verl {VERL_VERSION}; export-verl writes "
            f"{' and '.join(verl_algorithms())} configs (sdpo / vapor would need a policy loss registered with "
            "verl's register_policy_loss)")
    s = VerlSettings()
    _common(cfg, paths, s, n_gpus_per_node=n_gpus_per_node, nnodes=nnodes, max_prompt_length=max_prompt_length,
            micro_batch_size_per_gpu=micro_batch_size_per_gpu)
    resolve(mapping)(cfg, paths, s, micro_batch_size_per_gpu)
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
