"""An export merges a LoRA adapter into a plain 16-bit or fp32 copy of the base, never the 4-bit base
a run may have trained on, and never through Unsloth (whose loader quantises by default).

What a CPU can check: the load arguments, and a whole export of a run whose config says
``load_in_4bit: true`` for a hub-style model (the tiny lab saved as a folder), with Unsloth made to
look present and its loader made to fail: the merge must go through transformers in fp32 and round-trip.
The merge from a real NF4 run is ``make gpu-check``'s (tests/gpu/test_gpu_export.py).
"""

from __future__ import annotations

import torch

from sdpo_kit import models
from sdpo_kit.core.checkpoint import save_model
from sdpo_kit.core.config import ModelSection, dump_config
from sdpo_kit.deploy.export import export, round_trip
from sdpo_kit.deploy.run_model import base_load_kwargs
from sdpo_kit.registry import config_from_dict

PROMPTS = [[{"role": "user", "content": q}] for q in ("1+2+3=", "9+9+9=", "4+0+7=")]


def test_the_base_is_loaded_in_16_bits_or_fp32_without_unsloth():
    kw = base_load_kwargs(ModelSection(name="Qwen/Qwen2.5-0.5B-Instruct", load_in_4bit=True, lora=16))
    assert kw["load_in_4bit"] is False and kw["use_unsloth"] is False and kw["lora"] is False
    assert base_load_kwargs(ModelSection(), torch.float16)["dtype"] is torch.float16


def test_a_4bit_lora_run_exports_merged_through_transformers(tmp_path, monkeypatch):
    """The run: the tiny lab as a folder, a LoRA adapter with non-zero B, config.yaml saying 4-bit.
    Unsloth looks present but its loader fails, and 4-bit on a CPU would raise: the merged fp32
    export still loads back with the run's logits and greedy answers."""
    model, tok = models.load_policy("tiny-lab")
    base_dir = tmp_path / "base"
    model.save_pretrained(base_dir, safe_serialization=True)
    tok.save_pretrained(base_dir)
    peft = models.add_peft_lora(model, models.lora_kwargs(4))
    torch.manual_seed(0)
    for name, p in peft.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)  # B = 0 at init would merge to nothing
    run = tmp_path / "run"
    cfg = config_from_dict({"model": {"name": str(base_dir), "load_in_4bit": True, "lora": 4},
                            "task": {"name": "arithmetic", "n_eval": 40}, "output_dir": str(run)})
    run.mkdir()
    dump_config(cfg, run / "config.yaml")
    save_model(peft, run / "model", tok)

    def unsloth_loader(*args, **kwargs):
        raise AssertionError("the export's base went through Unsloth's loader (4-bit by default)")

    monkeypatch.setattr(models, "_unsloth_available", lambda: True)
    monkeypatch.setattr(models, "_load_unsloth", unsloth_loader)
    out = export(run, "merged", tmp_path / "merged", dtype="fp32")
    rt = round_trip(run, out, PROMPTS)
    assert rt["dtype"] == "float32" and rt["max_logit_diff"] < 1e-4 and rt["greedy_equal"], rt
    # the adapter changed the model: the merge is not the base
    base_rt = round_trip(run, base_dir, PROMPTS)
    assert base_rt["max_logit_diff"] > 1e-3, base_rt
