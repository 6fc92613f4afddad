"""GPU check, export: a LoRA run trained on a 4-bit (bitsandbytes NF4) base, merged into a 16-bit copy
of the base (``deploy.run_model.base_load_kwargs``), and its round trip.

The run is trained here through the library (transformers' path, 4-bit, LoRA r=4) on the tiny lab
saved as a plain folder, then written the way ``sdpo-kit train`` writes a run (config.yaml, model/).
Skipped without CUDA or bitsandbytes.
"""

from __future__ import annotations

import json

import torch
from gpu_checks import GPU, skip_unless

from sdpo_kit.core.checkpoint import save_model
from sdpo_kit.core.config import dump_config
from sdpo_kit.deploy.export import export, round_trip
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.models import load_policy
from sdpo_kit.registry import config_from_dict
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.tasks import ArithmeticTask

pytestmark = [*GPU, skip_unless("bitsandbytes")]
PROMPTS = [[{"role": "user", "content": q}] for q in ("1+2+3=", "9+9+9=", "4+0+7=", "5+5+1=")]


def test_merge_of_a_4bit_lora_run_goes_into_a_16bit_base(lab_dir, tmp_path, record_property):
    """Train 3 GRPO steps on the 4-bit base; export merged fp16: no quantization in the export, fp16
    weights, and the round trip against the run's own 16-bit merge agrees (greedy answers and logits)."""
    cfg = config_from_dict({"model": {"name": str(lab_dir), "load_in_4bit": True, "lora": 4},
                            "task": {"name": "arithmetic", "n_eval": 40}, "output_dir": str(tmp_path / "run"),
                            "trainer": {"max_steps": 3, "prompts_per_step": 4, "num_generations": 4,
                                        "max_completion_length": 4, "eval_every": 0}})
    model, tok = load_policy(str(lab_dir), load_in_4bit=True, lora=4, use_unsloth=False)
    rows, _ = ArithmeticTask(n_eval=40).splits()
    GRPOScratchTrainer(model, tok, [exact_match_reward()], rows, cfg.trainer).train()
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    dump_config(cfg, run / "config.yaml")
    save_model(model, run / "model", tok)

    out = export(run, "merged", tmp_path / "merged", dtype="fp16")
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config.get("dtype", config.get("torch_dtype")) == "float16"
    rt = round_trip(run, out, PROMPTS)
    record_property("round_trip", rt)
    assert rt["dtype"] == "float16" and rt["max_logit_diff"] < 0.05 and rt["greedy_agree"] >= 0.75, rt
    lora = round_trip(run, export(run, "lora", tmp_path / "adapter"), PROMPTS)
    assert lora["max_logit_diff"] < 1e-4 and lora["greedy_equal"], lora
    del model
    torch.cuda.empty_cache()
