"""GRPO's config classes: what a YAML ``trainer:`` section for ``algorithm: grpo`` holds, per backend.

    GRPOFields         GRPO's knobs, the same on both backends (TRL's GRPOConfig names and meanings)
    GRPOScratchConfig  the scratch loop's (``grpo/loop.py``): GRPOFields + ``share_prompt``, the sampler correction
    GRPOTRLConfig      the TRL backend's (``grpo/trl.py``): GRPOFields + ``preset`` + ``trl_args``

Named ``<ALGORITHM><Backend>Config`` as a YAML file names them (``algorithm: grpo``, ``backend: scratch``),
never like TRL's classes (``trl.GRPOConfig`` is what the TRL backend builds from ``GRPOTRLConfig``).

VAPOR's and SDPO's configs (``vapor/config.py``, ``sdpo/config.py``) add their fields to these. Plain
dataclasses: importing this module does not import TRL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdpo_kit.core.config import DEFAULT_COMPLETION_LENGTH
from sdpo_kit.core.sampler_copy import SAMPLING_CHOICES
from sdpo_kit.core.scratch import RunConfig
from sdpo_kit.core.trl_base import resolve_preset
from sdpo_kit.grpo.loss import LOSS_TYPES, SAMPLER_CORRECTIONS, SCALE_REWARDS

SHARE_PROMPT = (True, False, "auto")
SAMPLING_ON_TRL = ("sampling_dtype='bfloat16' is the scratch loop's (a bf16 copy whose samples its loss corrects); "
                   "the trl backend samples with the policy (TRL corrects vLLM's samples: trl_args use_vllm): "
                   "set float32 or auto")


@dataclass
class GRPOFields(RunConfig):
    """GRPO's knobs, the same on both backends (TRL's GRPOConfig names)."""

    num_generations: int = 8          # G
    num_iterations: int = 1           # mu: optimisation passes over each batch
    temperature: float = 1.0
    top_k: int = 0                    # 0: no top-k; with top-k / top-p the samples leave the loss's pi (as in TRL)
    top_p: float = 1.0
    max_completion_length: int = DEFAULT_COMPLETION_LENGTH
    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.0                 # k3 KL weight; > 0 keeps a frozen reference copy
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    sampling_dtype: str = "float32"   # float32: the policy samples | bfloat16: a bf16 copy (scratch GRPO) | auto

    def __post_init__(self):
        super().__post_init__()
        if self.sampling_dtype not in SAMPLING_CHOICES:
            raise ValueError(f"sampling_dtype must be one of {SAMPLING_CHOICES}, got {self.sampling_dtype!r}")
        if self.num_generations < 2:
            raise ValueError("num_generations must be >= 2: a group of one has no baseline")
        if self.num_iterations < 1 or self.max_completion_length < 1 or self.temperature <= 0:
            raise ValueError("num_iterations and max_completion_length must be >= 1, temperature > 0")
        if self.top_k < 0 or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_k must be >= 0 and top_p in (0, 1], got {self.top_k}, {self.top_p}")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if self.scale_rewards not in SCALE_REWARDS:
            raise ValueError(f"scale_rewards must be one of {SCALE_REWARDS}, got {self.scale_rewards!r}")


@dataclass
class GRPOScratchConfig(GRPOFields):
    """The scratch loop's config: GRPO's knobs plus how the forward runs.

    ``share_prompt``: run each prompt once for its G completions (same numbers, faster).
    ``"auto"`` checks it against the plain forward on the first batch and falls back, with a
    warning, if this model cannot share; ``True`` fails loudly instead; ``False`` never shares.

    ``sampling_dtype``: ``"bfloat16"`` samples from a bf16 copy of the policy (``core.sampler_copy``:
    faster on a CPU with bf16 matmuls, slower on one without) and corrects the loss for it as TRL corrects
    vLLM's samples (``grpo.loss.sampler_weights``: ``sampling_correction`` is TRL's
    ``vllm_importance_sampling_mode``, ``sampling_correction_max`` its ``_clip_max``). GRPO's loss only.
    ``"auto"``: bfloat16 where that is faster and the loss can correct for it, float32 elsewhere
    (``core.sampler_copy.resolve_sampling_dtype``); the key is GRPOFields', so a config that says ``auto``
    also runs on the TRL backend, which samples with the policy.
    """

    share_prompt: bool | str = "auto"
    sampling_correction: str = "sequence_mask"    # token_truncate | token_mask | sequence_truncate | sequence_mask
    sampling_correction_max: float | None = 3.0

    def __post_init__(self):
        super().__post_init__()
        if self.share_prompt not in SHARE_PROMPT:
            raise ValueError(f"share_prompt must be one of {SHARE_PROMPT}, got {self.share_prompt!r}")
        if self.sampling_correction not in SAMPLER_CORRECTIONS:
            raise ValueError(f"sampling_correction must be one of {SAMPLER_CORRECTIONS}, "
                             f"got {self.sampling_correction!r}")


@dataclass
class GRPOTRLConfig(GRPOFields):
    """The TRL backend's config: GRPO's knobs (same names and defaults as the scratch loop),
    the preset, and ``trl_args`` for any other ``trl.GRPOConfig`` field."""

    preset: str = "auto"              # cpu | t4 | t4_vllm | auto (t4 when CUDA is there)
    trl_args: dict = field(default_factory=dict)

    def __post_init__(self):
        super().__post_init__()
        resolve_preset(self.preset)  # raises on an unknown preset
        if self.sampling_dtype == "bfloat16":   # auto is float32 here: the policy samples
            raise ValueError(SAMPLING_ON_TRL)
