"""Sampling from a bf16 copy of the policy (``core.sampler_copy``) and GRPO's correction for it.

The copy must hold the policy's weights (LoRA folded) and follow them as they train; ``decode``'s log-probs
must be the sampling model's own; the weights follow TRL's four modes; the GRPO loop logs them, and the
loops whose loss has no correction refuse the option. TRL's loss with the weights: ``test_losses_trl.py``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from sdpo_kit.core.sampler_copy import SamplerCopy
from sdpo_kit.core.sampling import completion_logprobs, encode_prompts, sample
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.loss import sampler_weights
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.tasks import ArithmeticTask
from tests.test_sampling import PROMPTS, lora_lab


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def logits(model, tok):
    enc = encode_prompts(tok, PROMPTS)
    with torch.no_grad():
        return model(**enc).logits.float()                                      # (n, P, V)


def test_the_copy_holds_the_policy_with_its_lora_folded_and_follows_it(tok):
    model = lora_lab(tok).eval()
    copy = SamplerCopy(model, torch.float32)
    torch.testing.assert_close(logits(copy.model, tok), logits(model, tok), atol=1e-5, rtol=1e-5)
    with torch.no_grad():                                                       # a training step moves the adapter
        for name, p in model.named_parameters():
            if "lora_A" in name:
                p.add_(0.05)
    assert (logits(copy.model, tok) - logits(model, tok)).abs().max() > 1e-2   # stale until refreshed
    copy.refresh()
    torch.testing.assert_close(logits(copy.model, tok), logits(model, tok), atol=1e-5, rtol=1e-5)
    half = SamplerCopy(model)                                                   # bf16: close, not equal
    assert next(half.model.parameters()).dtype == torch.bfloat16
    assert 0 < (logits(half.model, tok) - logits(model, tok)).abs().max() < 0.5


def test_a_plain_model_is_copied_and_an_unfoldable_adapter_refused(tok):
    model = build_model(tok, seed=1).eval()
    torch.testing.assert_close(logits(SamplerCopy(model, torch.float32).model, tok), logits(model, tok))
    with pytest.raises(ValueError, match="cannot be folded"):
        SamplerCopy(lora_lab(tok, use_dora=True))


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_decode_logprobs_are_the_sampling_models_own(tok, temperature):
    """The log-probs ``sample`` returns for the tokens it drew are log softmax(logits / T) of the model that
    drew them: for the policy itself, what ``completion_logprobs`` gives on the same rows (0 after the eos)."""
    model = build_model(tok, seed=3).eval()
    torch.manual_seed(0)
    ro = sample(model, tok, PROMPTS, max_new_tokens=8, temperature=temperature, num_return_sequences=4,
                return_logprobs=True)
    with torch.no_grad():
        want = completion_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask,
                                   temperature)                                 # (B, T)
    m = ro.completion_mask.bool()
    torch.testing.assert_close(ro.sampler_logprobs[m], want[m], atol=1e-4, rtol=1e-4)
    assert (ro.sampler_logprobs[~m] == 0).all() and (ro.sampler_logprobs[m] < 0).all()
    torch.manual_seed(0)
    plain = sample(model, tok, PROMPTS, max_new_tokens=8, temperature=temperature, num_return_sequences=4)
    assert torch.equal(plain.completion_ids, ro.completion_ids) and plain.sampler_logprobs is None


def reference_weights(old, sampler, mask, mode, lo, hi):
    """TRL 1.16's correction (grpo_trainer.py, _generate_and_score_completions), one row at a time."""
    out = []
    for o, s, m in zip(old.tolist(), sampler.tolist(), mask.tolist()):
        diffs = [(a - b) * k for a, b, k in zip(o, s, m)]
        ws = [math.exp(sum(diffs))] if mode.startswith("sequence") else [math.exp(d) for d in diffs]
        if mode.endswith("truncate"):
            ws = [min(max(w, lo if lo is not None else -math.inf), hi if hi is not None else math.inf) for w in ws]
        else:
            ws = [0.0 if w < (lo if lo is not None else -math.inf) or w > (hi if hi is not None else math.inf) else w
                  for w in ws]
        out.append(ws)
    return torch.tensor(out)


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
@pytest.mark.parametrize("bounds", [(None, 3.0), (0.9, 1.2), (None, None)])
def test_sampler_weights_are_trls_four_modes(mode, bounds):
    g = torch.Generator().manual_seed(0)
    old = torch.randn(6, 5, generator=g) - 2                                    # (B, T)
    sampler = old + 0.2 * torch.randn(6, 5, generator=g)                        # (B, T)
    mask = (torch.arange(5)[None] < torch.tensor([5, 3, 1, 4, 5, 2])[:, None]).float()
    got = sampler_weights(old, sampler, mask, mode, *bounds)
    torch.testing.assert_close(got, reference_weights(old, sampler, mask, mode, *bounds), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="sampler correction"):
        sampler_weights(old, sampler, mask, "token")


def loop(tok, cls=GRPOScratchTrainer, config=GRPOScratchConfig, **kw):
    task = ArithmeticTask(n_eval=8)
    cfg = config(max_steps=2, prompts_per_step=2, num_generations=4, max_completion_length=3, learning_rate=1e-3,
                 seed=0, **kw)
    return cls(build_model(tok, seed=0), tok, [exact_match_reward()], task.splits()[0], cfg)


def test_grpo_samples_from_the_bf16_copy_and_logs_its_weights(tok):
    trainer = loop(tok, sampling_dtype="bfloat16", sampling_correction="token_truncate")
    rows = [r for r in trainer.train() if "loss" in r]
    assert len(rows) == 2
    for r in rows:   # a bf16 copy of a fp32 policy: near 1, never exactly 1 everywhere
        assert 0.8 < r["stats/sampler_weight_min"] <= r["stats/sampler_weight_mean"] <= r["stats/sampler_weight_max"] < 1.25
        assert r["stats/sampler_weight_min"] < r["stats/sampler_weight_max"] and r["stats/sampler_dropped_frac"] == 0
    assert "stats/sampler_weight_mean" not in next(r for r in loop(tok).train() if "loss" in r)


def test_a_bad_sampling_dtype_and_loops_without_the_correction_are_refused(tok):
    from sdpo_kit.sdpo.config import SDPOScratchConfig
    from sdpo_kit.sdpo.loop import SDPOScratchTrainer

    with pytest.raises(ValueError, match="sampling_dtype must be one of"):
        GRPOScratchConfig(sampling_dtype="float16")
    with pytest.raises(ValueError, match="sampling_correction must be one of"):
        GRPOScratchConfig(sampling_correction="token")
    with pytest.raises(ValueError, match="SDPOScratchTrainer's loss has no correction"):
        loop(tok, SDPOScratchTrainer, SDPOScratchConfig, sampling_dtype="bfloat16")


CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f{}\nprocessor\t: 1\n"


def test_auto_is_bf16_only_on_a_cpu_that_multiplies_bf16_and_for_a_loss_that_corrects():
    from sdpo_kit.core.sampler_copy import cpu_bf16_flags, resolve_sampling_dtype

    assert cpu_bf16_flags(CPUINFO.format(" avx512_bf16 amx_bf16")) == ["avx512_bf16", "amx_bf16"]
    assert cpu_bf16_flags(CPUINFO.format("")) == [] and cpu_bf16_flags("") == []
    with_bf16, without = CPUINFO.format(" amx_bf16"), CPUINFO.format("")
    assert resolve_sampling_dtype("auto", "cpu", cpuinfo=with_bf16)[0] == "bfloat16"
    assert resolve_sampling_dtype("auto", "cpu", cpuinfo=without)[0] == "float32"
    assert resolve_sampling_dtype("auto", "cpu", correctable=False, cpuinfo=with_bf16)[0] == "float32"
    assert resolve_sampling_dtype("auto", "cuda", cpuinfo=with_bf16)[0] == "float32"
    assert resolve_sampling_dtype("bfloat16", "cpu", cpuinfo=without) == ("bfloat16", "set in the config")
    with pytest.raises(ValueError, match="sampling_dtype must be one of"):
        resolve_sampling_dtype("fp16", "cpu")


@pytest.mark.parametrize("flags", [["avx512_bf16"], []])
def test_a_loop_set_to_auto_follows_the_cpu_and_says_what_it_chose(tok, flags, monkeypatch, capsys):
    from sdpo_kit.core import sampler_copy
    from sdpo_kit.sdpo.config import SDPOScratchConfig
    from sdpo_kit.sdpo.loop import SDPOScratchTrainer

    monkeypatch.setattr(sampler_copy, "cpu_bf16_flags", lambda cpuinfo=None: flags)
    trainer = loop(tok, sampling_dtype="auto")
    assert trainer.sampling_dtype == ("bfloat16" if flags else "float32")
    assert (trainer.sampler_copy is not None) == bool(flags)
    assert f"sampling_dtype: auto -> {trainer.sampling_dtype}" in capsys.readouterr().out
    sdpo = loop(tok, SDPOScratchTrainer, SDPOScratchConfig, sampling_dtype="auto")   # no correction in its loss: the policy samples
    assert sdpo.sampling_dtype == "float32" and sdpo.sampler_copy is None


def test_the_trl_backend_takes_auto_as_the_policy_sampling_and_refuses_bf16():
    from sdpo_kit.grpo.config import GRPOTRLConfig
    from sdpo_kit.grpo.trl import grpo_args
    from sdpo_kit.registry import load_config

    assert GRPOTRLConfig(sampling_dtype="auto").sampling_dtype == "auto"
    assert "sampling_dtype" not in grpo_args("cpu", sampling_dtype="auto")
    for build in (lambda: GRPOTRLConfig(sampling_dtype="bfloat16"), lambda: grpo_args("cpu", sampling_dtype="bfloat16")):
        with pytest.raises(ValueError, match="trl backend samples with the policy"):
            build()
    path = Path(__file__).resolve().parents[1] / "configs" / "real_grpo.yaml"
    for algorithm in ("grpo", "sdpo"):   # one config, every backend: auto means what each can do
        for backend in ("scratch", "trl"):
            cfg = load_config(path, {"algorithm": algorithm, "backend": backend, "trainer.sampling_dtype": "auto"})
            assert cfg.trainer.sampling_dtype == "auto"
