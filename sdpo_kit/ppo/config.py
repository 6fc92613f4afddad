"""``PPOScratchConfig``: classic RLHF PPO's knobs (trl 0.11.4's ``PPOConfig`` names) plus distillation.

Defaults: this project's own for some (learning_rate 1e-5, batch_size 8, mini_batch_size 4,
ppo_epochs 4, early_stopping on with target_kl 0.1, init_kl_coef 0.2 with adaptive control, score
scaling and normalising on), classic trl 0.11.4's ``PPOConfig`` defaults for the rest (target 6,
horizon 10000, kl_penalty "kl", gamma 1, lam 0.95, cliprange 0.2, cliprange_value 0.2, vf_coef 0.1,
whiten_rewards off). Ours: ``kd_coef`` and ``kd_temperature`` (distillation from a teacher), ``ppo_coef``
(0 leaves distillation alone), the teacher to load, and the sampling knobs the scratch trainers share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdpo_kit.core.config import DEFAULT_COMPLETION_LENGTH
from sdpo_kit.core.scratch import RunConfig
from sdpo_kit.ppo.loss import KL_PENALTIES

SCHEDULERS = ("linear", "cosine", "constant")
OPTIMIZERS = ("adamw", "adam", "sgd")


@dataclass
class PPOScratchConfig(RunConfig):
    """PPO with a critic and a teacher (``ppo.trainer.PPOScratchTrainer``).

    ``batch_size`` responses per step, one per prompt (the scaffold's ``prompts_per_step`` is set
    to it); ``ppo_epochs`` passes over them in shuffled mini-batches of ``mini_batch_size``, an
    optimizer step every ``gradient_accumulation_steps`` mini-batches."""

    learning_rate: float = 1e-5
    batch_size: int = 8
    mini_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    ppo_epochs: int = 4
    max_grad_norm: float = 1.0
    early_stopping: bool = True
    target_kl: float = 0.1
    init_kl_coef: float = 0.2
    adap_kl_ctrl: bool = True
    target: float = 6.0
    horizon: float = 10000.0
    kl_penalty: str = "kl"
    use_score_scaling: bool = True
    use_score_norm: bool = True
    score_clip: float | None = None
    optimizer_name: str = "adamw"
    optimizer_kwargs: dict = field(default_factory=dict)
    scheduler_name: str = "linear"
    scheduler_kwargs: dict = field(default_factory=dict)   # cosine: {"num_cycles": 0.5}; warmup_steps for any
    gamma: float = 1.0
    lam: float = 0.95
    cliprange: float = 0.2
    cliprange_value: float = 0.2
    vf_coef: float = 0.1
    whiten_rewards: bool = False
    # ours: distillation from a teacher, and how the student samples
    kd_coef: float = 0.5
    kd_temperature: float = 2.0
    ppo_coef: float = 1.0                 # 0: distillation alone (no reward in the loss)
    teacher_model: str | None = "tiny-lab"   # None: no teacher (kd_coef must be 0)
    teacher_lab: dict | None = field(default_factory=lambda: {"sft_steps": 600})   # the tiny-lab teacher's warm start
    value_head_dropout: float = 0.1
    temperature: float = 1.0
    max_completion_length: int = DEFAULT_COMPLETION_LENGTH
    prompts_per_step: int = 0             # set from batch_size

    def __post_init__(self):
        if self.prompts_per_step not in (0, self.batch_size):
            raise ValueError(f"PPO samples one response per prompt: set batch_size (got prompts_per_step="
                             f"{self.prompts_per_step}, batch_size={self.batch_size})")
        self.prompts_per_step = self.batch_size
        if self.scheduler_name not in SCHEDULERS:
            raise ValueError(f"scheduler_name must be one of {SCHEDULERS}, got {self.scheduler_name!r}")
        self.lr_scheduler_type = "linear" if self.scheduler_name == "linear" else "constant"  # the scaffold's own
        super().__post_init__()
        if self.mini_batch_size < 1 or self.batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise ValueError("batch_size, mini_batch_size and gradient_accumulation_steps must be >= 1")
        per_update = self.mini_batch_size * self.gradient_accumulation_steps
        if self.batch_size % per_update:
            lower = max(per_update, self.batch_size // per_update * per_update)
            raise ValueError(
                f"batch_size={self.batch_size} must be a multiple of mini_batch_size x gradient_accumulation_steps "
                f"= {per_update}; nearest valid batch_size: {sorted({lower, lower + per_update})}, or a "
                f"mini_batch_size dividing {self.batch_size}: "
                f"{[m for m in range(1, self.batch_size + 1) if self.batch_size % (m * self.gradient_accumulation_steps) == 0]}")
        if self.kl_penalty not in KL_PENALTIES:
            raise ValueError(f"kl_penalty must be one of {KL_PENALTIES}, got {self.kl_penalty!r}")
        if self.optimizer_name not in OPTIMIZERS:
            raise ValueError(f"optimizer_name must be one of {OPTIMIZERS}, got {self.optimizer_name!r}")
        if self.ppo_epochs < 1 or self.target_kl <= 0 or self.kd_temperature <= 0 or self.temperature <= 0:
            raise ValueError("need ppo_epochs >= 1, target_kl > 0, kd_temperature > 0 and temperature > 0")
        if min(self.kd_coef, self.ppo_coef, self.vf_coef, self.init_kl_coef) < 0:
            raise ValueError("kd_coef, ppo_coef, vf_coef and init_kl_coef must be >= 0")
        if self.kd_coef > 0 and self.teacher_model is None:
            raise ValueError("kd_coef > 0 needs a teacher_model (or set kd_coef: 0 for PPO alone)")
        if self.kd_coef == 0 and self.ppo_coef == 0:
            raise ValueError("kd_coef and ppo_coef are both 0: nothing to train")

    @property
    def updates_per_epoch(self) -> int:
        return self.batch_size // (self.mini_batch_size * self.gradient_accumulation_steps)
