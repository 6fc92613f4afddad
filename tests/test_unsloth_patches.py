"""core.unsloth_patches: a model Unsloth did not load, once Unsloth has patched its class (simulated here on
a CPU: the patch is a forward whose module is unsloth's, and a rotary class put in the modeling module)."""

import torch
from transformers.models.llama import modeling_llama

from sdpo_kit.core.unsloth_patches import fit_to_unsloth, patched_by_unsloth
from sdpo_kit.lab.model import LabConfig, build_model, build_tokenizer


def tiny_llama():
    return build_model(build_tokenizer(), LabConfig())


def unsloth_like_patch(monkeypatch):
    """What Unsloth's pre_patch does to Llama, in miniature: the class's forward and the rotary class replaced."""
    original = modeling_llama.LlamaForCausalLM.forward

    def forward(self, *args, **kwargs):
        return original(self, *args, **kwargs)

    forward.__module__ = "unsloth.models.llama"

    class PatchedRotary(modeling_llama.LlamaRotaryEmbedding):
        pass

    PatchedRotary.__name__ = "LlamaRotaryEmbedding"
    monkeypatch.setattr(modeling_llama.LlamaForCausalLM, "forward", forward)
    monkeypatch.setattr(modeling_llama, "LlamaRotaryEmbedding", PatchedRotary)
    return PatchedRotary


def test_a_model_whose_class_unsloth_did_not_patch_comes_back_untouched():
    model = tiny_llama()
    assert not patched_by_unsloth(model)
    assert fit_to_unsloth(model) is model
    assert not hasattr(model, "max_seq_length")
    assert not any(hasattr(layer.self_attn, "rotary_emb") for layer in model.model.layers)


def test_a_model_built_before_the_patch_gets_unsloths_rotary_on_every_layer_and_a_length(monkeypatch):
    model = tiny_llama()                       # built with transformers' own rotary class
    patched = unsloth_like_patch(monkeypatch)
    assert patched_by_unsloth(model)
    fitted = fit_to_unsloth(model)
    rotary = fitted.model.rotary_emb
    assert isinstance(rotary, patched)
    assert all(layer.self_attn.rotary_emb is rotary for layer in fitted.model.layers)
    assert fitted.max_seq_length == fitted.model.max_seq_length == fitted.config.max_position_embeddings
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():   # the rebuilt rotary embedding gives the same logits as the original
        assert torch.allclose(fitted(input_ids=ids).logits, tiny_llama_logits(fitted, ids), atol=1e-6)


def tiny_llama_logits(model, ids):
    """The same weights' logits through transformers' own classes (the patch undone)."""
    fresh = build_model(build_tokenizer(), LabConfig())
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        return fresh(input_ids=ids).logits


def test_a_peft_wrapped_model_and_a_set_length_are_kept(monkeypatch):
    from peft import LoraConfig, get_peft_model

    unsloth_like_patch(monkeypatch)
    model = tiny_llama()                       # built after the patch: already the patched rotary class
    model.max_seq_length = 128
    peft = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))
    rotary = model.model.rotary_emb
    fit_to_unsloth(peft)
    assert model.model.rotary_emb is rotary and model.max_seq_length == 128
    assert all(layer.self_attn.rotary_emb is rotary for layer in model.model.layers)
