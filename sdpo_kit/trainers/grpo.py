"""GRPO from scratch: one readable loop (DeepSeekMath, arXiv:2402.03300).

    for step in 1..max_steps:
        q   <- prompts_per_step prompts from the train rows
        o   <- G completions per prompt, sampled from pi_old = the current policy
        r   <- sum of reward functions;  A <- group_advantages(r, G)
        for mu = 1..num_iterations:  minimise grpo_loss(logp, old_logp, A, mask, ref_logp, beta)

A step is one sampled batch and its ``num_iterations`` optimizer passes (the TRL builder
multiplies ``max_steps`` by mu, since TRL counts passes), so one config means the same data
and the same number of updates on both backends.

Metric keys it logs (one dict per step, the same keys as ``trl_grpo`` writes):
    step, reward/mean, reward/std, reward/<func name>, loss, loss/policy, loss/kl,
    stats/clip_frac, stats/clip_frac_low, stats/clip_frac_high, stats/ratio_mean,
    completion/mean_length, stats/frac_zero_std, time/step_s, and eval/accuracy at step 0,
    every ``eval_every`` steps and at the end.

Left out on purpose: distributed training, gradient accumulation, vLLM, LoRA (pass a PEFT
model in if you want it); TRL's GRPOTrainer does those, see ``trl_grpo.py``.
"""

from __future__ import annotations

import copy
import json
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..generation import completion_logprobs, sample, shared_prompt_logprobs
from ..losses import group_advantages, grpo_loss
from ..rewards import check_columns, compute_rewards, reward_name


@dataclass
class GRPOConfig:
    """Knobs of the scratch loop (names follow TRL's GRPOConfig where they exist)."""

    max_steps: int = 100
    prompts_per_step: int = 16
    num_generations: int = 8          # G
    num_iterations: int = 1           # mu: optimisation passes over each batch
    learning_rate: float = 1e-3
    lr_scheduler_type: str = "constant"  # or "linear": decays to 0 over max_steps x mu updates (TRL's default)
    max_grad_norm: float = 1.0
    temperature: float = 1.0
    max_completion_length: int = 8
    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.0                 # k3 KL weight; > 0 keeps a frozen reference copy
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    eval_every: int = 25              # 0: only at step 0 and at the end
    share_prompt: bool = True         # run each prompt once for its G completions (same numbers, faster)
    seed: int = 0
    output_dir: str | None = None     # writes metrics.jsonl there when set

    def __post_init__(self):
        if self.num_generations < 2:
            raise ValueError("num_generations must be >= 2: a group of one has no baseline")
        if self.max_steps < 1 or self.prompts_per_step < 1:
            raise ValueError("max_steps and prompts_per_step must be >= 1")
        if self.lr_scheduler_type not in ("constant", "linear"):
            raise ValueError(f"lr_scheduler_type must be 'constant' or 'linear', got {self.lr_scheduler_type!r}")


class GRPOLoop:
    """The scratch GRPO trainer.

    Args:
        model, tokenizer: a causal LM and its tokenizer (chat template for chat prompts).
        reward_funcs: TRL-signature reward functions; their sum (``reward_weights``) is the reward.
        train_rows: dicts with ``prompt`` and the columns the rewards need.
        eval_fn: ``eval_fn(model) -> float`` (e.g. a task's held-out greedy accuracy), optional.
        callbacks: callables ``cb(metrics: dict)`` run after each logged step (``LivePlot``...).
    """

    def __init__(self, model, tokenizer, reward_funcs: Sequence[Callable], train_rows: list[dict],
                 config: GRPOConfig | None = None, *, eval_fn: Callable | None = None,
                 callbacks: Sequence[Callable] = (), reward_weights: Sequence[float] | None = None):
        if not train_rows:
            raise ValueError("train_rows is empty")
        check_columns(train_rows[0].keys(), reward_funcs)
        self.model, self.tokenizer = model, tokenizer
        self.reward_funcs, self.reward_weights = list(reward_funcs), reward_weights
        self.rows, self.config = list(train_rows), config or GRPOConfig()
        self.eval_fn, self.callbacks = eval_fn, list(callbacks)
        self.ref_model = None
        if self.config.beta != 0.0:  # frozen copy of the starting policy
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=self.config.learning_rate, weight_decay=0.0
        )
        updates = self.config.max_steps * self.config.num_iterations  # optimizer steps in the whole run
        linear = self.config.lr_scheduler_type == "linear"
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda t: max(0.0, 1.0 - t / updates) if linear else 1.0)
        self.history: list[dict] = []
        # prompt sharing is checked against the plain forward on the first batch (see _logprobs)
        self._share = self.config.share_prompt and not getattr(model, "is_gradient_checkpointing", False)
        self._share_checked = False
        self._rng = random.Random(self.config.seed)
        self._order: list[int] = []

    # --- data ---------------------------------------------------------------------------
    def _next_rows(self) -> list[dict]:
        out = []
        while len(out) < self.config.prompts_per_step:
            if not self._order:
                self._order = list(range(len(self.rows)))
                self._rng.shuffle(self._order)
            out.append(self.rows[self._order.pop()])
        return out

    # --- one step -----------------------------------------------------------------------
    def rollout(self, rows: list[dict]):
        """Sample G completions per prompt and score them: (rollout, rewards (B,), per_func (B, F))."""
        cfg, G = self.config, self.config.num_generations
        prompts = [r["prompt"] for r in rows]
        ro = sample(self.model, self.tokenizer, prompts, max_new_tokens=cfg.max_completion_length,
                    temperature=cfg.temperature, num_return_sequences=G)
        chat = not isinstance(prompts[0], str)
        completions = [[{"role": "assistant", "content": t}] if chat else t for t in ro.texts]
        columns = {k: [r[k] for r in rows for _ in range(G)] for k in rows[0] if k != "prompt"}
        rewards, per_func = compute_rewards(self.reward_funcs, [p for p in prompts for _ in range(G)],
                                            completions, columns, self.reward_weights)
        return ro, rewards, per_func

    def _logprobs(self, model, args) -> torch.Tensor:
        """log pi(o_t | q, o_<t), (B, T); each prompt runs once for its G completions when sharing."""
        cfg = self.config
        if not self._share:
            return completion_logprobs(model, *args, cfg.temperature)
        try:
            if not self._share_checked:  # once: the shared forward must give what the plain one gives
                self._share_checked = True
                self._check_shared_forward(model, args)
            return shared_prompt_logprobs(model, *args, cfg.num_generations, cfg.temperature)
        except ValueError as e:  # a disagreement, or a forward that drops the cache
            warnings.warn(f"share_prompt: {e}; falling back to the plain forward", stacklevel=2)
            self._share = False
            return completion_logprobs(model, *args, cfg.temperature)

    def _check_shared_forward(self, model, args) -> None:
        """Raise ValueError if the shared-prompt forward disagrees with the plain one (eval mode)."""
        cfg, was_training = self.config, model.training
        model.eval()
        try:
            with torch.no_grad():
                plain = completion_logprobs(model, *args, cfg.temperature)                 # (B, T)
                shared = shared_prompt_logprobs(model, *args, cfg.num_generations, cfg.temperature)
        finally:
            model.train(was_training)
        m = args[3].bool()
        tol = 1e-4 if plain.dtype == torch.float32 else 5e-2
        if not torch.allclose(plain[m], shared[m], atol=tol, rtol=tol):
            raise ValueError("the shared-prompt forward disagrees with the plain one for this model")

    def step(self) -> dict:
        cfg = self.config
        t0 = time.perf_counter()
        ro, rewards, per_func = self.rollout(self._next_rows())
        # rewards are scored on the CPU; the loss runs on the model's device (a GPU on Colab)
        advantages = group_advantages(rewards, cfg.num_generations, cfg.scale_rewards).to(ro.completion_mask.device)  # (B,)
        args = (ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
        mask = ro.completion_mask                                                       # (B, T)
        ref_logp = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_logp = self._logprobs(self.ref_model, args)                              # (B, T)
        self.model.train()
        old_logp = None
        for _ in range(cfg.num_iterations):
            logp = self._logprobs(self.model, args)                                     # (B, T)
            if old_logp is None:
                # the first pass runs the sampling policy itself: old_logp is this forward, detached
                # (ratio 1, clip inactive), which saves the extra no-grad forward TRL makes for mu > 1
                old_logp = logp.detach()                                                # (B, T)
            loss, stats = grpo_loss(
                logp, old_logp, advantages, mask,
                ref_logp=ref_logp, beta=cfg.beta, epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high,
                loss_type=cfg.loss_type, max_completion_length=cfg.max_completion_length,
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
        std_per_group = rewards.view(-1, cfg.num_generations).std(1)                   # (B/G,)
        metrics = {
            "reward/mean": rewards.mean().item(),
            "reward/std": rewards.std().item(),
            **{f"reward/{reward_name(f)}": per_func[:, i].mean().item() for i, f in enumerate(self.reward_funcs)},
            "loss": loss.item(),
            "loss/policy": stats["policy_loss"].item(),
            "loss/kl": stats["kl"].item(),
            "stats/clip_frac": stats["clip_frac"].item(),
            "stats/clip_frac_low": stats["clip_frac_low"].item(),
            "stats/clip_frac_high": stats["clip_frac_high"].item(),
            "stats/ratio_mean": stats["ratio_mean"].item(),
            "stats/frac_zero_std": (std_per_group < 1e-6).float().mean().item(),
            "completion/mean_length": mask.sum(1).float().mean().item(),
            "stats/learning_rate": self.optimizer.param_groups[0]["lr"],
            "time/step_s": time.perf_counter() - t0,
        }
        return metrics

    # --- the loop -----------------------------------------------------------------------
    def evaluate(self) -> float | None:
        if self.eval_fn is None:
            return None
        self.model.eval()
        acc = float(self.eval_fn(self.model))
        self.model.train()
        return acc

    def log(self, metrics: dict) -> None:
        self.history.append(metrics)
        if self.config.output_dir:
            path = Path(self.config.output_dir)
            path.mkdir(parents=True, exist_ok=True)
            with open(path / "metrics.jsonl", "a") as f:
                f.write(json.dumps(metrics) + "\n")
        for cb in self.callbacks:
            cb(metrics)

    def train(self) -> list[dict]:
        """Run ``max_steps`` steps; returns the logged history (also in ``self.history``)."""
        cfg = self.config
        torch.manual_seed(cfg.seed)
        if cfg.output_dir:
            Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
            (Path(cfg.output_dir) / "metrics.jsonl").write_text("")
            (Path(cfg.output_dir) / "grpo_config.json").write_text(json.dumps(asdict(cfg), indent=2))
        acc = self.evaluate()
        if acc is not None:
            self.log({"step": 0, "eval/accuracy": acc})
        for step in range(1, cfg.max_steps + 1):
            metrics = {"step": step, **self.step()}
            last = step == cfg.max_steps
            if self.eval_fn is not None and (last or (cfg.eval_every and step % cfg.eval_every == 0)):
                metrics["eval/accuracy"] = self.evaluate()
            self.log(metrics)
        return self.history
