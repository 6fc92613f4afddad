"""GPU checks, fast generation: TRL's GRPOTrainer with vLLM colocated (preset ``t4_vllm``), and
``load_policy(..., fast_inference=True)`` through Unsloth. Skipped without CUDA or vllm (a wheel
that must match the machine's torch: tools/gpu_wheels.py --with-vllm).

Each runs in a fresh interpreter: vLLM starts its engine in the process and keeps its share of the GPU.
"""

from __future__ import annotations

from gpu_checks import GPU, ROOT, run_script, skip_unless

pytestmark = [*GPU, skip_unless("vllm")]


@skip_unless("trl")
def test_trl_grpo_with_vllm_colocate(lab_dir, tmp_path, record_property):
    """Two GRPO steps with vLLM generating in the training process: use_vllm stays on, the loss is finite."""
    code = f"""
import math, torch
from sdpo_kit.grpo.trl import build_trl_grpo_trainer
from sdpo_kit.tasks import ArithmeticTask
from sdpo_kit.models import load_policy
from sdpo_kit.rewards import exact_match_reward
model, tok = load_policy({str(lab_dir)!r}, lora=False, dtype="fp16", use_unsloth=False)
rows, _ = ArithmeticTask(n_eval=40).splits()
trainer = build_trl_grpo_trainer(model.float(), tok, exact_match_reward(), rows, preset="t4_vllm",
                                 output_dir={str(tmp_path)!r}, verbose=False, max_steps=2, prompts_per_step=4,
                                 num_generations=4, max_completion_length=4)
assert trainer.args.use_vllm and trainer.args.vllm_mode == "colocate"
trainer.train()
assert all(math.isfinite(r["loss"]) for r in trainer.history if "loss" in r)
print("SDPO_KIT_PEAK_GPU_MIB", torch.cuda.max_memory_allocated() / 2**20)
"""
    _, peak = run_script(code, ROOT, {}, timeout=900)
    record_property("peak_gpu_mib", peak)


@skip_unless("unsloth")
def test_unsloth_fast_inference(lab_dir, record_property):
    """Unsloth loads the model with its vLLM engine when fast_inference=True."""
    code = f"""
import unsloth, torch
from sdpo_kit.models import load_policy
model, tok = load_policy({str(lab_dir)!r}, lora=4, fast_inference=True)
assert getattr(model, "vllm_engine", None) is not None, "no vLLM engine on the model"
print("SDPO_KIT_PEAK_GPU_MIB", torch.cuda.max_memory_allocated() / 2**20)
"""
    _, peak = run_script(code, ROOT, {}, timeout=900)
    record_property("peak_gpu_mib", peak)
