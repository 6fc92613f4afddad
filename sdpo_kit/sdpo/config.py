"""SDPO's config classes: SDPO's knobs and the two backends' configs that carry them.

    SDPOFields      SDPO's knobs (TRL's ``trl.experimental.sdpo.SDPOConfig`` names and defaults) plus ours:
                    ``distillation_micro_batch_size``, ``distillation_loss_scale``, the ``sequence`` mode;
                    and how both backends build a batch's teacher prompts from them (``teacher_batch``)
    SDPOScratchConfig  the scratch loop's (``sdpo/loop.py``): GRPOScratchConfig + SDPOFields
    SDPOTRLConfig   the YAML ``trainer:`` section of ``algorithm: sdpo, backend: trl``: GRPOTRLConfig + SDPOFields

``SDPOTRLArgs``, the ``trl.GRPOConfig`` subclass SDPOTRLTrainer is built with, stays in ``sdpo/trl.py``:
defining it imports TRL, which must come after Unsloth has patched it (``models.load_policy`` on a GPU),
and this module is imported by the scratch loop, which never imports TRL.

``read_feedback_column(cfg)`` is SDPO's check of a whole config (its ``Algorithm.prepare``): a dataset's feedback
column, when the task names one, reaches the teacher, or the config is refused naming the key to set.

``beta`` is forced to 0 with a warning (SDPO has no KL-to-reference term; the teacher takes the
reference's slot). ``loss_type`` aggregates the GRPO term only (TRL's SDPO too): with
``distillation_weight=1`` any loss_type but the default is refused.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from sdpo_kit.core.sampling import encode_prompts
from sdpo_kit.grpo.config import GRPOScratchConfig, GRPOTRLConfig
from sdpo_kit.grpo.loss import LOSS_TYPES
from sdpo_kit.sdpo.loss import SDPO_MODES
from sdpo_kit.sdpo.teacher import TEACHER_KINDS, teacher_prompt_batch
from sdpo_kit.text.reprompt import (
    FEEDBACK_TEMPLATE,
    REPROMPT_TEMPLATE,
    SOLUTION_TEMPLATE,
    TeacherSelection,
    fit_teacher_prompts,
    render_teacher_prompts,
    select_teachers,
)

DISTILLATION_LOSS_TYPE = "dapo"  # the only loss_type pure distillation accepts: the default, which it ignores


@dataclass
class SDPOFields:
    """SDPO's knobs (TRL's SDPOConfig names and defaults) plus ours: ``distillation_micro_batch_size``,
    ``distillation_loss_scale`` and the ``sequence`` mode (``sdpo/loop.py``'s docstring)."""

    distillation_mode: str = "sampled_token"     # sampled_token | topk_logits | full_logits | sequence (ours)
    distillation_topk: int | None = None
    distillation_alpha: float = 1.0              # 0: KL(teacher || student), 1: KL(student || teacher)
    distillation_add_tail: bool = False
    distillation_is_clip: float | None = 2.0
    distillation_weight: float = 1.0             # 1: pure distillation; else (1 - w) GRPO + w SDPO
    # loss_type (GRPO's field) aggregates the GRPO term only, as in TRL's SDPO; the distillation
    # term is always the per-sequence token mean, then the mean over sequences (sdpo.loss)
    distillation_micro_batch_size: int | None = None  # rows per teacher forward (the longer one); None: all
    # ours: the distillation term times c at the same learning rate (an ablation: under AdamW a
    # constant factor on the loss barely changes the update); > 0
    distillation_loss_scale: float = 1.0
    teacher_model_kind: str = "ema"              # live | base | ema
    teacher_update_rate: float = 0.05
    teacher_sync_steps: int = 1
    use_successful_as_teacher: bool = True
    success_reward_threshold: float = 1.0
    dont_reprompt_on_self_success: bool = True
    max_reprompt_len: int = 10240
    reprompt_template: str = REPROMPT_TEMPLATE
    solution_template: str = SOLUTION_TEMPLATE
    feedback_template: str = FEEDBACK_TEMPLATE
    include_environment_feedback: bool | None = None   # None: on when the task names a feedback column, else off
    environment_feedback_only_without_solution: bool = False
    remove_thinking_from_demonstration: bool = False

    def __post_init__(self):
        if getattr(self, "beta", 0.0) != 0.0:
            warnings.warn("SDPO has no KL-to-reference term: beta is set to 0 (the teacher takes the reference's "
                          "place)", stacklevel=3)
            self.beta = 0.0
        super().__post_init__()
        if self.distillation_mode not in SDPO_MODES:
            raise ValueError(f"distillation_mode must be one of {SDPO_MODES}, got {self.distillation_mode!r}")
        if self.distillation_mode == "topk_logits" and not self.distillation_topk:
            raise ValueError("distillation_mode='topk_logits' needs distillation_topk")
        if self.distillation_mode in ("sampled_token", "sequence") and self.distillation_alpha != 1.0:
            raise ValueError(f"distillation_mode={self.distillation_mode!r} needs distillation_alpha=1.0 (reverse KL)")
        if not self.distillation_loss_scale > 0:
            raise ValueError(f"distillation_loss_scale must be > 0, got {self.distillation_loss_scale}")
        if not 0.0 <= self.distillation_weight <= 1.0:
            raise ValueError(f"distillation_weight must be in [0, 1], got {self.distillation_weight}")
        if self.teacher_model_kind not in TEACHER_KINDS:
            raise ValueError(f"teacher_model_kind must be one of {TEACHER_KINDS}, got {self.teacher_model_kind!r}")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}")
        if self.loss_type != DISTILLATION_LOSS_TYPE and self.distillation_weight == 1.0:
            raise ValueError(
                f"loss_type={self.loss_type!r} would change nothing with distillation_weight=1.0: the "
                f"self-distillation term always averages each sequence's tokens, then the sequences (TRL's "
                f"SDPO aggregation); loss_type aggregates only the GRPO term, used when distillation_weight < 1. "
                f"Leave loss_type at {DISTILLATION_LOSS_TYPE!r}, or set distillation_weight < 1")

    def select_teachers(self, rewards, feedbacks, num_generations: int | None = None) -> TeacherSelection:
        """Each row's demonstration and feedback, by this config's rules (``text.reprompt.select_teachers``)."""
        return select_teachers(rewards, num_generations or self.num_generations, feedbacks,
                               success_threshold=self.success_reward_threshold,
                               dont_reprompt_on_self_success=self.dont_reprompt_on_self_success,
                               include_feedback=bool(self.include_environment_feedback),
                               feedback_only_without_solution=self.environment_feedback_only_without_solution,
                               use_successful_as_teacher=self.use_successful_as_teacher)

    @property
    def templates(self) -> dict:
        return dict(reprompt_template=self.reprompt_template, solution_template=self.solution_template,
                    feedback_template=self.feedback_template,
                    remove_thinking_from_demonstration=self.remove_thinking_from_demonstration)

    def teacher_prompts(self, prompts, completions, rewards, feedbacks, num_generations: int | None = None):
        """(teacher prompts, ``TeacherSelection``) of a batch, by this config's rules and templates,
        not cut to ``max_reprompt_len`` (``teacher_batch`` cuts them)."""
        selection = self.select_teachers(rewards, feedbacks, num_generations)
        return render_teacher_prompts(prompts, completions, feedbacks, selection, **self.templates), selection

    def teacher_batch(self, tokenizer, prompts, completions, rewards, feedbacks, num_generations: int | None = None,
                      device=None):
        """What both backends feed the teacher: (ids, mask, ``TeacherSelection``, fraction of rows cut).

        The teacher prompts (``teacher_prompts``), each kept within ``max_reprompt_len`` tokens by
        cutting the head of its demonstration, then of its feedback, so the question and the
        instruction stay (``text.reprompt.fit_teacher_prompts``), then left-padded (``teacher_prompt_batch``,
        whose left cut is left for a question that alone is too long)."""
        selection = self.select_teachers(rewards, feedbacks, num_generations)

        def count_tokens(batch: list) -> list[int]:
            return encode_prompts(tokenizer, batch)["attention_mask"].sum(1).tolist()

        teacher, over = fit_teacher_prompts(prompts, completions, feedbacks, selection, count_tokens,
                                            self.max_reprompt_len, **self.templates)
        fitted = sum(o and count_tokens([t])[0] <= self.max_reprompt_len for o, t in zip(over, teacher))
        if fitted:  # the rest still over: teacher_prompt_batch cuts them from the left and says so
            warnings.warn(f"SDPO: {fitted} teacher prompt(s) longer than max_reprompt_len={self.max_reprompt_len} "
                          f"tokens: the head of their demonstration (then feedback) was cut, the question kept "
                          f"(sdpo/reprompt_truncated counts them)", stacklevel=2)
        ids, mask, _ = teacher_prompt_batch(tokenizer, teacher, self.max_reprompt_len, device)
        return ids, mask, selection, sum(over) / max(1, len(over))


def read_feedback_column(cfg) -> None:
    """SDPO's check of a whole config (``Algorithm.prepare``): when the task names a feedback column (a dataset's
    ``feedback_field``), the teacher reads it. ``include_environment_feedback`` left unset (None) turns on; a setting
    that would leave the column unused is a ValueError naming the key to set: no ``feedback`` reward (the one that
    carries a row's feedback to the teacher), or ``include_environment_feedback: false``. Without such a column,
    unset means off (TRL's default)."""
    tc, column = cfg.trainer, (cfg.task or {}).get("feedback_field")
    if not column:
        if tc.include_environment_feedback is None:
            tc.include_environment_feedback = False
        return
    if not any(r.get("type") == "feedback" for r in cfg.reward):
        raise ValueError(f"task.feedback_field={column!r} names a feedback column, but no reward carries it to SDPO's "
                         "teacher: add the feedback reward (reward: [{type: feedback}])")
    if tc.include_environment_feedback is False:
        raise ValueError(f"task.feedback_field={column!r} names a feedback column, but "
                         "trainer.include_environment_feedback is false, so the teacher would never read it: set "
                         "trainer.include_environment_feedback: true (or leave it unset), or drop task.feedback_field")
    tc.include_environment_feedback = True


@dataclass
class SDPOScratchConfig(SDPOFields, GRPOScratchConfig):
    """The scratch SDPO loop's config: GRPO's (``GRPOScratchConfig``) plus ``SDPOFields``."""


@dataclass
class SDPOTRLConfig(SDPOFields, GRPOTRLConfig):
    """The YAML ``trainer:`` section for ``algorithm: sdpo``, ``backend: trl``."""
