"""GRPO, as the library sees it: its backends, what a learner may replace, its verl mapping.

Registered by ``sdpo_kit.registry``; the fields are ``core.algorithm.Algorithm``'s. Its metric keys and panels are
the shared ones (``core.metrics.METRICS``, ``viz.panels.DEFAULT_PANELS``).
"""

from __future__ import annotations

from sdpo_kit.core.algorithm import Algorithm, Backend

GRPO = Algorithm(
    name="grpo",
    backends={
        "scratch": Backend(config="sdpo_kit.grpo.config:GRPOScratchConfig", build="sdpo_kit.grpo.loop:GRPOScratchTrainer",
                           pieces="sdpo_kit.grpo.pieces:PIECES"),
        "trl": Backend(config="sdpo_kit.grpo.config:GRPOTRLConfig", build="sdpo_kit.grpo.trl:build_from_config",
                       run="sdpo_kit.core.trl_base:train_trl"),
    },
    has_teacher=lambda config: config.beta != 0.0,    # a frozen reference for the KL term
    verl="sdpo_kit.grpo.verl:verl_settings",
)
