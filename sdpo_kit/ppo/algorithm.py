"""Teacher-student PPO, as the library sees it: its backend, its panels and metric keys, the piece a learner may
replace, its verl mapping.

Registered by ``sdpo_kit.registry``; the fields are ``core.algorithm.Algorithm``'s. The frozen reference (and the
teacher, when distillation is on) are a second model's logits in every step. The classic trl 0.11.4 names of its
metrics are ``core.metrics.PPO_CLASSIC_NAMES``.
"""

from __future__ import annotations

from sdpo_kit.core.algorithm import Algorithm, Backend
from sdpo_kit.viz.panels import Panel

PPO = Algorithm(
    name="ppo",
    backends={
        "scratch": Backend(config="sdpo_kit.ppo.config:PPOScratchConfig", build="sdpo_kit.ppo.trainer:build_ppo_from_config",
                           pieces="sdpo_kit.ppo.pieces:PIECES"),
    },
    panels=(
        Panel("KL to the reference and its coefficient", ("stats/kl", "stats/kl_coef")),
        Panel("value loss, distillation loss", ("loss/value", "loss/kd")),
    ),
    metric_keys={
        "reward/score_raw": "mean score before score processing (scaling, normalising, clipping)",
        "loss/value": "the clipped value loss, 0.5 x max of squared errors (before vf_coef)",
        "loss/kd": "distillation loss T^2 KL(teacher_T || student_T), token mean (before kd_coef)",
        "stats/kl_coef": "the KL coefficient beta used for the step's per-token rewards",
        "stats/kl": "KL(pi || pi_ref) of the step's responses: summed over tokens, mean over responses",
        "stats/policy_kl": "mean log pi_old - log pi over the PPO passes (early stopping reads it)",
        "stats/approx_kl": "0.5 mean (log pi - log pi_old)^2 over the PPO passes",
        "stats/vf_clip_frac": "fraction of tokens where the value clip is active",
        "stats/explained_variance": "1 - var(returns - values) / var(returns): 1 a perfect critic",
        "stats/early_stopped": "1 when the PPO epochs stopped early (policy KL > 1.5 target_kl)",
        "stats/ppo_epochs_run": "PPO epochs run this step",
    },
    has_teacher=True,
    verl="sdpo_kit.ppo.verl:verl_settings",
)
