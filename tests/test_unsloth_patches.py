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
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        original = model(input_ids=ids).logits
    patched = unsloth_like_patch(monkeypatch)
    assert patched_by_unsloth(model)
    fitted = fit_to_unsloth(model)
    rotary = fitted.model.rotary_emb
    assert isinstance(rotary, patched)
    assert all(layer.self_attn.rotary_emb is rotary for layer in fitted.model.layers)
    assert fitted.max_seq_length == fitted.model.max_seq_length == fitted.config.max_position_embeddings
    with torch.no_grad():   # the rotary embedding rebuilt from the config gives the original one's logits
        assert torch.allclose(fitted(input_ids=ids).logits, original, atol=1e-6)


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


def test_a_model_cast_after_loading_gets_a_config_in_its_weights_dtype(monkeypatch):
    """An fp16 export read back and cast to fp32: Unsloth's forward casts hidden states to the config's dtype."""
    unsloth_like_patch(monkeypatch)
    model = tiny_llama()
    model.config.dtype = "float16"             # what the export's config.json says
    assert fit_to_unsloth(model.float()).config.dtype == torch.float32
    model.config.dtype = torch.float32
    assert fit_to_unsloth(model.to(torch.bfloat16)).config.dtype == torch.bfloat16
    untouched = tiny_llama()
    untouched.config.dtype = "float16"         # a class Unsloth has not patched keeps what it said
    monkeypatch.undo()
    assert fit_to_unsloth(untouched.float()).config.dtype in ("float16", torch.float16)


def test_sampling_fits_a_model_beside_unsloth_before_it_draws(monkeypatch):
    """core.sampling.sample gives a model Unsloth did not load what the patched forward reads, then draws."""
    from sdpo_kit.core.sampling import sample

    tok = build_tokenizer()
    model = build_model(tok, LabConfig())
    patched = unsloth_like_patch(monkeypatch)
    out = sample(model, tok, ["1+2="], max_new_tokens=3, do_sample=False)
    assert len(out.texts) == 1
    assert isinstance(model.model.rotary_emb, patched) and model.max_seq_length == model.config.max_position_embeddings


def test_run_without_unsloth_calls_in_a_fresh_process_and_says_when_it_fails(tmp_path):
    import pytest

    from sdpo_kit.core.unsloth_patches import run_without_unsloth

    source, target = tmp_path / "a.txt", tmp_path / "b.txt"
    source.write_text("written")
    run_without_unsloth("shutil", "copyfile", source, target)
    assert target.read_text() == "written"
    with pytest.raises(RuntimeError, match="(?s)shutil.copyfile failed in a process of its own.*missing.txt"):
        run_without_unsloth("shutil", "copyfile", tmp_path / "missing.txt", target)


def test_beside_unsloth_the_tiny_lab_warm_start_trains_in_a_process_of_its_own(tmp_path, monkeypatch):
    """Unsloth's forward needs CUDA, the warm start trains on the CPU: beside the patch it is built by a
    fresh process (the same weights as anywhere: a build here without the patch is compared) and loaded."""
    from sdpo_kit.lab.model import warm_start

    cfg = LabConfig(sft_steps=4, sft_batch_size=8)
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path / "beside"))
    unsloth_like_patch(monkeypatch)
    model, _ = warm_start(cfg, verbose=False)
    assert (tmp_path / "beside" / f"tiny-lab-{cfg.key()}" / "model.safetensors").exists()
    monkeypatch.undo()
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path / "plain"))
    plain, _ = warm_start(cfg, verbose=False)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))
