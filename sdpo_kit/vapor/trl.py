"""VAPOR on TRL: ``VAPORTRLTrainer(GRPOTrainer)`` and ``VAPORTRLArgs(GRPOConfig)`` (the objective: ``vapor/loss.py``).

The trainer overrides only what it must:

* ``_generate_and_score_completions``: TRL's own (generation, rewards gathered across
  processes for the group mean, advantages), then the verifiable span mask of each completion
  and the chosen / rejected sequences of each row with their preference-span log-probs under
  the reference (computed once per generation batch, each distinct pair once);
* ``_compute_loss``: ``vapor.loss`` on the micro-batch (each distinct pair's policy
  log-probs computed once), plus ``beta * vapor_kl`` when ``beta > 0`` (GRPO's KL term: k3 x
  the importance ratio unless ``use_bias_correction_kl`` is off, as in TRL's GRPO).

Everything else (data loading, the repeat sampler, gradient accumulation, checkpoints, which
save the VAPOR fields with the config) is TRL's. The reference is TRL's when ``beta > 0``, else a
frozen copy of the starting policy, or for a PEFT policy its base model (adapters disabled).

TRL shuffles and splits a generation batch into micro-batches, so the loss works per row:
each row carries its own pair, and log P is per row (the same for a group's G rows), which is
``vapor_loss`` with ``num_generations=1``: the same formula.

Import this module after Unsloth (``models.load_policy`` on a GPU imports it), so the class
derives from Unsloth's patched GRPOTrainer; the CLI and the registry import it late.
``build_trl_vapor_trainer`` mirrors ``grpo.trl.build_trl_grpo_trainer``.

Metric keys: GRPO's (TRL-mapped) plus vapor/preference_term, vapor/log_preference,
vapor/verifiable_ratio, vapor/span_found_frac, vapor/preference_found_frac (and loss/dpo).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig, GRPOTrainer

from sdpo_kit.core.checkpoint import is_peft
from sdpo_kit.grpo.trl import build_from_config
from sdpo_kit.tasks.base import check_preference_rows
from sdpo_kit.vapor.config import VAPORTRLConfig
from sdpo_kit.vapor.loop import vapor_metrics, vapor_objective
from sdpo_kit.vapor.loss import preference_log_term, vapor_kl
from sdpo_kit.vapor.parts import (
    PreferenceBatch,
    as_reference,
    completion_span_mask,
    preference_batch,
    preference_span_logps,
)


@dataclass
class VAPORTRLArgs(GRPOConfig):
    """``trl.GRPOConfig`` plus VAPOR's fields (``beta`` stays TRL's KL weight). Defined here, not in
    ``vapor/config.py``: it derives from TRL's class, looked up after Unsloth has patched it."""

    verifiable_term_split: tuple = field(default=("<answer>", "</answer>"), metadata={"help": "tags of the verifiable span"})
    preference_term_split: tuple = field(default=("<answer>", "</answer>"), metadata={"help": "tags of the preference span"})
    preference_beta: float = field(default=0.1, metadata={"help": "VAPOR's preference temperature: the DPO beta of log P"})
    vapor_variant: str = field(default="as_specified", metadata={"help": "as_specified | additive"})
    preference_weight: float = field(default=1.0, metadata={"help": "lambda of the additive variant's DPO term"})
    scale_rewards: str = field(default="none", metadata={"help": "A = r - mean of the group (VAPOR's advantage, no std scaling)"})


def _rows_key(*tensors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(first row index of each distinct row, inverse index) over the concatenated tensors."""
    rows = torch.cat([t.reshape(t.size(0), -1).to(torch.long) for t in tensors], 1)  # (B, *)
    _, inverse = torch.unique(rows, dim=0, return_inverse=True)                         # (B,)
    first = torch.full((int(inverse.max()) + 1,), -1, dtype=torch.long)
    for b in range(rows.size(0) - 1, -1, -1):
        first[inverse[b]] = b
    return first.to(rows.device), inverse.to(rows.device)


def _pairs(inputs: dict) -> tuple[PreferenceBatch, torch.Tensor]:
    """The distinct (prompt, chosen, rejected) rows of a batch as one PreferenceBatch, and the
    inverse index that spreads their (P,) results back to the batch's rows."""
    first, inverse = _rows_key(inputs["prompt_ids"], inputs["chosen_ids"], inputs["rejected_ids"])
    pick = lambda k: inputs[k][first]  # noqa: E731
    return PreferenceBatch(
        prompt_ids=torch.cat([pick("prompt_ids"), pick("prompt_ids")]),
        prompt_mask=torch.cat([pick("prompt_mask"), pick("prompt_mask")]),
        completion_ids=_cat_padded(pick("chosen_ids"), pick("rejected_ids"), 0),
        completion_mask=_cat_padded(pick("chosen_mask"), pick("rejected_mask"), 0),
        span_mask=_cat_padded(pick("chosen_span"), pick("rejected_span"), 0),
        found=pick("pair_found"),
    ), inverse


def _cat_padded(a: torch.Tensor, b: torch.Tensor, value) -> torch.Tensor:
    """Stack two right-padded (n, T_a) and (n, T_b) tensors into (2n, max T)."""
    T = max(a.size(1), b.size(1))
    pad = lambda x: torch.nn.functional.pad(x, (0, T - x.size(1)), value=value)  # noqa: E731
    return torch.cat([pad(a), pad(b)])


class VAPORTRLTrainer(GRPOTrainer):
    """TRL's GRPOTrainer with VAPOR's objective; args: a ``VAPORTRLArgs``. Rows need ``chosen`` and
    ``rejected`` besides ``prompt`` and the reward's columns."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_preference_rows(list(self.train_dataset) if self.train_dataset is not None else [])
        # pi_ref for the preference term: TRL's (beta > 0), the base model (PEFT), or a frozen copy
        self.vapor_ref_model = self.ref_model
        if self.vapor_ref_model is None and not is_peft(self.model):
            self.vapor_ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)

    def _reference(self):
        model = self.accelerator.unwrap_model(self.model)
        return as_reference(model, self.vapor_ref_model)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        args, device = self.args, self.accelerator.device
        tok = self.processing_class
        output["span_mask"] = completion_span_mask(tok, output["completion_ids"], output["completion_mask"],
                                                   args.verifiable_term_split)                      # (B, T)
        # each row's pair, tokenised once; the reference log-probs of each distinct pair
        pref = preference_batch(tok, [x["prompt"] for x in inputs], [x["chosen"] for x in inputs],
                                [x["rejected"] for x in inputs], args.preference_term_split, device)
        B = len(inputs)
        output.update(chosen_ids=pref.completion_ids[:B], rejected_ids=pref.completion_ids[B:],
                      chosen_mask=pref.completion_mask[:B], rejected_mask=pref.completion_mask[B:],
                      chosen_span=pref.span_mask[:B], rejected_span=pref.span_mask[B:], pair_found=pref.found)
        pairs, inverse = _pairs(output)
        with torch.no_grad(), self._reference() as ref:
            ref_c, ref_r = preference_span_logps(ref, pairs)                                          # (P,), (P,)
        output["ref_chosen_logps"], output["ref_rejected_logps"] = ref_c[inverse], ref_r[inverse]   # (B,)
        return output

    def _compute_loss(self, model, inputs):
        args = self.args
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
        logp, _, _ = self._get_per_token_logps_and_entropies(model, ids, attention, inputs["completion_ids"].size(1))  # (b, T)
        old_logp = inputs.get("old_per_token_logps")
        old_logp = logp.detach() if old_logp is None else old_logp                                   # (b, T)
        pairs, inverse = _pairs(inputs)
        chosen, rejected = preference_span_logps(model, pairs)                                       # (p,), (p,)
        log_pref = preference_log_term(chosen[inverse], inputs["ref_chosen_logps"], rejected[inverse],
                                       inputs["ref_rejected_logps"], args.preference_beta)           # (b,)
        found = inputs["pair_found"].to(logp.dtype)                                                  # (b,)
        loss, stats, extra = vapor_objective(logp, old_logp, inputs["span_mask"], inputs["advantages"], log_pref,
                                             found, args, 1)
        mask = inputs["completion_mask"]
        mode = "train" if self.model.training else "eval"
        metrics = self._metrics[mode]
        metrics["policy_loss"].append(loss.item())
        if self.beta != 0.0:  # GRPO's KL term, the scratch loop's: k3 x the importance ratio
            penalty, kl = vapor_kl(logp, inputs["ref_per_token_logps"], mask,
                                   old_logp if args.use_bias_correction_kl else None)               # scalar, scalar
            loss = loss + self.beta * penalty
            metrics["kl"].append(kl.item())
        for key, value in {**vapor_metrics(log_pref, found, stats), **extra, "clip_ratio/region_mean": stats["clip_frac"],
                           "clip_ratio/low_mean": stats["clip_frac_low"],
                           "clip_ratio/high_mean": stats["clip_frac_high"]}.items():
            metrics[key].append(float(value))
        if mode == "train":  # TRL scales for gradient accumulation itself only in its own loss
            loss = loss / self.current_gradient_accumulation_steps
        return loss


def build_trl_vapor_trainer(model, tokenizer, reward_funcs, train_dataset, **kwargs):
    """``grpo.trl.build_trl_grpo_trainer`` with ``VAPORTRLTrainer`` / ``VAPORTRLArgs`` (same arguments,
    plus VAPOR's fields: verifiable_term_split, preference_term_split, preference_beta, ...)."""
    from sdpo_kit.grpo.trl import build_trl_grpo_trainer

    return build_trl_grpo_trainer(model, tokenizer, reward_funcs, train_dataset, trainer_class=VAPORTRLTrainer,
                                  args_class=VAPORTRLArgs, **kwargs)


def build_vapor_from_config(model, tokenizer, reward_funcs, train_rows, config: VAPORTRLConfig, *,
                            eval_fn: Callable | None = None, callbacks: Sequence = (),
                            reward_weights: Sequence[float] | None = None, verbose: bool = False):
    """What the registry calls for ``algorithm: vapor, backend: trl``."""
    return build_from_config(model, tokenizer, reward_funcs, train_rows, config, eval_fn=eval_fn, callbacks=callbacks,
                             reward_weights=reward_weights, verbose=verbose, trainer_class=VAPORTRLTrainer,
                             args_class=VAPORTRLArgs)
