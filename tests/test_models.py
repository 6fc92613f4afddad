"""load_policy: the tiny lab, the transformers + PEFT path on a local directory, the offline
error, and the dispatch to Unsloth on a GPU (mocked: CI has neither a GPU nor unsloth)."""

import inspect

import pytest
import torch

from sdpo_kit import models
from sdpo_kit.core.sampling import generate_completions
from sdpo_kit.models import LORA_TARGETS, ModelNotAvailableError, finish_tokenizer, load_policy


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny-lab")


def test_tiny_lab_returns_a_working_model_and_tokenizer(tiny):
    """The tiny lab loads offline, pads on the left with a pad token, generates number-only
    completions in a batch, and is warm: held-out greedy accuracy well above an untrained
    model's (about 0) on 100 held-out sums."""
    from sdpo_kit.tasks import ArithmeticTask

    model, tok = tiny
    assert tok.pad_token is not None and tok.padding_side == "left"
    assert model.generation_config.pad_token_id == tok.pad_token_id
    prompts = [[{"role": "user", "content": "1+2+3="}], [{"role": "user", "content": "9+8+7="}]]
    texts = generate_completions(model, tok, prompts, max_new_tokens=4, do_sample=False)
    assert len(texts) == 2 and all(t.strip().isdigit() for t in texts), texts
    task = ArithmeticTask(n_eval=100)
    _, heldout = task.splits()
    assert task.evaluate(model, tok, heldout) > 0.15


def test_hub_name_offline_raises_a_clear_error(monkeypatch):
    """A hub model that is not cached, with HF_HUB_OFFLINE=1, raises ModelNotAvailableError
    naming the model, saying 'offline' and pointing at the tiny lab."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = "sdpo-kit-tests/no-such-model-0"
    with pytest.raises(ModelNotAvailableError) as e:
        load_policy(name)
    msg = str(e.value)
    assert name in msg and "offline" in msg and "tiny-lab" in msg


def test_missing_local_directory_raises():
    """A path that looks local and does not exist is reported as such, not sent to the hub."""
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        load_policy("./no/such/dir")


def test_trust_remote_code_is_off_by_default():
    """``trust_remote_code`` defaults to False in load_policy's signature."""
    assert inspect.signature(load_policy).parameters["trust_remote_code"].default is False


def test_local_directory_loads_with_transformers_safetensors_and_lora(tiny, tmp_path, monkeypatch):
    """A saved model directory goes through AutoTokenizer/AutoModelForCausalLM with
    trust_remote_code=False and use_safetensors=True, and gets the default LoRA (r=16 on every
    projection) so only adapter weights train; a forward pass runs."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = tiny
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save_pretrained(tmp_path)
    seen = {}
    real_model, real_tok = AutoModelForCausalLM.from_pretrained, AutoTokenizer.from_pretrained

    def spy_model(name, **kw):
        seen["model"] = kw
        return real_model(name, **kw)

    def spy_tok(name, **kw):
        seen["tok"] = kw
        return real_tok(name, **kw)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy_model)
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", spy_tok)
    peft_model, tok2 = load_policy(str(tmp_path))
    assert seen["model"]["trust_remote_code"] is False and seen["tok"]["trust_remote_code"] is False
    assert seen["model"]["use_safetensors"] is True
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert {t for t in LORA_TARGETS if any(f".{t}.lora_A" in n for n in trainable)} == set(LORA_TARGETS)
    assert peft_model.peft_config["default"].r == 16
    ids = tok2("1+2=", return_tensors="pt")["input_ids"]
    assert torch.isfinite(peft_model(input_ids=ids).logits).all()


def test_tokenizer_without_pad_falls_back_to_eos(tiny):
    """finish_tokenizer gives a tokenizer with no pad token its eos as pad, and left padding."""
    _, tok = tiny
    tok = tok.__class__.from_pretrained(tok.name_or_path) if tok.name_or_path else tok
    tok.pad_token = None
    tok.padding_side = "right"
    finish_tokenizer(tok)
    assert tok.pad_token == tok.eos_token and tok.padding_side == "left"


def test_gpu_dispatch_picks_unsloth_4bit_lora_and_fp16_on_a_t4(monkeypatch):
    """With CUDA and unsloth present (mocked), a hub name goes to the Unsloth loader in 4-bit
    with r=16 LoRA on q/k/v/o/gate/up/down, in fp16 when the GPU has no bf16 (a T4, compute
    capability 7.5), though ``torch.cuda.is_bf16_supported()`` says True there (emulation)."""
    calls = {}

    class FakeTok:
        pad_token, eos_token, padding_side = None, "</s>", "right"

    def fake_unsloth(name, **kw):
        calls.update(kw, name=name)
        return torch.nn.Linear(1, 1), FakeTok()

    monkeypatch.setattr(models, "_unsloth_available", lambda: True)
    monkeypatch.setattr(models, "_load_unsloth", fake_unsloth)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # what a T4 reports
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (7, 5))
    _, tok = load_policy("Qwen/Qwen2.5-0.5B-Instruct")
    assert calls["name"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert calls["dtype"] is torch.float16 and calls["load_in_4bit"] is None  # None -> 4-bit inside
    assert calls["lora"]["r"] == 16 and set(calls["lora"]["target_modules"]) == set(LORA_TARGETS)
    assert calls["trust_remote_code"] is False
    assert tok.pad_token == "</s>" and tok.padding_side == "left"
