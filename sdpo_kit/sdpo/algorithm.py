"""SDPO, as the library sees it: its backends, its metric keys, the piece a learner may replace.

Registered by ``sdpo_kit.registry``; the fields are ``core.algorithm.Algorithm``'s. The teacher (the policy
reprompted, live, frozen or an EMA copy) is a second model's logits in every step. verl has no loss for it.
"""

from __future__ import annotations

from sdpo_kit.core.algorithm import Algorithm, Backend

SDPO = Algorithm(
    name="sdpo",
    backends={
        "scratch": Backend(config="sdpo_kit.sdpo.config:SDPOScratchConfig", build="sdpo_kit.sdpo.loop:SDPOScratchTrainer",
                           pieces="sdpo_kit.sdpo.pieces:PIECES"),
        "trl": Backend(config="sdpo_kit.sdpo.config:SDPOTRLConfig", build="sdpo_kit.sdpo.trl:build_sdpo_from_config",
                       run="sdpo_kit.core.trl_base:train_trl"),
    },
    metric_keys={
        "sdpo/distill_loss": "self-distillation loss, token mean over the rows that have a teacher",
        "sdpo/teacher_coverage": "fraction of rows with a teacher (a successful sibling or feedback)",
        "sdpo/success_rate": "fraction of rows whose teacher got a successful sibling's answer",
        "sdpo/success_group_frac": "fraction of groups with at least one success",
        "sdpo/feedback_frac": "fraction of rows whose teacher prompt carries feedback",
        "sdpo/reprompt_truncated": "fraction of teacher prompts cut to max_reprompt_len",
        "sdpo/teacher_student_kl": "mean log pi_student - log pi_teacher on the sampled tokens, rows with a teacher",
    },
    has_teacher=True,
    prepare="sdpo_kit.sdpo.config:read_feedback_column",   # a dataset's feedback column reaches the teacher
)
