"""Mixed precision in the scratch scaffold (``core.precision``): the dtype chosen from stated device
properties, bf16 autocast on a CPU, the fp16 gradient scaler's skip on an inf gradient, trainable
weights in fp32, and a CPU run whose numbers are exactly those of the plain fp32 loop it replaced."""

from __future__ import annotations

import contextlib

import pytest
import torch

from sdpo_kit import models
from sdpo_kit.core import precision as prec
from sdpo_kit.core.precision import MixedPrecision, choose_precision, upcast_trainable
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.ppo.config import PPOScratchConfig
from sdpo_kit.ppo.trainer import PPOScratchTrainer
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loop import SDPOScratchTrainer
from sdpo_kit.tasks import ArithmeticTask


@pytest.mark.parametrize("device, capability, requested, mode, scaler", [
    ("cpu", None, "auto", "no", False),          # every CPU run: fp32, no autocast
    ("cuda", (7, 5), "auto", "fp16", True),      # T4: no bf16 tensor cores -> fp16 + scaler
    ("cuda", (8, 0), "auto", "bf16", False),     # A100: bf16 needs no scaling
    ("cuda", (9, 0), "auto", "bf16", False),     # H100
    ("cuda", (8, 6), "fp16", "fp16", True),      # asked for
    ("cuda", (7, 5), "no", "no", False),
    ("cpu", None, "bf16", "bf16", False),        # asked for on a CPU (what the tests below use)
])
def test_the_dtype_follows_the_stated_device(device, capability, requested, mode, scaler):
    p = choose_precision(device, capability, requested)
    assert (p.mode, p.scaler, p.autocast) == (mode, scaler, mode != "no")
    assert p.dtype == {"no": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[mode]


def test_a_t4_is_never_given_bf16():
    """7.5 < 8.0: auto says why it picks fp16, and an explicit bf16 is refused naming the emulation."""
    assert "7.5 < 8.0" in choose_precision("cuda", (7, 5)).reason
    with pytest.raises(ValueError, match="7.5.*is_bf16_supported"):
        choose_precision("cuda", (7, 5), "bf16")
    with pytest.raises(ValueError, match="mixed_precision must be one of"):
        choose_precision("cuda", (8, 0), "fp8")


def test_load_policy_dtype_reads_the_capability_not_is_bf16_supported(monkeypatch):
    """On CUDA the default dtype is fp16 below 8.0 even when is_bf16_supported() says True, bf16 from 8.0."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (7, 5))
    assert models.resolve_dtype(None) is torch.float16
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (8, 0))
    assert models.resolve_dtype(None) is torch.bfloat16


def test_bf16_autocast_on_cpu_keeps_the_weights_fp32():
    """Under bf16 autocast the matmul runs in bf16, the weight and its gradient stay fp32, and the
    step moves the weight."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4)
    opt = torch.optim.AdamW(lin.parameters(), lr=1e-2)
    amp = MixedPrecision(choose_precision("cpu", None, "bf16"))
    before = lin.weight.detach().clone()
    with amp.autocast():
        out = lin(torch.randn(3, 8))                                            # (3, 4)
        loss = out.float().pow(2).mean()                                        # scalar
    assert out.dtype == torch.bfloat16 and amp.scaler is None
    amp.backward(loss)
    assert lin.weight.grad.dtype == torch.float32
    assert amp.step(opt, lin.parameters(), max_grad_norm=1.0)
    assert lin.weight.dtype == torch.float32 and not torch.equal(lin.weight, before)


def test_the_fp16_scaler_skips_a_step_with_an_inf_gradient():
    """An inf gradient: the step is skipped (weights unchanged), the scale halves, step() says False;
    the next clean step goes through and the weights move."""
    lin = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    amp = MixedPrecision(choose_precision("cpu", None, "fp16"))               # a CPU GradScaler
    scale = amp.scaler.get_scale()                                              # 65536.0 at the start
    before = [p.detach().clone() for p in lin.parameters()]
    amp.backward((lin.weight * float("inf")).sum())                             # inf gradient
    assert not amp.step(opt, lin.parameters(), max_grad_norm=1.0)
    assert all(torch.equal(a, b) for a, b in zip(before, lin.parameters()))
    assert amp.scaler.get_scale() == scale / 2                                  # backoff_factor 0.5
    opt.zero_grad()
    amp.backward(lin(torch.ones(1, 2)).sum())
    assert amp.step(opt, lin.parameters(), max_grad_norm=1.0)
    assert any(not torch.equal(a, b) for a, b in zip(before, lin.parameters()))
    assert MixedPrecision(choose_precision("cpu")).state_dict() == {}           # fp32: nothing to save


def test_trainable_half_weights_go_to_fp32_and_frozen_ones_stay():
    base, lora = torch.nn.Linear(4, 4).half(), torch.nn.Linear(4, 2).half()
    base.requires_grad_(False)
    model = torch.nn.Sequential(base, lora)
    assert upcast_trainable(model) == 2                                         # lora's weight and bias
    assert base.weight.dtype == torch.float16 and lora.weight.dtype == torch.float32
    assert upcast_trainable(model) == 0


def char_reward(prompts, completions, **kwargs):
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


def plain_fp32(monkeypatch):
    """The loop as it was before mixed precision: no autocast context, loss.backward(), clip, step."""
    monkeypatch.setattr(MixedPrecision, "autocast", lambda self: contextlib.nullcontext())
    monkeypatch.setattr(MixedPrecision, "backward", lambda self, loss: loss.backward())

    def step(self, optimizer, params, max_grad_norm):
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
        return True

    monkeypatch.setattr(MixedPrecision, "step", step)
    monkeypatch.setattr("sdpo_kit.core.scratch.upcast_trainable", lambda model: 0)
    monkeypatch.setattr("sdpo_kit.ppo.trainer.upcast_trainable", lambda model: 0)


def run_each(tok, rows) -> dict:
    """Losses and final weights of a few steps of the GRPO, SDPO and PPO scratch trainers on CPU."""
    small = dict(max_steps=2, prompts_per_step=3, num_generations=4, max_completion_length=4, learning_rate=1e-2,
                 eval_every=0)
    trainers = {
        "grpo": GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, GRPOScratchConfig(**small, num_iterations=2)),
        "sdpo": SDPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows,
                         SDPOScratchConfig(**small, success_reward_threshold=0.5)),
        "ppo": PPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, PPOScratchConfig(
            batch_size=4, mini_batch_size=2, ppo_epochs=1, max_steps=2, learning_rate=1e-3, max_completion_length=3,
            eval_every=0, kd_coef=0.5), teacher=build_model(tok, seed=99)),
    }
    out = {}
    for name, t in trainers.items():
        assert t.precision.mode == "no" and t.amp.scaler is None   # the CPU default: fp32, no autocast
        out[name] = ([r["loss"] for r in t.train() if "loss" in r], [p.detach().clone() for p in t.model.parameters()])
    return out


def test_a_cpu_run_is_exactly_the_plain_fp32_loop(monkeypatch):
    """On a CPU, mixed_precision='auto' is fp32 with no autocast: GRPO, SDPO and PPO give the same
    losses and weights as the plain loop, to the last bit (the same operations in the same order,
    so equality, not a tolerance, is the claim); measured before and after the change, too."""
    tok = build_tokenizer()
    rows, _ = ArithmeticTask(n_eval=16, seed=0).splits()
    now = run_each(tok, rows)
    with monkeypatch.context() as m:
        plain_fp32(m)
        before = run_each(tok, rows)
    for name in now:
        assert now[name][0] == before[name][0], name
        assert all(torch.equal(a, b) for a, b in zip(now[name][1], before[name][1])), name
    assert prec.choose_precision("cpu").reason.startswith("fp32, no autocast")
