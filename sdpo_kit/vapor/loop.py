"""VAPOR from scratch: GRPO's loop with VAPOR's objective (``vapor.loss``) in its step.

    for step in 1..max_steps:
        q, (y_w, y_l) <- prompts_per_step rows with their chosen / rejected pair
        o             <- G completions per prompt;  r <- verifiable reward (the span's exact match)
        A             <- r - mean of the group        (scale_rewards="none": no std, as VAPOR is specified)
        S             <- each completion's verifiable span (verifiable_term_split's tags)
        log pi_ref(y_w), log pi_ref(y_l) over the preference spans, once
        for mu = 1..num_iterations:
            log P <- preference_beta * DPO margin of (y_w, y_l) under pi vs pi_ref
            minimise vapor_loss(logp, old_logp, S, A, log P)   [+ beta * vapor_kl: GRPO's k3 x ratio]

``vapor_variant="additive"`` is the repaired form the VAPOR notebook measures: GRPO's clipped
surrogate on the span (log P = 0 inside it) plus ``preference_weight`` x DPO's loss
``-log sigmoid(log P)`` on the pairs. ``beta`` keeps TRL's meaning (the KL weight);
``preference_beta`` is the preference term's temperature (DPO's beta).

Metric keys (besides GRPO's): vapor/preference_term (mean P), vapor/log_preference (mean log P),
vapor/verifiable_ratio (mean v), vapor/span_found_frac, vapor/preference_found_frac, and with the
additive variant loss/dpo.

Left out on purpose: what GRPOScratchTrainer leaves out (distributed training, vLLM); the TRL backend
(``vapor/trl.py``) has them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch

from sdpo_kit.core.checkpoint import is_peft
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.loss import group_advantages
from sdpo_kit.tasks.base import check_preference_rows
from sdpo_kit.vapor.config import VAPORScratchConfig
from sdpo_kit.vapor.loss import preference_dpo_loss, preference_log_term, vapor_kl, vapor_loss
from sdpo_kit.vapor.parts import (
    as_reference,
    completion_span_mask,
    preference_batch,
    preference_span_logps,
    reference_span_logps,
)


def vapor_objective(logp, old_logp, span_mask, advantages, log_preference, found, config, num_generations):
    """The loss of one pass, both variants: (loss, stats, extra metrics)."""
    if config.vapor_variant == "as_specified":
        loss, stats = vapor_loss(logp, old_logp, span_mask, advantages, log_preference * found,
                                 num_generations=num_generations, epsilon=config.epsilon,
                                 epsilon_high=config.epsilon_high)                        # scalar
        return loss, stats, {}
    surrogate, stats = vapor_loss(logp, old_logp, span_mask, advantages, torch.zeros_like(log_preference),
                                  num_generations=num_generations, epsilon=config.epsilon,
                                  epsilon_high=config.epsilon_high)                       # scalar
    dpo, _ = preference_dpo_loss(log_preference, found)                                  # scalar
    return surrogate + config.preference_weight * dpo, stats, {"loss/dpo": dpo.item()}


def vapor_metrics(log_preference: torch.Tensor, found: torch.Tensor, stats: dict) -> dict:
    """VAPOR's own metric keys, the same on both backends; P and log P over the found pairs."""
    n_found = found.sum().clamp(min=1.0)
    log_p = log_preference.detach()                                                        # (P,)
    return {
        "vapor/preference_term": ((torch.exp(log_p) * found).sum() / n_found).item(),
        "vapor/log_preference": ((log_p * found).sum() / n_found).item(),
        "vapor/verifiable_ratio": stats["verifiable_ratio_mean"].item(),
        "vapor/span_found_frac": stats["span_found_frac"].item(),
        "vapor/preference_found_frac": found.mean().item(),
    }


class VAPORScratchTrainer(GRPOScratchTrainer):
    """The scratch VAPOR trainer; rows need ``prompt``, ``chosen``, ``rejected`` and the reward's columns."""

    SAMPLER_CORRECTION = False   # its loss has no sampler_weights: sampling_dtype stays float32

    def __init__(self, model, tokenizer, reward_funcs: Sequence[Callable], train_rows: list[dict],
                 config: VAPORScratchConfig | None = None, *, eval_fn: Callable | None = None,
                 callbacks: Sequence[Callable] = (), reward_weights: Sequence[float] | None = None):
        check_preference_rows(train_rows)
        super().__init__(model, tokenizer, reward_funcs, train_rows, config or VAPORScratchConfig(), eval_fn=eval_fn,
                         callbacks=callbacks, reward_weights=reward_weights)
        # the preference term always needs pi_ref: a frozen copy, or the adapters switched off
        if self.ref_model is None and not is_peft(model):
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        elif self.ref_model is not None and is_peft(model):
            self.ref_model = None  # no second copy of a LoRA policy: its base model is the reference

    def step(self) -> dict:
        cfg, G = self.config, self.config.num_generations
        rows = self.next_rows()
        ro, rewards, per_func = self.rollout(rows)
        device = ro.completion_mask.device
        advantages = group_advantages(rewards, G, cfg.scale_rewards).to(device)          # (B,)
        args = (ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
        mask = ro.completion_mask                                                       # (B, T)
        span = completion_span_mask(self.tokenizer, ro.completion_ids, mask, cfg.verifiable_term_split)  # (B, T)
        pref = preference_batch(self.tokenizer, [r["prompt"] for r in rows], [r["chosen"] for r in rows],
                                [r["rejected"] for r in rows], cfg.preference_term_split, device)
        found = pref.found.to(torch.float32)                                            # (P,)
        ref_chosen, ref_rejected = reference_span_logps(self.model, self.ref_model, pref)  # (P,), (P,)
        ref_logp = None
        if cfg.beta != 0.0:
            with torch.no_grad(), as_reference(self.model, self.ref_model) as ref:
                ref_logp = self._logprobs(ref, args)                                    # (B, T)
        self.model.train()
        old_logp = None
        for _ in range(cfg.num_iterations):
            logp = self._logprobs(self.model, args)                                     # (B, T)
            old_logp = logp.detach() if old_logp is None else old_logp                  # (B, T) first pass: on-policy
            chosen, rejected = preference_span_logps(self.model, pref)                  # (P,), (P,)
            log_pref = preference_log_term(chosen, ref_chosen, rejected, ref_rejected, cfg.preference_beta)  # (P,)
            loss, stats, extra = vapor_objective(logp, old_logp, span, advantages, log_pref, found, cfg, G)
            policy_loss = loss.detach()
            kl = torch.zeros((), device=device)
            if ref_logp is not None:  # GRPO's KL term: k3 x the importance ratio (vapor_kl)
                penalty, kl = vapor_kl(logp, ref_logp, mask, old_logp)                  # scalar, scalar
                loss = loss + cfg.beta * penalty                                        # scalar
            self.optimizer_step(loss)
        return {
            **self.batch_metrics(rewards, per_func, mask),
            "loss": loss.item(),
            "loss/policy": policy_loss.item(),
            "loss/kl": kl.item(),
            **extra,
            **vapor_metrics(log_pref, found, stats),
            "stats/clip_frac": stats["clip_frac"].item(),
            "stats/clip_frac_low": stats["clip_frac_low"].item(),
            "stats/clip_frac_high": stats["clip_frac_high"].item(),
            "stats/ratio_mean": stats["h_mean"].item(),
        }
