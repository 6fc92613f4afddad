"""PolicyWithValueHead: one trunk, logits and values; the completion positions; save / load; LoRA."""

from __future__ import annotations

import pytest
import torch

from sdpo_kit.core.sampling import completion_logits, sample
from sdpo_kit.lab.model import LabConfig, build_model, build_tokenizer
from sdpo_kit.models import finish_tokenizer
from sdpo_kit.ppo.value_head import HEAD_FILE, PolicyWithValueHead


@pytest.fixture(scope="module")
def lab():
    tok = build_tokenizer()
    model = build_model(tok, LabConfig(), seed=0)
    return model, finish_tokenizer(tok, model)


def rollout(model, tok):
    torch.manual_seed(0)
    return sample(model, tok, ["1+2+3=", "4+4="], max_new_tokens=4, temperature=1.0, num_return_sequences=2)


def test_completion_forward_gives_the_policys_logits_and_a_value_per_token(lab):
    model, tok = lab
    pv = PolicyWithValueHead(model).eval()
    ro = rollout(model, tok)
    logits, values = pv.completion_forward(ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
    ref = completion_logits(model, ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
    torch.testing.assert_close(logits, ref)
    assert values.shape == ro.completion_ids.shape
    _, all_values = pv(torch.cat([ro.prompt_ids, ro.completion_ids], 1), torch.cat([ro.prompt_mask, ro.completion_mask], 1),
                       (torch.cat([ro.prompt_mask, ro.completion_mask], 1).cumsum(-1) - 1).clamp(min=0))
    T = ro.completion_ids.size(1)
    torch.testing.assert_close(values, all_values[:, -T - 1:-1])   # the state before each completion token


def test_gradients_reach_the_head_and_the_shared_trunk(lab):
    model, tok = lab
    pv = PolicyWithValueHead(model)
    ro = rollout(model, tok)
    _, values = pv.completion_forward(ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
    values.pow(2).mean().backward()
    assert pv.v_head[1].weight.grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    model.zero_grad(set_to_none=True)


def test_save_and_load_the_head_beside_the_model(lab, tmp_path):
    model, tok = lab
    pv = PolicyWithValueHead(model).eval()
    with torch.no_grad():
        pv.v_head[1].weight.normal_()
    pv.save_pretrained(tmp_path)
    assert (tmp_path / HEAD_FILE).exists() and (tmp_path / "config.json").exists()
    again = PolicyWithValueHead.from_pretrained(model, tmp_path).eval()
    ids = torch.tensor([[5, 6, 7]])
    torch.testing.assert_close(again(ids)[1], pv(ids)[1])
    with pytest.raises(FileNotFoundError, match="value head"):
        PolicyWithValueHead.from_pretrained(model, tmp_path / "nowhere")


def test_a_lora_policy_keeps_its_head_outside_the_adapter(lab, tmp_path):
    from peft import LoraConfig, get_peft_model

    model, tok = lab
    import copy

    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    pv = PolicyWithValueHead(peft_model)
    trainable = {n for n, p in pv.named_parameters() if p.requires_grad}
    assert any("lora_" in n for n in trainable) and any(n.startswith("v_head") for n in trainable)
    assert not any("lora_" not in n and not n.startswith("v_head") for n in trainable), "the base stays frozen"
    pv.save_pretrained(tmp_path)
    assert (tmp_path / "adapter_config.json").exists() and (tmp_path / HEAD_FILE).exists()
