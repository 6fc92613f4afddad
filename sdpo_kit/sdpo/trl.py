"""SDPO on TRL: ``SDPOTRLTrainer(GRPOTrainer)`` and ``SDPOTRLArgs(GRPOConfig)``.

TRL's own ``trl.experimental.sdpo.SDPOTrainer`` is a separate ~1,600-line trainer, not a
``GRPOTrainer``, so Unsloth's patched GRPOTrainer (Colab's fast path) never reaches it. This
one is a GRPOTrainer that overrides two methods:

* ``_generate_and_score_completions``: TRL's own (generation, rewards, advantages), then each
  row's teacher input, ``teacher_input_ids`` = the reprompted prompt (``reprompt``) + the same
  completion, and its ``self_distillation_mask`` (TRL's SDPO batch keys), so TRL's buffering
  across ``steps_per_generation`` carries them;
* ``compute_loss``: at ``distillation_weight == 1`` only the self-distillation loss (no GRPO
  advantage is used); otherwise ``(1 - w) * GRPO's clipped surrogate + w * distillation`` on the
  same student logits, as TRL's SDPO (its policy term has no KL).

Field names and defaults are TRL's SDPOConfig's (``sdpo.config.SDPOFields``); ``beta`` is forced
to 0 with a warning and the teacher (``sdpo.teacher.Teacher``: live, base, or an EMA copy / adapter)
sits in the reference-model slot. Reward functions may return ``{"score", "feedback"}``: the
builder wraps them so the feedback reaches the teacher prompts.

Equal to TRL 1.16's own SDPOTrainer on the same batch with the same teacher (a test builds both),
except for a teacher prompt over ``max_reprompt_len`` tokens: TRL cuts it from the left, losing the
question first; here the head of its demonstration goes instead (``SDPOFields.teacher_batch``).
Two knobs of ours TRL lacks work here too, through the same ``sdpo_loss`` call: the ``sequence``
distillation mode and ``distillation_loss_scale`` (the distillation term times c).
Import after Unsloth (``models.load_policy`` on a GPU does), so the class derives from the
patched GRPOTrainer; the CLI and the registry import it late.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from sdpo_kit.core.logprobs import tempered, token_logprobs
from sdpo_kit.grpo.loss import grpo_loss
from sdpo_kit.grpo.trl import build_from_config
from sdpo_kit.sdpo.config import SDPOFields, SDPOTRLConfig
from sdpo_kit.sdpo.loss import sdpo_loss
from sdpo_kit.sdpo.teacher import Teacher


@dataclass
class SDPOTRLArgs(SDPOFields, GRPOConfig):
    """``trl.GRPOConfig`` plus SDPO's fields (TRL's SDPOConfig names and defaults). Defined here, not in
    ``sdpo/config.py``: it derives from TRL's class, looked up after Unsloth has patched it."""


class _TeacherEMA(TrainerCallback):
    """Moves the EMA teacher after every optimizer step (TRL's global step counts the mu passes)."""

    def __init__(self, teacher: Teacher):
        self.teacher = teacher

    def on_step_end(self, args, state, control, **kwargs):
        self.teacher.optimizer_step()


def forward_logits(model, input_ids, attention_mask, T: int, temperature: float) -> torch.Tensor:
    """Logits predicting the last T tokens at the temperature (``core.logprobs.tempered``), (B, T, V) (TRL's SDPO forward)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, logits_to_keep=T + 1).logits
    return tempered(logits[:, :-1][:, -T:], temperature)                        # (B, T, V)


class SDPOTRLTrainer(GRPOTrainer):
    """TRL's GRPOTrainer trained by self-distillation; args: an ``SDPOTRLArgs``."""

    def __init__(self, *args, feedback_sinks: Sequence[list] = (), **kwargs):
        super().__init__(*args, **kwargs)
        a = self.args
        self.teacher = Teacher(self.model, a.teacher_model_kind, a.teacher_update_rate, a.teacher_sync_steps)
        self.ref_model = self.teacher.model  # beta is 0: the reference slot holds the teacher, no third model
        self.add_callback(_TeacherEMA(self.teacher))
        self.feedback_sinks = list(feedback_sinks)
        self._last_rewards = None
        self.teacher_samples: dict[str, list] = {}

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards = (rewards_per_func * self.reward_weights.to(rewards_per_func.device).unsqueeze(0)).nansum(1)
        return rewards_per_func

    def _feedbacks(self, n: int) -> list[str | None]:
        rows = [s for s in self.feedback_sinks if len(s) == n]
        return ["\n".join(t for t in texts if t) or None for texts in zip(*rows)] if rows else [None] * n

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        a, mode = self.args, "train" if self.model.training else "eval"
        G = self.num_generations if mode == "train" else self.num_generations_eval
        B = output["completion_ids"].size(0)
        start = self.accelerator.process_index * B
        rewards = self._last_rewards[start:start + B].cpu()                                  # (B,)
        prompts = [x["prompt"] for x in inputs]
        texts = self.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
        completions = [[{"role": "assistant", "content": t}] for t in texts] if not isinstance(prompts[0], str) else texts
        feedbacks = self._feedbacks(B)
        ids, mask, selection, truncated = a.teacher_batch(self.processing_class, prompts, completions, rewards,
                                                          feedbacks, G, output["completion_ids"].device)
        output["teacher_input_ids"] = torch.cat([ids, output["completion_ids"]], 1)
        output["teacher_attention_mask"] = torch.cat([mask, output["completion_mask"]], 1)
        output["self_distillation_mask"] = selection.mask.to(output["completion_ids"].device)
        # the completions table's SDPO columns (core.completions.trl_samples): what the teacher read
        self.teacher_samples = {"teacher_prompt": self.processing_class.batch_decode(ids, skip_special_tokens=True),
                                "has_teacher": [bool(x) for x in selection.mask.tolist()]}
        for key, value in {**selection.metrics(), "sdpo/reprompt_truncated": truncated}.items():
            self._metrics[mode][key].append(value)
        return output

    def _student_logits(self, model, inputs) -> torch.Tensor:
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
        return forward_logits(model, ids, attention, inputs["completion_ids"].size(1), self.temperature)  # (B, T, V)

    def _distillation_loss(self, student: torch.Tensor, inputs) -> torch.Tensor:
        a = self.args
        B, T = inputs["completion_ids"].shape
        size = a.distillation_micro_batch_size or B
        with torch.no_grad(), self.teacher.forward() as teacher:
            teacher_logits = torch.cat([
                forward_logits(teacher, inputs["teacher_input_ids"][i:i + size],
                               inputs["teacher_attention_mask"][i:i + size], T, self.temperature)
                for i in range(0, B, size)])                                                 # (B, T, V)
        mask = inputs["completion_mask"] * inputs["self_distillation_mask"].unsqueeze(1)      # (B, T)
        loss, stats = sdpo_loss(student, teacher_logits, inputs["completion_ids"], mask, mode=a.distillation_mode,
                                top_k=a.distillation_topk, alpha=a.distillation_alpha, add_tail=a.distillation_add_tail,
                                old_logp=inputs.get("old_per_token_logps"), is_clip=a.distillation_is_clip)
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["sdpo/distill_loss"].append(stats["distill_loss"].item())
        self._metrics[mode]["sdpo/teacher_student_kl"].append(stats["kl_sampled"].item())
        return a.distillation_loss_scale * loss

    def _policy_loss(self, student: torch.Tensor, inputs) -> torch.Tensor:
        """GRPO's clipped surrogate on the same student logits, no KL (TRL's SDPO policy term)."""
        logp = token_logprobs(student, inputs["completion_ids"])                             # (B, T)
        old = inputs.get("old_per_token_logps")
        loss, _ = grpo_loss(logp, logp.detach() if old is None else old, inputs["advantages"],
                            inputs["completion_mask"], epsilon=self.args.epsilon, epsilon_high=self.args.epsilon_high,
                            loss_type=self.loss_type, max_completion_length=self.max_completion_length)
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["policy_loss"].append(loss.item())
        return loss

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if return_outputs:
            raise ValueError("SDPOTRLTrainer does not return outputs")
        w = self.args.distillation_weight
        student = self._student_logits(model, inputs)                                        # (B, T, V)
        if w == 1.0:  # pure self-distillation: no GRPO advantage is used
            loss = self._distillation_loss(student, inputs)
        elif w == 0.0:
            loss = self._policy_loss(student, inputs)
        else:
            loss = (1 - w) * self._policy_loss(student, inputs) + w * self._distillation_loss(student, inputs)
        return loss / (self.current_gradient_accumulation_steps if self.model.training else 1.0)


def with_feedback(reward_funcs) -> tuple[list, type]:
    """(reward functions wrapped to keep their feedback texts, an SDPOTRLTrainer class that reads them)."""
    from sdpo_kit.rewards import checked

    funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    sinks = [[] for _ in funcs]
    wrapped = []
    for f, sink in zip(funcs, sinks):
        w = checked(f, sink)
        w.required_columns = getattr(f, "required_columns", ())
        wrapped.append(w)

    class BoundSDPOTRLTrainer(SDPOTRLTrainer):  # this run's feedback sinks
        def __init__(self, *args, **kwargs):
            super().__init__(*args, feedback_sinks=sinks, **kwargs)

    return wrapped, BoundSDPOTRLTrainer


def build_trl_sdpo_trainer(model, tokenizer, reward_funcs, train_dataset, **kwargs):
    """``grpo.trl.build_trl_grpo_trainer`` with ``SDPOTRLTrainer`` / ``SDPOTRLArgs`` (the same arguments
    plus SDPO's fields); reward functions may return ``{"score", "feedback"}``."""
    from sdpo_kit.grpo.trl import build_trl_grpo_trainer

    wrapped, trainer_class = with_feedback(reward_funcs)
    return build_trl_grpo_trainer(model, tokenizer, wrapped, train_dataset, trainer_class=trainer_class,
                                  args_class=SDPOTRLArgs, **kwargs)


def build_sdpo_from_config(model, tokenizer, reward_funcs, train_rows, config: SDPOTRLConfig, *,
                           eval_fn: Callable | None = None, callbacks: Sequence = (),
                           reward_weights: Sequence[float] | None = None, verbose: bool = False):
    """What the registry calls for ``algorithm: sdpo, backend: trl``."""
    wrapped, trainer_class = with_feedback(reward_funcs)
    return build_from_config(model, tokenizer, wrapped, train_rows, config, eval_fn=eval_fn, callbacks=callbacks,
                             reward_weights=reward_weights, verbose=verbose, trainer_class=trainer_class,
                             args_class=SDPOTRLArgs)
