"""Teacher-student PPO from scratch: classic RLHF PPO (trl 0.11.4's step) plus distillation.

    for step in 1..max_steps:
        q  <- batch_size prompts;  o <- one response each from the student
        s  <- scores (reward functions or a reward model), processed (scaling, norm, clip)
        under no_grad: log pi_old, V_old (student + value head), log pi_ref (frozen start),
                       teacher logits on the same response tokens (after the teacher's own prompt,
                       when ``teacher_prompt`` gives it one)
        r_t <- -beta kl_t (+ s at the last token);  A, R <- GAE(r, V_old)
        for epoch in 1..ppo_epochs:                       (early stop: policy KL > 1.5 target_kl)
            for each shuffled mini-batch:
                minimise  ppo_coef * (pg + vf_coef vf)  +  kd_coef * T^2 KL(teacher_T || student_T)
        beta <- adaptive KL update with the batch's KL

The pure pieces are ``ppo.loss`` (each equal to trl 0.11.4); the knobs ``PPOScratchConfig``.
``teacher_prompt`` lets the teacher read another prompt before the student's response, e.g. the question
after a worked demonstration: the teacher is then the same model made stronger by its context, and
distillation moves that context into the student's weights (context distillation, Snell et al. 2022,
arXiv:2209.15189). It is a constructor argument, not a config key.
The ``_setup_*`` methods (optimizer, scheduler, early stopping, score processing) are hooks, one per
piece: override one in a subclass to change that piece alone.

Metric keys: reward/mean, reward/std, reward/score_raw, loss, loss/policy, loss/value, loss/kd,
stats/kl_coef, stats/kl, stats/policy_kl, stats/approx_kl, stats/clip_frac, stats/vf_clip_frac,
stats/explained_variance, stats/entropy, stats/early_stopped, stats/ppo_epochs_run,
completion/mean_length, stats/learning_rate, time/step_s, eval/accuracy (``metrics.METRICS``;
the classic 0.11.4 names map to these in ``metrics.PPO_CLASSIC_NAMES``).

Left out on purpose: the ratio-threshold batch skip of 0.11.4 (a guard, not the objective) and
distributed training.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

import torch

from sdpo_kit.core.completions import reward_columns
from sdpo_kit.core.logprobs import tempered, token_logprobs
from sdpo_kit.core.pieces import prepare
from sdpo_kit.core.precision import upcast_trainable
from sdpo_kit.core.sampling import completion_logits, encode_prompts, sample
from sdpo_kit.core.scratch import ScratchTrainer
from sdpo_kit.ppo.config import PPOScratchConfig
from sdpo_kit.ppo.loss import (
    AdaptiveKLController,
    FixedKLController,
    RunningMoments,
    distillation_loss,
    early_stop,
    gae,
    per_token_rewards,
    ppo_loss,
    scale_scores,
)
from sdpo_kit.ppo.pieces import PIECES
from sdpo_kit.ppo.value_head import HEAD_FILE, PolicyWithValueHead
from sdpo_kit.rewards import compute_rewards, reward_name


class PPOScratchTrainer(ScratchTrainer):
    """PPO with a value head on the student, a frozen reference, and an optional teacher.

    Args:
        model, tokenizer: the student (a causal LM; PEFT trains its adapter) and its tokenizer.
        reward_funcs: TRL-signature reward functions (e.g. ``reward_model.sequence_classifier_reward``).
        train_rows: dicts with ``prompt`` and the rewards' columns.
        config: ``PPOScratchConfig``.
        teacher: a causal LM with the student's tokenizer (None: no distillation). Its logits on
            the student's tokens are a plain forward (after ``teacher_prompt``'s prompt), under no_grad.
        teacher_prompt: a row's prompt -> the prompt the teacher reads before the response (None: the
            student's own prompt), e.g. ``lambda p: demonstration + p`` for chat messages.
        eval_fn, callbacks, reward_weights: as the other scratch trainers.
        gae_fn: your GAE recursion in place of the library's (``ppo/pieces.py``), checked at every call.
    """

    def __init__(self, model, tokenizer, reward_funcs: Sequence[Callable], train_rows: list[dict],
                 config: PPOScratchConfig | None = None, *, teacher=None,
                 teacher_prompt: Callable | None = None, eval_fn: Callable | None = None,
                 callbacks: Sequence[Callable] = (), reward_weights: Sequence[float] | None = None,
                 gae_fn: Callable | None = None):
        config = config or PPOScratchConfig(teacher_model=None, kd_coef=0.0)
        if config.kd_coef > 0 and teacher is None:
            raise ValueError("kd_coef > 0 needs a teacher model (pass teacher=...)")
        (self.gae_fn,) = prepare(PIECES, config, gae_fn=gae_fn)
        self.pv = PolicyWithValueHead(model, dropout=config.value_head_dropout)
        super().__init__(model, tokenizer, train_rows, config, eval_fn=eval_fn, callbacks=callbacks)
        self.reward_funcs, self.reward_weights = list(reward_funcs), reward_weights
        self.teacher = teacher.eval().requires_grad_(False) if teacher is not None else None
        self.teacher_prompt = teacher_prompt
        self.ref_model = None if hasattr(model, "disable_adapter") else copy.deepcopy(model).eval().requires_grad_(False)
        upcast_trainable(self.pv)  # the value head too (the scaffold upcast the policy): fp32 weights that train
        self.optimizer = self._setup_optimizer()
        self.scheduler = self._setup_scheduler()
        self.kl_ctl = self._setup_kl_controller()
        self.running = RunningMoments()
        self._setup_early_stopping()
        self._setup_score_processing()

    # --- hooks: override one to change that piece alone ---------------------------------------
    @property
    def updates_per_step(self) -> int:
        return self.config.ppo_epochs * self.config.updates_per_epoch

    @property
    def schedule_depends_on_max_steps(self) -> bool:
        return self.config.scheduler_name != "constant"  # linear and cosine are laid out over max_steps

    def _setup_optimizer(self) -> torch.optim.Optimizer:
        cfg = self.config
        params = [p for p in self.pv.parameters() if p.requires_grad]
        kwargs = {"weight_decay": 0.0} if cfg.optimizer_name == "adamw" else {}
        cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[cfg.optimizer_name]
        return cls(params, lr=cfg.learning_rate, **{**kwargs, **cfg.optimizer_kwargs})

    def _setup_scheduler(self):
        cfg = self.config
        total = max(1, cfg.max_steps * self.updates_per_step)
        warmup = int(cfg.scheduler_kwargs.get("warmup_steps", 0))
        cycles = float(cfg.scheduler_kwargs.get("num_cycles", 0.5))

        def factor(t: int) -> float:
            if t < warmup:
                return (t + 1) / warmup
            progress = min(1.0, (t - warmup) / max(1, total - warmup))
            if cfg.scheduler_name == "linear":
                return 1.0 - progress
            if cfg.scheduler_name == "cosine":
                return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 2.0 * cycles * progress)))
            return 1.0

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    def _setup_kl_controller(self):
        cfg = self.config
        if cfg.adap_kl_ctrl:
            return AdaptiveKLController(cfg.init_kl_coef, cfg.target, cfg.horizon)
        return FixedKLController(cfg.init_kl_coef)

    def _setup_early_stopping(self) -> None:
        """``self.should_stop(policy_kl)``: 0.11.4's rule, on when ``early_stopping``."""
        cfg = self.config
        self.should_stop = lambda policy_kl: early_stop(policy_kl, cfg.target_kl, cfg.early_stopping)

    def _setup_score_processing(self) -> None:
        """``self.process_scores(scores)``: running scaling / normalising, then clipping."""
        cfg = self.config
        self.process_scores = lambda scores: scale_scores(
            scores, self.running, use_score_scaling=cfg.use_score_scaling, use_score_norm=cfg.use_score_norm,
            score_clip=cfg.score_clip)

    # --- one step -----------------------------------------------------------------------
    def ref_logprobs(self, ro) -> torch.Tensor:
        """log pi_ref on the responses, (B, T): the frozen start (a PEFT student without its adapter)."""
        cfg, args = self.config, (ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
        if self.ref_model is not None:
            return token_logprobs(completion_logits(self.ref_model, *args), ro.completion_ids, cfg.temperature)
        with self.model.disable_adapter():
            return token_logprobs(completion_logits(self.model, *args), ro.completion_ids, cfg.temperature)

    def teacher_prompt_ids(self, rows, ro) -> tuple[torch.Tensor, torch.Tensor]:
        """The prompt ids and mask the teacher reads before the responses: the student's, or
        ``teacher_prompt`` of each row's prompt, left-padded, (B, P')."""
        if self.teacher_prompt is None:
            return ro.prompt_ids, ro.prompt_mask
        enc = encode_prompts(self.tokenizer, [self.teacher_prompt(r["prompt"]) for r in rows], ro.prompt_ids.device)
        return enc["input_ids"], enc["attention_mask"]

    def rollout(self, rows):
        """Sample, score and evaluate one batch: everything the PPO epochs need, under no_grad."""
        cfg = self.config
        ro = sample(self.model, self.tokenizer, [r["prompt"] for r in rows], max_new_tokens=cfg.max_completion_length,
                    temperature=cfg.temperature)
        chat = not isinstance(rows[0]["prompt"], str)
        completions = [[{"role": "assistant", "content": t}] if chat else t for t in ro.texts]
        columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
        raw, per_func = compute_rewards(self.reward_funcs, [r["prompt"] for r in rows], completions, columns,
                                 self.reward_weights)                                 # (B,)
        self.record_completions(prompt=[r["prompt"] for r in rows], completion=completions, reward=raw.tolist(),
                                **reward_columns([reward_name(f) for f in self.reward_funcs], per_func),
                                answer=columns.get("answer"))
        scores = self.process_scores(raw)                                              # (B,)
        mask = ro.completion_mask.float()                                              # (B, T)
        with torch.no_grad():
            self.pv.eval()
            logits, values = self.pv.completion_forward(ro.prompt_ids, ro.prompt_mask, ro.completion_ids,
                                                        ro.completion_mask)             # (B, T, V), (B, T)
            old_logp = token_logprobs(tempered(logits, cfg.temperature), ro.completion_ids)  # (B, T)
            ref_logp = self.ref_logprobs(ro)                                           # (B, T)
            teacher_logits = None
            if self.teacher is not None and cfg.kd_coef > 0:
                teacher_logits = completion_logits(self.teacher, *self.teacher_prompt_ids(rows, ro), ro.completion_ids,
                                                   ro.completion_mask)                 # (B, T, V)
            rewards, _, kl = per_token_rewards(scores, old_logp, ref_logp, mask, self.kl_ctl.value, cfg.kl_penalty)
            advantages, returns = gae(rewards, values, mask, gamma=cfg.gamma, lam=cfg.lam,
                                      whiten_rewards=cfg.whiten_rewards, advantages_fn=self.gae_fn)  # (B, T) each
        return dict(ro=ro, raw=raw, scores=scores, mask=mask, old_logp=old_logp, old_values=values * mask,
                    advantages=advantages, returns=returns, teacher_logits=teacher_logits, kl=kl)

    def minibatch_loss(self, b: dict, idx: torch.Tensor):
        """The loss on the rows ``idx`` of rollout ``b``: (loss, ppo stats, kd loss)."""
        cfg, ro = self.config, b["ro"]
        logits, values = self.pv.completion_forward(ro.prompt_ids[idx], ro.prompt_mask[idx], ro.completion_ids[idx],
                                                    ro.completion_mask[idx])            # (b, T, V), (b, T)
        mask = b["mask"][idx]
        logp = token_logprobs(tempered(logits, cfg.temperature), ro.completion_ids[idx])  # (b, T)
        rl, stats = ppo_loss(logp, b["old_logp"][idx], values, b["old_values"][idx], b["advantages"][idx],
                             b["returns"][idx], mask, cliprange=cfg.cliprange, cliprange_value=cfg.cliprange_value,
                             vf_coef=cfg.vf_coef, logits=logits)
        kd = torch.zeros((), device=logits.device)
        if b["teacher_logits"] is not None:
            kd, _ = distillation_loss(logits, b["teacher_logits"][idx], mask, temperature=cfg.kd_temperature)
        return cfg.ppo_coef * rl + cfg.kd_coef * kd, stats, kd

    def step(self) -> dict:
        cfg = self.config
        b = self.rollout(self.next_rows())
        self.pv.train()
        g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ()).item()))
        per_update, logged, epochs_run, stopped = cfg.mini_batch_size * cfg.gradient_accumulation_steps, [], 0, False
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(cfg.batch_size, generator=g)
            for start in range(0, cfg.batch_size, per_update):
                for k in range(cfg.gradient_accumulation_steps):
                    lo = start + k * cfg.mini_batch_size
                    loss, stats, kd = self.minibatch_loss(b, order[lo:lo + cfg.mini_batch_size])
                    self.amp.backward(loss / cfg.gradient_accumulation_steps)   # scaled in fp16 (core.precision)
                    logged.append({**{k2: v.item() for k2, v in stats.items()}, "loss": loss.item(), "kd": kd.item()})
                if not self.amp.step(self.optimizer, self.pv.parameters(), cfg.max_grad_norm):
                    self.skipped_updates += 1                    # fp16: an inf / NaN gradient, step skipped
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
            epochs_run += 1
            if self.should_stop(logged[-1]["policy_kl"]):   # 0.11.4: the epoch's last mini-batch
                stopped = True
                break
        batch_kl = (b["kl"] * b["mask"]).sum(1).mean().item()
        kl_coef = self.kl_ctl.value
        self.kl_ctl.update(batch_kl, cfg.batch_size)
        mean = lambda key: sum(x[key] for x in logged) / len(logged)  # noqa: E731
        return {
            "reward/mean": b["scores"].mean().item(), "reward/std": b["scores"].std().item() if cfg.batch_size > 1 else 0.0,
            "reward/score_raw": b["raw"].mean().item(),
            "loss": mean("loss"), "loss/policy": mean("pg_loss"), "loss/value": mean("vf_loss"), "loss/kd": mean("kd"),
            "stats/kl_coef": kl_coef, "stats/kl": batch_kl, "stats/policy_kl": mean("policy_kl"),
            "stats/approx_kl": mean("approx_kl"), "stats/clip_frac": mean("clip_frac"),
            "stats/vf_clip_frac": mean("vf_clip_frac"), "stats/explained_variance": mean("explained_variance"),
            "stats/entropy": mean("entropy"), "stats/early_stopped": float(stopped), "stats/ppo_epochs_run": epochs_run,
            "completion/mean_length": b["mask"].sum(1).mean().item(), "stats/learning_rate": self.learning_rate,
        }

    # --- what a resumed run needs besides the student ---------------------------------------
    def extra_state(self) -> dict:
        return {"kl_coef": self.kl_ctl.state_dict(), "running": self.running.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        if "kl_coef" in state:
            self.kl_ctl.load_state_dict(state["kl_coef"])
            self.running.load_state_dict(state["running"])

    def save_extra_files(self, folder) -> None:
        from safetensors.torch import save_file

        save_file({k: v.detach().cpu().contiguous() for k, v in self.pv.v_head.state_dict().items()},
                  folder / HEAD_FILE)

    def load_extra_files(self, folder) -> None:
        self.pv.load_head(folder)


def build_ppo_from_config(model, tokenizer, reward_funcs, train_rows, config: PPOScratchConfig, *,
                          eval_fn=None, callbacks=(), reward_weights=None, gae_fn=None) -> PPOScratchTrainer:
    """The registry's build: loads ``config.teacher_model`` (the tiny lab with ``teacher_lab``, or a
    hub id / directory with the student's tokenizer) when distillation is on."""
    from sdpo_kit.models import TINY_LAB, load_policy

    teacher = None
    if config.teacher_model is not None and config.kd_coef > 0:
        lab = config.teacher_lab if config.teacher_model == TINY_LAB else None
        teacher, _ = load_policy(config.teacher_model, lora=False, lab_config=lab)
    return PPOScratchTrainer(model, tokenizer, reward_funcs, train_rows, config, teacher=teacher,
                                    eval_fn=eval_fn, callbacks=callbacks, reward_weights=reward_weights, gae_fn=gae_fn)
