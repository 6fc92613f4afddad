"""Sampling parity: ``generation.sample`` draws from softmax(logits / T) and nothing else.

A model's own ``generation_config`` (Qwen2.5 ships repetition_penalty=1.1, top_k=20, ...)
must not reach the sampler: the loss treats the samples as on-policy. And every eos the
model names ends a completion (Qwen has two).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from sdpo_kit.core.sampling import completion_mask_from_eos, eos_token_ids, sample, sampling_config
from sdpo_kit.lab.model import build_model, build_tokenizer

PROMPTS = [[{"role": "user", "content": p}] for p in ("1+2=", "17+5=", "9+9+9=")]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def draw(model, tok, seed=0, **kw):
    torch.manual_seed(seed)
    return sample(model, tok, PROMPTS, max_new_tokens=12, temperature=1.0, num_return_sequences=8, **kw)


def test_model_generation_defaults_do_not_reach_the_sampler(tok):
    """A tiny model whose generation config sets repetition_penalty=1.3 (and top_k=3,
    no_repeat_ngram_size=1, min_p=0.3) samples exactly what the same weights sample with a
    plain config, seed for seed; a bare model.generate() with its own defaults does not
    (so this test can tell the two apart)."""
    plain = build_model(tok, seed=0)
    quirky = build_model(tok, seed=0)
    quirky.generation_config.update(repetition_penalty=1.3, top_k=3, no_repeat_ngram_size=1, min_p=0.3)
    a, b = draw(plain, tok), draw(quirky, tok)
    assert torch.equal(a.completion_ids, b.completion_ids) and a.texts == b.texts
    assert quirky.generation_config.repetition_penalty == 1.3  # given back unchanged
    # the control: generate() left to the model's defaults samples something else
    torch.manual_seed(0)
    raw = quirky.generate(input_ids=a.prompt_ids, attention_mask=a.prompt_mask, max_new_tokens=12, do_sample=True)
    assert not torch.equal(raw[:, a.prompt_ids.size(1):], a.completion_ids[:, :raw.size(1) - a.prompt_ids.size(1)])


def test_sampling_config_is_complete(tok):
    """Every knob that changes the distribution is spelled out: temperature, top_k=0,
    top_p=1.0, repetition_penalty=1.0, the model's whole eos list; greedy sets no sampling knob."""
    model = build_model(tok, seed=0)
    model.generation_config.eos_token_id = [tok.eos_token_id, 7]
    c = sampling_config(model, tok, max_new_tokens=4, temperature=0.7)
    assert (c.do_sample, c.temperature, c.top_k, c.top_p, c.repetition_penalty) == (True, 0.7, 0, 1.0, 1.0)
    assert c.eos_token_id == [tok.eos_token_id, 7] == eos_token_ids(model, tok)
    greedy = sampling_config(model, tok, max_new_tokens=4, do_sample=False)
    assert greedy.do_sample is False and greedy.temperature is None and greedy.top_k is None


def test_every_eos_the_model_names_ends_a_completion(tok):
    """With a second eos (the character "1", common in sums) the completions stop at the first
    of either, the mask covers up to and including it, and nothing after it is decoded."""
    model = build_model(tok, seed=1)
    one = tok.convert_tokens_to_ids("1")
    model.generation_config.eos_token_id = [tok.eos_token_id, one]
    ro = draw(model, tok)
    ends = 0
    for ids, mask, text in zip(ro.completion_ids.tolist(), ro.completion_mask.tolist(), ro.texts):
        n = sum(mask)
        stops = [i for i, t in enumerate(ids[:n]) if t in (tok.eos_token_id, one)]
        assert stops in ([], [n - 1]), "the mask ends at the first eos, inclusive"
        ends += bool(stops) and ids[n - 1] == one
        assert "1" not in text[:-1]
    assert ends > 0, "the second eos never came up: the test proves nothing"


def test_completion_mask_from_eos_takes_one_id_or_a_list():
    """One id or a list: 1 up to and including the first of them, 0 after."""
    ids = torch.tensor([[5, 3, 9, 3], [9, 9, 9, 9], [5, 5, 5, 3]])
    assert completion_mask_from_eos(ids, 3).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    assert completion_mask_from_eos(ids, [3, 5]).tolist() == [[1, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_top_k_reaches_both_backends(tok, tmp_path):
    """trainer.top_k / top_p (TRL's names, default 0 / 1.0: plain sampling) reach the scratch
    sampler (top_k=1 makes every completion of a group the greedy one) and TRL's GRPOScratchConfig."""
    from sdpo_kit.grpo.config import GRPOScratchConfig
    from sdpo_kit.grpo.loop import GRPOScratchTrainer
    from sdpo_kit.grpo.trl import grpo_args
    from sdpo_kit.registry import config_from_dict

    rows = [{"prompt": p, "answer": "0"} for p in PROMPTS]
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [lambda prompts, completions, **kw: [0.0] * len(completions)], rows,
                    GRPOScratchConfig(prompts_per_step=3, num_generations=4, max_completion_length=6, top_k=1))
    ro, _, _ = loop.rollout(rows)
    groups = [ro.texts[i:i + 4] for i in range(0, 12, 4)]
    assert all(len(set(g)) == 1 for g in groups)
    trl = config_from_dict({"backend": "trl", "trainer": {"top_k": 20, "top_p": 0.9}}).trainer
    assert (trl.top_k, trl.top_p) == (20, 0.9)
    args = grpo_args("cpu", tmp_path, top_k=20, top_p=0.9)
    assert (args["top_k"], args["top_p"]) == (20, 0.9)


def generate_reference(model, tok, prompts, G, seed, **kw):
    """What transformers' generate draws for the same prompts, config and seed (every prompt G times)."""
    from sdpo_kit.core.sampling import encode_prompts, neutral_generation_defaults
    from sdpo_kit.core.utils import eval_mode

    enc = encode_prompts(tok, prompts)
    ids, am = enc["input_ids"].repeat_interleave(G, 0), enc["attention_mask"].repeat_interleave(G, 0)
    config = sampling_config(model, tok, max_new_tokens=12, **kw)
    torch.manual_seed(seed)
    with eval_mode(model), neutral_generation_defaults(model), torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=am, generation_config=config)[:, ids.size(1):]
    return out.masked_fill(completion_mask_from_eos(out, config.eos_token_id) == 0, tok.pad_token_id)


@pytest.mark.parametrize("kw", [dict(temperature=0.7), dict(temperature=1.0, top_k=5), dict(temperature=0.9, top_p=0.8),
                                dict(do_sample=False)], ids=["T0.7", "top_k", "top_p", "greedy"])
@pytest.mark.parametrize("G", [1, 4])
def test_sample_draws_token_for_token_what_generate_draws(tok, kw, G):
    """``sample`` runs each prompt once and decodes in its own loop; it must draw exactly the tokens
    transformers' ``generate`` draws from the same seed (same forwards, processors, random draws), so a
    run's numbers do not depend on which of the two sampled. Prompts of different lengths (left padding)."""
    model = build_model(tok, seed=3)
    for seed in (0, 1):
        want = generate_reference(model, tok, PROMPTS, G, seed, **kw)
        torch.manual_seed(seed)
        got = sample(model, tok, PROMPTS, max_new_tokens=12, num_return_sequences=G, **kw).completion_ids
        assert got.shape == want.shape and torch.equal(got, want), (kw, G, seed)


def test_a_forward_without_a_usable_cache_samples_through_generate(tok):
    """``decode`` gives up (None) on a forward that returns no cache, or the legacy tuple (Unsloth's on a
    GPU); ``sample`` then uses ``generate``."""
    from sdpo_kit.core.sampling import decode, encode_prompts

    model = build_model(tok, seed=3)
    enc = encode_prompts(tok, PROMPTS)
    config = sampling_config(model, tok, max_new_tokens=4, temperature=1.0)
    real_forward = model.forward

    def tuple_cache(*args, **kw):
        out = real_forward(*args, **kw)
        out.past_key_values = ((torch.zeros(1), torch.zeros(1)),)
        return out

    model.forward = tuple_cache
    assert decode(model, enc["input_ids"], enc["attention_mask"], config, 2) is None
    model.forward = real_forward
    assert decode(model, enc["input_ids"], enc["attention_mask"], config, 2).shape[0] == 2 * len(PROMPTS)


def lora_lab(tok, **extra):
    """The tiny lab with LoRA on every projection, its B matrices drawn (a fresh adapter's are zero);
    ``extra``: more ``peft.LoraConfig`` options (DoRA, a LoRA bias)."""
    from peft import LoraConfig, get_peft_model

    from sdpo_kit.models import LORA_TARGETS

    config = LoraConfig(task_type="CAUSAL_LM", r=16, lora_alpha=16, target_modules=list(LORA_TARGETS), **extra)
    with warnings.catch_warnings():   # a LoRA bias on a bias-free layer: PEFT warns it cannot merge, as meant here
        warnings.filterwarnings("ignore", message="`lora_bias=True` was passed")
        model = get_peft_model(build_model(tok, seed=3), config)
    torch.manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    return model


def test_merged_lora_is_the_same_policy_and_gives_the_base_back(tok):
    """Sampling folds each adapter into its base weight (W + s B A, one matmul a layer): the logits are the
    adapter model's up to float rounding, the frozen base keeps its Parameter objects and their bits, and
    greedy decoding picks the same tokens with and without the fold."""
    from sdpo_kit.core.sampling import encode_prompts, mergeable_lora_layers, merged_lora

    model = lora_lab(tok).eval()
    layers = mergeable_lora_layers(model)
    assert layers is not None and len(layers) == 7 * model.config.num_hidden_layers
    before = {n: (p, p.detach().clone()) for n, p in model.named_parameters()}
    enc = encode_prompts(tok, PROMPTS)
    with torch.no_grad():
        plain = model(**enc).logits                                            # (n, P, V)
        with merged_lora(model) as m:
            assert all(layer.get_base_layer().weight is not before[n][0] for n, (layer, _) in
                       zip([n for n in before if "base_layer.weight" in n], layers))
            merged = m(**enc).logits
    torch.testing.assert_close(merged, plain, atol=1e-5, rtol=1e-5)
    with torch.no_grad(), model.disable_adapter():
        assert (plain - model(**enc).logits).abs().max() > 1e-2  # the adapter does change them
    for n, p in model.named_parameters():
        assert p is before[n][0] and torch.equal(p, before[n][1]), n
    greedy = dict(max_new_tokens=12, do_sample=False, num_return_sequences=1)
    got = sample(model, tok, PROMPTS, **greedy).completion_ids
    want = generate_reference(model, tok, PROMPTS, 1, 0, do_sample=False)
    assert torch.equal(got, want)


@pytest.mark.parametrize("change", ["dora", "lora_bias", "bf16", "merged", "disabled", "plain"])
def test_lora_that_cannot_be_folded_exactly_is_left_alone(tok, change):
    """DoRA, a LoRA bias, a low-precision base, adapters already merged or switched off (folding them
    then would add an adapter the model is not running), or no adapter at all: nothing is folded."""
    from sdpo_kit.core.sampling import mergeable_lora_layers

    if change == "plain":
        model = build_model(tok, seed=3)
    else:
        model = lora_lab(tok, **({"use_dora": True} if change == "dora" else {"lora_bias": True} if change == "lora_bias"
                                 else {}))
        if change == "bf16":
            model.to(torch.bfloat16)
        elif change == "merged":
            model.merge_adapter()
        elif change == "disabled":
            assert mergeable_lora_layers(model) is not None
            with model.disable_adapter():
                assert mergeable_lora_layers(model) is None
            return
    assert mergeable_lora_layers(model) is None


@pytest.mark.parametrize("shape", [(16, 49152), (3, 50), (1, 7)])
def test_draw_is_torch_multinomial_token_for_token_and_leaves_the_generator_where_it_does(shape):
    """``draw`` against ``torch.multinomial(probs, 1)`` from the same seed: the same tokens, rows with zeros
    (top-k) included, and the global generator left in the same state (the next random number equal)."""
    from sdpo_kit.core.decoding import draw

    for seed in range(3):
        logits = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 3
        logits[0, : shape[1] // 2] = -float("inf")                       # a top-k row: half the vocabulary is 0
        probs = torch.softmax(logits, -1)                                 # (B, V)
        torch.manual_seed(seed)
        want, after_want = torch.multinomial(probs, 1).squeeze(1), torch.rand(1)
        torch.manual_seed(seed)
        got, after_got = draw(probs), torch.rand(1)
        assert torch.equal(got, want) and torch.equal(after_got, after_want), seed
        assert (probs[0, got[0]] > 0).item()


def test_draw_refuses_what_torch_multinomial_refuses():
    from sdpo_kit.core.decoding import draw

    for bad in (torch.tensor([[0.5, float("nan")]]), torch.tensor([[0.5, -0.1]]), torch.tensor([[0.0, 0.0]]),
                torch.tensor([[float("inf"), 1.0]])):
        with pytest.raises(RuntimeError):
            torch.multinomial(bad, 1)
        with pytest.raises(RuntimeError, match="probability tensor"):
            draw(bad)
