"""Sampling and log-prob helpers, and the scratch loop's use of them.

The shared-prompt forward equals the plain one; the loop trains the same with and without it,
falls back when they disagree, and follows its learning-rate schedule.

``shared_prompt_logprobs`` runs each prompt once and repeats its KV cache for the G
completions; it must give the same log-probs and the same gradients as
``completion_logprobs``, with left-padded prompts and completions that end early.
"""

from __future__ import annotations

import pytest
import torch

from sdpo_kit.core.sampling import (
    SharePromptUnsupported,
    completion_logprobs,
    encode_prompts,
    sample,
    shared_prompt_logprobs,
)
from sdpo_kit.grpo import loop as grpo_module
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer

G = 3
PROMPTS = ["1+2=", "17+5=", "123+4="]  # different lengths: left padding differs per group


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture
def model(tok):
    return build_model(tok, seed=0).train()


def grouped_batch(tok, T=5, seed=0):
    """3 prompts x G completions; eos at different places, pad after it, one with no eos."""
    g = torch.Generator().manual_seed(seed)
    enc = encode_prompts(tok, [[{"role": "user", "content": p}] for p in PROMPTS])
    prompt_ids = enc["input_ids"].repeat_interleave(G, 0)                        # (B, P)
    prompt_mask = enc["attention_mask"].repeat_interleave(G, 0)                  # (B, P)
    B = prompt_ids.size(0)
    completion_ids = torch.randint(10, 60, (B, T), generator=g)                  # (B, T)
    ends = [0, 2, T, 1, T - 1, 3, T, 0, 2][:B]                                   # eos index; T: none
    completion_mask = torch.zeros(B, T, dtype=torch.long)
    for i, e in enumerate(ends):
        if e < T:
            completion_ids[i, e] = tok.eos_token_id
            completion_ids[i, e + 1:] = tok.pad_token_id
        completion_mask[i, : e + 1] = 1
    assert prompt_mask.sum(1).unique().numel() == 3  # the three groups really are padded differently
    return prompt_ids, prompt_mask, completion_ids, completion_mask


def grads(model):
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("T", [1, 5])
def test_shared_prompt_equals_plain_forward_values_and_gradients(model, tok, T):
    args = grouped_batch(tok, T=T)
    mask = args[3]
    plain = completion_logprobs(model, *args, temperature=0.7)                   # (B, T)
    (plain * mask).sum().backward()
    g_plain = grads(model)
    model.zero_grad()
    shared = shared_prompt_logprobs(model, *args, group_size=G, temperature=0.7)  # (B, T)
    (shared * mask).sum().backward()
    g_shared = grads(model)
    assert shared.shape == plain.shape == (len(PROMPTS) * G, T)
    m = mask.bool()
    torch.testing.assert_close(shared[m], plain[m], rtol=1e-5, atol=1e-5)
    for a, b in zip(g_plain, g_shared):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    assert any(a.abs().max() > 0 for a in g_plain)  # the gradients compared are not all zero


def test_shared_prompt_rejects_rows_that_are_not_groups(model, tok):
    p_ids, p_mask, c_ids, c_mask = grouped_batch(tok)
    with pytest.raises(ValueError, match="not a whole number of groups of 4"):
        shared_prompt_logprobs(model, p_ids, p_mask, c_ids, c_mask, group_size=4)
    shuffled = torch.tensor([1, 0, 2, 3, 4, 5, 6, 7, 8])  # row 1 (prompt 0) and row 0 swapped: fine
    shared_prompt_logprobs(model, p_ids[shuffled], p_mask[shuffled], c_ids, c_mask, group_size=G)
    mixed = torch.tensor([0, 1, 3, 2, 4, 5, 6, 7, 8])     # a prompt-1 row inside group 0: refused
    with pytest.raises(ValueError, match="identical prompts"):
        shared_prompt_logprobs(model, p_ids[mixed], p_mask[mixed], c_ids, c_mask, group_size=G)


def test_shared_prompt_refuses_gradient_checkpointing(model, tok):
    model.gradient_checkpointing_enable()
    with pytest.raises(ValueError, match="gradient checkpointing"):
        shared_prompt_logprobs(model, *grouped_batch(tok), group_size=G)


def loop_params_after_two_steps(tok, share_prompt):
    model = build_model(tok, seed=0)
    rows = [{"prompt": [{"role": "user", "content": p}], "answer": "0"} for p in PROMPTS]
    cfg = GRPOScratchConfig(max_steps=2, prompts_per_step=3, num_generations=G, num_iterations=2,
                     max_completion_length=4, beta=0.1, learning_rate=1e-2, share_prompt=share_prompt)
    loop = GRPOScratchTrainer(model, tok, [lambda prompts, completions, **kw: [float(len(c[0]["content"])) for c in completions]],
                    rows, cfg)
    loop.train()
    return loop, [p.detach().clone() for p in model.parameters()]


def test_grpo_loop_trains_the_same_with_and_without_prompt_sharing(tok):
    """Same seed, same samples: two steps (mu=2, KL to a reference) end at the same weights;
    every row says whether the step shared the prompt (stats/share_prompt)."""
    loop_on, on = loop_params_after_two_steps(tok, True)
    loop_off, off = loop_params_after_two_steps(tok, False)
    assert loop_on._share and not loop_off._share
    assert [r["stats/share_prompt"] for r in loop_on.history] == [1.0, 1.0]
    assert [r["stats/share_prompt"] for r in loop_off.history] == [0.0, 0.0]
    start = [p.detach() for p in build_model(tok, seed=0).parameters()]
    assert any((a - s).abs().max() > 1e-4 for a, s in zip(on, start))  # training moved the weights
    # Adam divides by sqrt(v): float-rounding differences of near-zero gradients show up at
    # ~1e-5 in the weights; 1e-4 is 1% of one lr=1e-2 step
    for a, b in zip(on, off):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_grpo_loop_falls_back_when_the_shared_forward_disagrees(tok, monkeypatch):
    """A model whose cached forward is wrong (simulated) is caught on the first batch:
    share_prompt="auto" warns and falls back (rows log stats/share_prompt 0), True fails loudly."""
    def wrong(model, *args, **kw):
        return completion_logprobs(model, *args[:4]) + 1.0
    monkeypatch.setattr(grpo_module, "shared_prompt_logprobs", wrong)
    with pytest.warns(UserWarning, match="falling back to the plain forward"):
        loop, _ = loop_params_after_two_steps(tok, "auto")
    assert not loop._share and [r["stats/share_prompt"] for r in loop.history] == [0.0, 0.0]
    with pytest.raises(SharePromptUnsupported, match="disagrees"):
        loop_params_after_two_steps(tok, True)


def test_only_the_disagreement_falls_back_not_any_value_error(tok, monkeypatch):
    """A ValueError that is not SharePromptUnsupported (a bug: rows that are not groups, say)
    propagates under "auto" instead of being hidden by the fallback."""
    def broken(model, *args, **kw):
        raise ValueError("rows are not groups of 3 identical prompts in a row")
    monkeypatch.setattr(grpo_module, "shared_prompt_logprobs", broken)
    with pytest.raises(ValueError, match="not groups"):
        loop_params_after_two_steps(tok, "auto")


def test_sample_groups_rows_by_prompt(model, tok):
    """sample() repeats each prompt G times in a row: the layout the shared forward needs."""
    ro = sample(model, tok, [[{"role": "user", "content": p}] for p in PROMPTS], max_new_tokens=3,
                num_return_sequences=G)
    args = (ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
    assert ro.prompt_ids.shape[0] == len(PROMPTS) * G
    m = ro.completion_mask.bool()
    with torch.no_grad():
        torch.testing.assert_close(shared_prompt_logprobs(model, *args, G)[m], completion_logprobs(model, *args)[m],
                                   rtol=1e-5, atol=1e-5)


def lr_trace(tok, schedule):
    rows = [{"prompt": [{"role": "user", "content": p}], "answer": "0"} for p in PROMPTS]
    cfg = GRPOScratchConfig(max_steps=4, prompts_per_step=3, num_generations=G, num_iterations=2,
                     max_completion_length=2, learning_rate=0.1, lr_scheduler_type=schedule)
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [lambda prompts, completions, **kw: [0.0] * len(prompts)],
                    rows, cfg)
    return [h["stats/learning_rate"] for h in loop.train() if h["step"] > 0]


def test_learning_rate_schedules(tok):
    """constant stays put; linear decays to 0 over max_steps x mu optimizer updates, as TRL's."""
    assert lr_trace(tok, "constant") == [0.1] * 4
    # after step k (2k updates of 8): lr = 0.1 * (1 - 2k/8)
    assert lr_trace(tok, "linear") == pytest.approx([0.075, 0.05, 0.025, 0.0])
    with pytest.raises(ValueError, match="lr_scheduler_type"):
        GRPOScratchConfig(lr_scheduler_type="cosine")


def test_a_forward_that_drops_the_cache_is_refused_not_silently_wrong(model, tok):
    """Gradient checkpointing (or a patched forward) can skip the cache while the flag says
    nothing: the shared forward must refuse rather than run completions without their prompt."""
    class NoCache(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, **kw):
            out = self.inner(**{k: v for k, v in kw.items() if k not in ("past_key_values", "use_cache")})
            out.past_key_values = None
            return out

    with pytest.raises(SharePromptUnsupported, match="no KV cache"):
        shared_prompt_logprobs(NoCache(model), *grouped_batch(tok), group_size=G)

    class TupleCache(NoCache):   # Unsloth's patched forward on a GPU returns the legacy tuple of (k, v) per layer
        def forward(self, **kw):
            out = self.inner(**{k: v for k, v in kw.items() if k not in ("past_key_values", "use_cache")})
            out.past_key_values = ((torch.zeros(1), torch.zeros(1)),)
            return out

    with pytest.raises(SharePromptUnsupported, match="no KV cache"):
        shared_prompt_logprobs(TupleCache(model), *grouped_batch(tok), group_size=G)


def test_grpo_loop_falls_back_when_the_training_forward_drops_the_cache(tok, monkeypatch):
    """The first-batch check runs in eval mode; a failure in the training forward later also
    falls back to the plain forward, with a warning, instead of crashing or training wrong."""
    calls = {"n": 0}

    def flaky(model, *args, **kw):
        calls["n"] += 1
        if calls["n"] > 1:  # the eval-mode check passes, the training forward refuses
            raise SharePromptUnsupported("the model's forward returned no KV cache for the prompt")
        return shared_prompt_logprobs(model, *args, **kw)
    monkeypatch.setattr(grpo_module, "shared_prompt_logprobs", flaky)
    with pytest.warns(UserWarning, match="no KV cache.*falling back"):
        loop, on = loop_params_after_two_steps(tok, "auto")
    _, off = loop_params_after_two_steps(tok, False)
    assert not loop._share
    for a, b in zip(on, off):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
