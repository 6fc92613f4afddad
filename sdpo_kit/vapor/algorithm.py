"""VAPOR, as the library sees it: its backends, its panels and metric keys, its tasks, what data can feed it.

Registered by ``sdpo_kit.registry``; the fields are ``core.algorithm.Algorithm``'s. verl has no loss for it.
"""

from __future__ import annotations

from sdpo_kit.core.algorithm import Algorithm, Backend
from sdpo_kit.viz.panels import Panel

VAPOR = Algorithm(
    name="vapor",
    backends={
        "scratch": Backend(config="sdpo_kit.vapor.config:VAPORScratchConfig",
                           build="sdpo_kit.vapor.loop:VAPORScratchTrainer"),
        "trl": Backend(config="sdpo_kit.vapor.config:VAPORTRLConfig", build="sdpo_kit.vapor.trl:build_vapor_from_config",
                       run="sdpo_kit.core.trl_base:train_trl"),
    },
    panels=(
        Panel("VAPOR preference term P and ratio v", ("vapor/preference_term", "vapor/verifiable_ratio")),
        Panel("VAPOR spans found", ("vapor/span_found_frac", "vapor/preference_found_frac"), ylim=(-0.02, 1.02)),
    ),
    metric_keys={   # stats/ratio_mean is then the mean h
        "vapor/preference_term": "mean P = exp(log P) over the pairs whose preference spans were found",
        "vapor/log_preference": "mean log P = preference_beta x DPO margin vs the reference, found pairs",
        "vapor/verifiable_ratio": "mean v = exp(mean span log-ratio to pi_old); 1 where no span",
        "vapor/span_found_frac": "fraction of completions with a verifiable span",
        "vapor/preference_found_frac": "fraction of pairs whose chosen and rejected spans were both found",
        "loss/dpo": "the additive variant's DPO loss -log sigmoid(log P) (before preference_weight)",
    },
    has_teacher=lambda config: config.beta != 0.0,
    dataset_refusal=("VAPOR trains on tagged answers with preference pairs (chosen / rejected), which a "
                     "question-and-answer file does not have; use grpo or sdpo"),
    tasks=("sdpo_kit.vapor.tasks",),     # vapor_word_problems
)
