"""GRPO from scratch: one readable step (DeepSeekMath, arXiv:2402.03300).

    for step in 1..max_steps:
        q   <- prompts_per_step prompts from the train rows
        o   <- G completions per prompt, sampled from pi_old = the current policy
        r   <- sum of reward functions;  A <- group_advantages(r, G)
        for mu = 1..num_iterations:  minimise grpo_loss(logp, old_logp, A, mask, ref_logp, beta)

A step is one sampled batch and its ``num_iterations`` optimizer passes (the TRL builder
multiplies ``max_steps`` by mu, since TRL counts passes), so one config means the same data
and the same number of updates on both backends. The loop around ``step()`` (row sampling,
optimizer and schedule, evaluation, metrics.jsonl, checkpoints and resume) is the shared
scaffold, ``core.scratch.ScratchTrainer``.

Metric keys it logs (one row per step, the keys ``grpo/trl.py`` writes too; see ``sdpo_kit.core.metrics``):
    step, reward/mean, reward/std, reward/<func name>, loss, loss/policy, loss/kl,
    stats/clip_frac, stats/clip_frac_low, stats/clip_frac_high, stats/ratio_mean,
    stats/frac_zero_std, stats/learning_rate, stats/share_prompt, completion/mean_length,
    time/step_s and its parts time/sample_s, time/score_s, time/forward_s, time/backward_s (the optimizer
    step included), and eval/accuracy (time/eval_s) at step 0, every ``eval_every`` steps and at the end.
    With ``sampling_dtype: bfloat16``: stats/sampler_weight_mean, _min, _max and stats/sampler_dropped_frac.

Left out on purpose: distributed training, gradient accumulation, vLLM; TRL's GRPOTrainer
does those, see ``grpo/trl.py``. A PEFT / LoRA model trains its adapter only.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence

import torch

from sdpo_kit.core.completions import reward_columns
from sdpo_kit.core.pieces import prepare
from sdpo_kit.core.sampler_copy import SAMPLING_DTYPES, SamplerCopy, resolve_sampling_dtype
from sdpo_kit.core.sampling import SharePromptUnsupported, completion_logprobs, sample, shared_prompt_logprobs
from sdpo_kit.core.scratch import ScratchTrainer
from sdpo_kit.core.utils import eval_mode
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loss import group_advantages, grpo_loss, sampler_weights
from sdpo_kit.grpo.pieces import PIECES
from sdpo_kit.rewards import check_columns, compute_rewards_with_feedback, reward_name


class GRPOScratchTrainer(ScratchTrainer):
    """The scratch GRPO trainer.

    Args:
        model, tokenizer: a causal LM and its tokenizer (chat template for chat prompts).
        reward_funcs: TRL-signature reward functions; their sum (``reward_weights``) is the reward.
        train_rows: dicts with ``prompt`` and the columns the rewards need (checked here).
        config: a ``GRPOScratchConfig``.
        eval_fn: ``eval_fn(model) -> float`` (e.g. a task's held-out greedy accuracy), optional.
        callbacks: callables ``cb(metrics: dict)`` run after each logged step (``LivePlot``...).
        advantage_fn, loss_fn: your own advantage and loss in place of the library's (``grpo/pieces.py``
            says how they are called and which settings they refuse); checked at every call.
    """

    def __init__(self, model, tokenizer, reward_funcs: Sequence[Callable], train_rows: list[dict],
                 config: GRPOScratchConfig | None = None, *, eval_fn: Callable | None = None,
                 callbacks: Sequence[Callable] = (), reward_weights: Sequence[float] | None = None,
                 advantage_fn: Callable | None = None, loss_fn: Callable | None = None):
        if not train_rows:
            raise ValueError("train_rows is empty")
        check_columns(train_rows[0].keys(), reward_funcs)
        config = config or GRPOScratchConfig()
        self.advantage_fn, self.loss_fn = prepare(PIECES, config, advantage_fn=advantage_fn, loss_fn=loss_fn)
        super().__init__(model, tokenizer, train_rows, config, eval_fn=eval_fn, callbacks=callbacks)
        self.reward_funcs, self.reward_weights = list(reward_funcs), reward_weights
        self.ref_model = None
        if config.beta != 0.0:  # frozen copy of the starting policy
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        if config.share_prompt is True and getattr(model, "is_gradient_checkpointing", False):
            raise SharePromptUnsupported("share_prompt=True, but gradient checkpointing drops the KV cache "
                                         "sharing needs; use share_prompt='auto' or False")
        self.sampler_copy = None   # a bf16 copy to sample from (core.sampler_copy), corrected in the loss
        asked = getattr(config, "sampling_dtype", "float32")
        corrects = self.SAMPLER_CORRECTION and self.loss_fn is None   # a learner's loss_fn has no correction
        if asked == "bfloat16" and not corrects:
            raise ValueError(f"sampling_dtype={asked!r}: {type(self).__name__}'s loss has no "
                             "correction for samples another policy drew; sample in float32 (or auto)")
        self.sampling_dtype, why = resolve_sampling_dtype(asked, next(model.parameters()).device, corrects)
        if self.sampling_dtype != "float32":
            try:
                self.sampler_copy = SamplerCopy(model, SAMPLING_DTYPES[self.sampling_dtype])
            except ValueError as e:   # adapters that cannot be folded: auto samples with the policy
                if asked != "auto":
                    raise
                self.sampling_dtype, why = "float32", f"auto: {e}"
        if asked == "auto":
            print(f"sampling_dtype: auto -> {self.sampling_dtype} ({why.removeprefix('auto: ')})", flush=True)
        # "auto": checked against the plain forward on the first batch (see _logprobs)
        self._share = config.share_prompt is True or (
            config.share_prompt == "auto" and not getattr(model, "is_gradient_checkpointing", False))
        self._share_checked = False

    SAMPLER_CORRECTION = True   # its loss takes sampler_weights (VAPOR's and SDPO's do not)

    @property
    def updates_per_step(self) -> int:
        return self.config.num_iterations

    # --- one step -----------------------------------------------------------------------
    def rollout(self, rows: list[dict]):
        """Sample G completions per prompt and score them: (rollout, rewards (B,), per_func (B, F))."""
        ro = self.sample_batch(rows)
        rewards, per_func, _ = self.score(rows, ro)
        return ro, rewards, per_func

    def sample_batch(self, rows: list[dict]):
        """G completions per row's prompt, G rows per prompt in a row (``core.sampling.Rollout``)."""
        cfg = self.config
        with self.phase("sample"):
            if self.sampler_copy is not None:
                self.sampler_copy.refresh()   # the policy's weights as they are now, in the copy's dtype
            return sample(self.model if self.sampler_copy is None else self.sampler_copy.model, self.tokenizer,
                          [r["prompt"] for r in rows], max_new_tokens=cfg.max_completion_length,
                          temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p,
                          num_return_sequences=cfg.num_generations, return_logprobs=self.sampler_copy is not None)

    def completions(self, ro, rows: list[dict]) -> list:
        """The rollout's completions as the rewards get them: chat messages for chat prompts."""
        chat = not isinstance(rows[0]["prompt"], str)
        return [[{"role": "assistant", "content": t}] if chat else t for t in ro.texts]

    def score(self, rows: list[dict], ro):
        """(rewards (B,), per_func (B, F), feedbacks [B]) of the rollout; rewards may give feedback."""
        with self.phase("score"):
            return self._score(rows, ro)

    def _score(self, rows: list[dict], ro):
        G = self.config.num_generations
        columns = {k: [r[k] for r in rows for _ in range(G)] for k in rows[0] if k != "prompt"}
        # as TRL passes them: each completion's token ids up to and including its eos
        columns["completion_ids"] = [ids[:n] for ids, n in zip(ro.completion_ids.tolist(),
                                                                ro.completion_mask.sum(1).tolist())]
        prompts, completions = [r["prompt"] for r in rows for _ in range(G)], self.completions(ro, rows)
        rewards, per_func, feedbacks = compute_rewards_with_feedback(self.reward_funcs, prompts, completions, columns,
                                                                     self.reward_weights)
        self.record_completions(prompt=prompts, completion=completions, reward=rewards.tolist(),
                                **reward_columns([reward_name(f) for f in self.reward_funcs], per_func),
                                feedback=feedbacks, answer=columns.get("answer"))
        return rewards, per_func, feedbacks

    def _logprobs(self, model, args) -> torch.Tensor:
        """log pi(o_t | q, o_<t), (B, T); each prompt runs once for its G completions when sharing."""
        with self.phase("forward"):
            return self._forward_logprobs(model, args)

    def _forward_logprobs(self, model, args) -> torch.Tensor:
        cfg = self.config
        if not self._share:
            return completion_logprobs(model, *args, cfg.temperature)
        try:
            if not self._share_checked:  # once: the shared forward must give what the plain one gives
                self._share_checked = True
                self._check_shared_forward(model, args)
            return shared_prompt_logprobs(model, *args, cfg.num_generations, cfg.temperature)
        except SharePromptUnsupported as e:  # a disagreement, or a forward that drops the cache
            if cfg.share_prompt is True:
                raise
            warnings.warn(f"share_prompt: {e}; falling back to the plain forward", stacklevel=2)
            self._share = False
            return completion_logprobs(model, *args, cfg.temperature)

    def _check_shared_forward(self, model, args) -> None:
        """Raise SharePromptUnsupported if the shared-prompt forward disagrees with the plain one."""
        cfg = self.config
        with eval_mode(model), torch.no_grad():
            plain = completion_logprobs(model, *args, cfg.temperature)                 # (B, T)
            shared = shared_prompt_logprobs(model, *args, cfg.num_generations, cfg.temperature)  # (B, T)
        m = args[3].bool()
        low_precision = plain.dtype != torch.float32 or torch.is_autocast_enabled(plain.device.type)
        tol = 5e-2 if low_precision else 1e-4
        if not torch.allclose(plain[m], shared[m], atol=tol, rtol=tol):
            raise SharePromptUnsupported("the shared-prompt forward disagrees with the plain one for this model")

    def step(self) -> dict:
        cfg = self.config
        ro, rewards, per_func = self.rollout(self.next_rows())
        # rewards are scored on the CPU; the loss runs on the model's device (a GPU on Colab)
        advantages = self.advantages(rewards).to(ro.completion_mask.device)           # (B,)
        args = (ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
        mask = ro.completion_mask                                                       # (B, T)
        ref_logp = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_logp = self._logprobs(self.ref_model, args)                              # (B, T)
        self.model.train()
        old_logp = weights = None
        for _ in range(cfg.num_iterations):
            logp = self._logprobs(self.model, args)                                     # (B, T)
            if old_logp is None:
                # the first pass runs the sampling policy itself: old_logp is this forward, detached
                # (ratio 1, clip inactive), which saves the extra no-grad forward TRL makes for mu > 1
                old_logp = logp.detach()                                                # (B, T)
                if ro.sampler_logprobs is not None:   # a bf16 copy drew the tokens: pi_old / pi_bf16
                    weights = sampler_weights(old_logp, ro.sampler_logprobs, mask, cfg.sampling_correction,
                                              None, cfg.sampling_correction_max)       # (B, T) or (B, 1)
            loss, stats = grpo_loss(
                logp, old_logp, advantages, mask,
                ref_logp=ref_logp, beta=cfg.beta, epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high,
                loss_type=cfg.loss_type, max_completion_length=cfg.max_completion_length, sampler_weights=weights,
            )
            if self.loss_fn is not None:   # yours trains; the library's (the same inputs) gives the stats
                loss = self.loss_fn(logp, old_logp, advantages, mask, cfg.epsilon)      # scalar
                stats["policy_loss"] = loss.detach()
            self.optimizer_step(loss)
        return {
            **self.sampler_stats(weights, mask),
            **self.batch_metrics(rewards, per_func, mask),
            "loss": loss.item(),
            "loss/policy": stats["policy_loss"].item(),
            "loss/kl": stats["kl"].item(),
            "stats/clip_frac": stats["clip_frac"].item(),
            "stats/clip_frac_low": stats["clip_frac_low"].item(),
            "stats/clip_frac_high": stats["clip_frac_high"].item(),
            "stats/ratio_mean": stats["ratio_mean"].item(),
        }

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """A (B,) from the rewards (B,): the learner's ``advantage_fn`` if given, else ``group_advantages``."""
        if self.advantage_fn is not None:
            return self.advantage_fn(rewards.clone(), self.config.num_generations)    # (B,)
        return group_advantages(rewards, self.config.num_generations, self.config.scale_rewards)  # (B,)

    @staticmethod
    def sampler_stats(weights: torch.Tensor | None, mask: torch.Tensor) -> dict:
        """The correction's weights over the completion tokens (none when the policy sampled itself)."""
        if weights is None:
            return {}
        w = weights.expand_as(mask)[mask.bool()]                                        # (N,)
        return {"stats/sampler_weight_mean": w.mean().item(), "stats/sampler_weight_min": w.min().item(),
                "stats/sampler_weight_max": w.max().item(), "stats/sampler_dropped_frac": (w == 0).float().mean().item()}

    def batch_metrics(self, rewards: torch.Tensor, per_func: torch.Tensor, mask: torch.Tensor) -> dict:
        """The rows' keys about the sampled batch, whatever the loss: rewards, groups, lengths, lr."""
        std_per_group = rewards.view(-1, self.config.num_generations).std(1)           # (B/G,)
        return {
            "reward/mean": rewards.mean().item(),
            "reward/std": rewards.std().item(),
            **{f"reward/{reward_name(f)}": per_func[:, i].mean().item() for i, f in enumerate(self.reward_funcs)},
            "stats/frac_zero_std": (std_per_group < 1e-6).float().mean().item(),
            "stats/learning_rate": self.learning_rate,
            "stats/share_prompt": float(self._share),
            "completion/mean_length": mask.sum(1).float().mean().item(),
        }

    # --- resume -------------------------------------------------------------------------
    def extra_state(self) -> dict:
        return {"share": self._share, "share_checked": self._share_checked}

    def load_extra_state(self, state: dict) -> None:
        self._share = bool(state.get("share", self._share))
        self._share_checked = bool(state.get("share_checked", self._share_checked))
