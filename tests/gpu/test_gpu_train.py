"""GPU checks, training: the scratch scaffold's mixed precision (the dtype the capability gives, fp16
with its gradient scaler, a loss that goes down), a few scratch GRPO and SDPO steps, and TRL's
GRPOTrainer and our SDPOTRLTrainer for a few steps on CUDA (the T4 preset: fp16, gradient checkpointing).

Skipped without CUDA (and the TRL checks without trl).
"""

from __future__ import annotations

import math

import pytest
import torch
from gpu_checks import GPU, skip_unless

from sdpo_kit.core.precision import device_precision
from sdpo_kit.core.scratch import RunConfig, ScratchTrainer
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.models import load_policy, resolve_dtype
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loop import SDPOScratchTrainer
from sdpo_kit.tasks import ArithmeticTask

pytestmark = GPU
TASK = ArithmeticTask(n_eval=40)
ROWS, HELDOUT = TASK.splits()
SMALL = dict(max_steps=3, prompts_per_step=4, num_generations=4, max_completion_length=4, learning_rate=1e-3,
             eval_every=0, seed=0)


def char_reward(prompts, completions, **kwargs):
    """In [0, 1) and varied, so SDPO finds successful siblings (as tests/test_sdpo_trainer.py)."""
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


def lab_on_cuda(dtype=torch.float16):
    model, tok = load_policy("tiny-lab")
    return model.to("cuda", dtype), tok


def test_the_capability_picks_the_dtype(record_property):
    """auto: bf16 from compute capability 8.0, else fp16 with a scaler; load_policy's default agrees."""
    cc = torch.cuda.get_device_capability()
    p = device_precision("cuda")
    record_property("precision", p.reason)
    assert p.mode == ("bf16" if cc >= (8, 0) else "fp16") and p.scaler == (cc < (8, 0))
    assert resolve_dtype(None) == p.dtype


class FixedBatchNLL(ScratchTrainer):
    """Next-token loss on one fixed batch: a loss that must go down if the updates are right."""

    def __init__(self, model, tok, config):
        super().__init__(model, tok, ROWS, config)
        text = [r["prompt"][0]["content"] + r["answer"] for r in ROWS[:32]]
        self.batch = tok(text, return_tensors="pt", padding=True).to("cuda")

    def step(self) -> dict:
        labels = self.batch["input_ids"].masked_fill(self.batch["attention_mask"] == 0, -100)
        loss = self.model(**self.batch, labels=labels).loss
        self.optimizer_step(loss)
        return {"loss": loss.item()}


@pytest.mark.parametrize("mode", ["fp16", "auto"])
def test_mixed_precision_loss_goes_down(mode, record_property):
    """A fresh tiny Llama in fp16 on the GPU, 30 steps on one batch: the trainable weights are fp32,
    fp16 has its scaler, every loss is finite and the last is below half the first."""
    tok = build_tokenizer()
    model = build_model(tok, seed=0).to("cuda", torch.float16)
    trainer = FixedBatchNLL(model, tok, RunConfig(max_steps=30, prompts_per_step=4, learning_rate=3e-3,
                                                  eval_every=0, mixed_precision=mode))
    losses = [r["loss"] for r in trainer.train()]
    record_property("losses", [round(x, 4) for x in losses[::5]])
    assert {p.dtype for p in model.parameters() if p.requires_grad} == {torch.float32}
    assert (trainer.amp.scaler is not None) == (trainer.precision.mode == "fp16")
    assert all(math.isfinite(x) for x in losses) and losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("mode", ["fp16", "auto"])
def test_scratch_grpo_steps(mode):
    """Three scratch GRPO steps on the warm-started tiny lab (fp16 weights in): finite losses, the weights move."""
    model, tok = lab_on_cuda()
    loop = GRPOScratchTrainer(model, tok, [exact_match_reward()], ROWS, GRPOScratchConfig(**SMALL, mixed_precision=mode))
    before = [p.detach().clone() for p in model.parameters()]
    rows = [r for r in loop.train() if "loss" in r]
    assert len(rows) == 3 and all(math.isfinite(r["loss"]) for r in rows)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_scratch_sdpo_steps():
    """Three scratch SDPO steps in fp16: finite losses, a teacher for some rows, the weights move."""
    model, tok = lab_on_cuda()
    loop = SDPOScratchTrainer(model, tok, [char_reward], ROWS, SDPOScratchConfig(**SMALL, success_reward_threshold=0.5,
                                                                    mixed_precision="fp16"))
    rows = [r for r in loop.train() if "loss" in r]
    assert len(rows) == 3 and all(math.isfinite(r["loss"]) for r in rows)
    assert any(r["sdpo/teacher_coverage"] > 0 for r in rows) and any(r["sdpo/update_norm"] > 0 for r in rows)


@skip_unless("trl")
def test_trl_grpo_trainer_on_cuda(tmp_path):
    """TRL's GRPOTrainer, the T4 preset (16-bit autocast: fp16 on a T4, bf16 from compute capability 8.0, as
    load_policy loads the model there; gradient checkpointing), two steps: finite loss."""
    from sdpo_kit.grpo.trl import build_trl_grpo_trainer

    model, tok = lab_on_cuda(torch.float32)
    trainer = build_trl_grpo_trainer(model, tok, exact_match_reward(), ROWS, preset="t4", output_dir=tmp_path,
                                     verbose=False, **{**SMALL, "max_steps": 2})
    bf16 = torch.cuda.get_device_capability() >= (8, 0)
    assert (trainer.args.bf16, trainer.args.fp16) == (bf16, not bf16) and not trainer.args.use_cpu
    trainer.train()
    rows = [r for r in trainer.history if "loss" in r]
    assert len(rows) == 2 and all(math.isfinite(r["loss"]) for r in rows)


@skip_unless("trl")
def test_trl_sdpo_trainer_on_cuda(tmp_path):
    """Our SDPOTrainer (TRL's SDPO on our rewards), the T4 preset, two steps: finite loss."""
    from sdpo_kit.sdpo.trl import build_trl_sdpo_trainer

    model, tok = lab_on_cuda(torch.float32)
    trainer = build_trl_sdpo_trainer(model, tok, [char_reward], ROWS, preset="t4", output_dir=tmp_path,
                                     verbose=False, success_reward_threshold=0.5, **{**SMALL, "max_steps": 2})
    trainer.train()
    rows = [r for r in trainer.history if "loss" in r]
    assert len(rows) == 2 and all(math.isfinite(r["loss"]) for r in rows)
