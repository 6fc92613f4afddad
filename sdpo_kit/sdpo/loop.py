"""SDPO from scratch: GRPO's loop with self-distillation from a reprompted teacher in its step.

    for step in 1..max_steps:
        q  <- prompts;  o <- G completions each;  r, feedback <- rewards (floats or {score, feedback})
        teacher prompt <- q + the first successful sibling's completion and / or the feedback
                          (reprompt.build_teacher_prompts; mask 0 where neither exists), within
                          max_reprompt_len tokens by cutting the demonstration's head, never the question
        for mu = 1..num_iterations:
            s <- student logits on (q, o);  t <- teacher logits on (teacher prompt, o), no grad
            minimise  w * c * sdpo_loss(s, t, o, mask)  [+ (1 - w) * GRPO's clipped surrogate]
            teacher EMA update every teacher_sync_steps optimizer steps (sdpo.teacher.Teacher)

Field names and defaults follow ``trl.experimental.sdpo.SDPOConfig`` (``SDPOFields``, in ``sdpo/config.py``); ``beta``
is forced to 0 (SDPO has no KL-to-reference term; the teacher takes the reference slot).
``loss_type`` aggregates the GRPO term only (TRL's SDPO too): the distillation term has its own
aggregation, so with ``distillation_weight=1`` any loss_type but the default is refused.

Ours, not TRL's: ``distillation_mode="sequence"`` (one credit per completion, ``sdpo.loss``) and
``distillation_loss_scale`` (c above, default 1): the ablation "the loss times c at the same
learning rate". Under AdamW a constant factor on the loss barely changes the update (Adam divides
the gradient by its own running scale; its first step is about lr * sign(g)), which is what the
ablation shows; sdpo/update_norm measures it.

Metric keys (besides GRPO's batch keys): sdpo/distill_loss, sdpo/teacher_coverage (fraction of
rows with a teacher), sdpo/success_rate, sdpo/success_group_frac, sdpo/feedback_frac,
sdpo/reprompt_truncated, sdpo/teacher_student_kl (mean log s - log t on the sampled tokens under
the mask), loss/policy (the GRPO term when distillation_weight < 1), sdpo/update_norm (the L2 norm
over the trainable parameters of their change by one optimizer step, after minus before; the mean
over the step's num_iterations optimizer steps). ``loss`` includes the factor
distillation_loss_scale, sdpo/distill_loss does not. No gradient norm: the pre-clip norm is
clip_grad_norm_'s return inside ``ScratchTrainer.optimizer_step``, which does not hand it back.

Left out on purpose: the teacher server (TRL's vLLM ``live`` teacher) and distributed gathering.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

from sdpo_kit.core.logprobs import tempered, token_logprobs
from sdpo_kit.core.pieces import prepare
from sdpo_kit.core.sampling import completion_logits
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.loss import group_advantages, grpo_loss
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loss import sdpo_loss
from sdpo_kit.sdpo.pieces import PIECES
from sdpo_kit.sdpo.teacher import Teacher

COVERAGE_WARN_STEPS = 10  # steps in a row without any teacher before saying so (TRL's diagnostics interval)


class SDPOScratchTrainer(GRPOScratchTrainer):
    """The scratch SDPO trainer (``SDPOScratchConfig``); rows need ``prompt`` and the rewards' columns.
    ``distill_fn``: your per-token distillation loss in place of the library's (``sdpo/pieces.py``)."""

    SAMPLER_CORRECTION = False   # its loss has no sampler_weights: sampling_dtype stays float32

    def __init__(self, model, tokenizer, reward_funcs: Sequence[Callable], train_rows: list[dict],
                 config: SDPOScratchConfig | None = None, *, eval_fn: Callable | None = None,
                 callbacks: Sequence[Callable] = (), reward_weights: Sequence[float] | None = None,
                 distill_fn: Callable | None = None):
        config = config or SDPOScratchConfig()
        (self.distill_fn,) = prepare(PIECES, config, distill_fn=distill_fn)
        super().__init__(model, tokenizer, reward_funcs, train_rows, config, eval_fn=eval_fn, callbacks=callbacks,
                         reward_weights=reward_weights)
        self.teacher = Teacher(model, config.teacher_model_kind, config.teacher_update_rate, config.teacher_sync_steps)
        self.ref_model = self.teacher.model  # the reference slot holds the teacher (beta is 0): no third model
        self._steps_without_teacher = 0

    def teacher_logits(self, teacher_ids, teacher_mask, completion_ids, completion_mask) -> torch.Tensor:
        """The teacher's logits over the completion, (B, T, V), in micro-batches, no gradients."""
        B = completion_ids.size(0)
        size = self.config.distillation_micro_batch_size or B
        out = []
        with torch.no_grad(), self.teacher.forward() as teacher:
            for i in range(0, B, size):
                out.append(completion_logits(teacher, teacher_ids[i:i + size], teacher_mask[i:i + size],
                                             completion_ids[i:i + size], completion_mask[i:i + size]))
        return tempered(torch.cat(out), self.config.temperature)                  # (B, T, V)

    def objective(self, ro, teacher_ids, teacher_mask, mask, advantages=None, old_logp=None):
        """One pass's loss on a rollout: (loss, GRPO term or None, sdpo stats, old_logp).

        ``mask`` (B, T): completion mask x self-distillation mask; ``advantages`` (B,) only when
        ``distillation_weight < 1``; ``old_logp`` None on the first pass (it is this forward)."""
        cfg = self.config
        student = tempered(completion_logits(self.model, ro.prompt_ids, ro.prompt_mask, ro.completion_ids,
                                             ro.completion_mask), cfg.temperature)     # (B, T, V)
        teacher = self.teacher_logits(teacher_ids, teacher_mask, ro.completion_ids, ro.completion_mask)  # (B, T, V)
        logp = token_logprobs(student, ro.completion_ids)                              # (B, T)
        old_logp = logp.detach() if old_logp is None else old_logp                      # (B, T)
        loss, stats = sdpo_loss(student, teacher, ro.completion_ids, mask, mode=cfg.distillation_mode,
                                top_k=cfg.distillation_topk, alpha=cfg.distillation_alpha,
                                add_tail=cfg.distillation_add_tail, old_logp=old_logp, is_clip=cfg.distillation_is_clip,
                                per_token_fn=self.distill_fn)
        loss = cfg.distillation_loss_scale * loss
        policy = None
        if advantages is not None:
            policy, _ = grpo_loss(logp, old_logp, advantages, ro.completion_mask, epsilon=cfg.epsilon,
                                  epsilon_high=cfg.epsilon_high, loss_type=cfg.loss_type,
                                  max_completion_length=cfg.max_completion_length)
            loss = (1 - cfg.distillation_weight) * policy + cfg.distillation_weight * loss
        return loss, policy, stats, old_logp

    def step(self) -> dict:
        cfg, G = self.config, self.config.num_generations
        rows = self.next_rows()
        ro = self.sample_batch(rows)
        rewards, per_func, feedbacks = self.score(rows, ro)
        device = ro.completion_mask.device
        prompts = [r["prompt"] for r in rows for _ in range(G)]
        completions = self.completions(ro, rows)
        t_ids, t_mask, selection, truncated = cfg.teacher_batch(self.tokenizer, prompts, completions, rewards,
                                                                feedbacks, device=device)
        sd_mask = selection.mask                                                        # (B,)
        if self.completions_wanted():  # what the teacher read, as it read it (cut, padding dropped)
            self.record_completions(teacher_prompt=self.tokenizer.batch_decode(t_ids, skip_special_tokens=True),
                                    has_teacher=[bool(x) for x in sd_mask.tolist()])
        mask = ro.completion_mask * sd_mask.to(device).unsqueeze(1)                    # (B, T)
        advantages = None
        if cfg.distillation_weight < 1.0:
            advantages = group_advantages(rewards, G, cfg.scale_rewards).to(device)   # (B,)
        self.model.train()
        old_logp, update_norms = None, []
        for _ in range(cfg.num_iterations):
            loss, policy, stats, old_logp = self.objective(ro, t_ids, t_mask, mask, advantages, old_logp)
            update_norms.append(self.optimizer_step(loss))
            self.teacher.optimizer_step()
        coverage = selection.metrics()
        self._warn_if_no_teacher(coverage["sdpo/teacher_coverage"])
        return {
            **self.batch_metrics(rewards, per_func, ro.completion_mask),
            "loss": loss.item(),
            "loss/policy": policy.item() if policy is not None else 0.0,
            "loss/kl": 0.0,
            "sdpo/distill_loss": stats["distill_loss"].item(),
            "sdpo/teacher_student_kl": stats["kl_sampled"].item(),
            "sdpo/reprompt_truncated": truncated,
            "sdpo/update_norm": sum(update_norms) / len(update_norms),
            **{k: coverage[k] for k in ("sdpo/teacher_coverage", "sdpo/success_rate", "sdpo/success_group_frac",
                                        "sdpo/feedback_frac")},
        }

    def optimizer_step(self, loss: torch.Tensor) -> float:
        """GRPOScratchTrainer's step (backward, clip, AdamW, schedule); returns the L2 norm of the change
        it made to the trainable parameters (a copy of them is held for the step: cheap on the
        lab's models, one more copy of the weights on a full fine-tune)."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        before = [p.detach().clone() for p in params]
        super().optimizer_step(loss)
        with torch.no_grad():
            norms = [torch.linalg.vector_norm(p.detach() - b) for p, b in zip(params, before)]  # one per tensor
            return torch.linalg.vector_norm(torch.stack([n.to(norms[0].device, torch.float32) for n in norms])).item()

    def _warn_if_no_teacher(self, coverage: float) -> None:
        self._steps_without_teacher = self._steps_without_teacher + 1 if coverage == 0 else 0
        if self._steps_without_teacher == COVERAGE_WARN_STEPS:
            warnings.warn(f"SDPO: no row had a teacher for {COVERAGE_WARN_STEPS} steps in a row (no successful "
                          "sibling, no feedback), so nothing is being learned; lower success_reward_threshold, "
                          "add feedback (include_environment_feedback), or warm-start the policy", stacklevel=2)

    def extra_state(self) -> dict:
        return {**super().extra_state(), "teacher": self.teacher.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        super().load_extra_state(state)
        self.teacher.load_state_dict(state.get("teacher", {}))

    def save_extra_files(self, folder) -> None:
        self.teacher.save(folder / "teacher")

    def load_extra_files(self, folder) -> None:
        self.teacher.load(folder / "teacher")
