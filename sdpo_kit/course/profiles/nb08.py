"""Notebook 08 (scale out and export): the run that is exported, per model.

``lora`` is the main run's LoRA rank (None: every weight trained); ``lora_steps`` the length of the second,
rank-4 LoRA run whose adapter is exported; ``prompts`` the prompts per step, ``group`` the answers per prompt;
``n_check`` the held-out prompts every round trip compares on; ``gguf_quants`` the GGUF files written (none in
the real model's smoke run: ``tests/real/test_real_export.py`` runs that round trip); ``num_threads`` torch's
CPU threads; ``ppo_teacher`` the teacher of the PPO run exported for verl; ``fp16_max_logit_diff`` how far the
fp16 merged model's next-token logits may move (measured on the tiny lab, whose logits are small; None where
it was not measured)."""

import torch

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB

PROFILES = {
    TINY_LAB: dict(   # = configs/demo.yaml
        lora=None, task=dict(name="arithmetic", digits=1, terms=3, n_eval=200),
        lr=3e-4, steps=500, prompts=16, group=8, max_new_tokens=4, lora_steps=10,
        n_check=200, gguf_quants=("f32", "f16", "q8_0"), num_threads=1, fp16_max_logit_diff=1e-2,
        ppo_teacher=dict(teacher_model=TINY_LAB, teacher_lab={"sft_steps": 600}),
        smoke=dict(steps=5, lora_steps=5, n_check=50,
                   ppo_teacher=dict(teacher_model=TINY_LAB, teacher_lab={"sft_steps": 10}))),
    REAL_CPU_MODEL: dict(   # LoRA r=16: the main run has an adapter too
        lora=16, task=dict(name="word_problems", n_eval=50),
        lr=1e-4, steps=30, prompts=4, group=4, max_new_tokens=48, lora_steps=10,
        n_check=50, gguf_quants=("f32", "f16", "q8_0"), num_threads=torch.get_num_threads(), fp16_max_logit_diff=None,
        ppo_teacher=dict(teacher_model=REAL_CPU_MODEL),   # notebook 07's teacher: the same model
        smoke=dict(task=dict(name="word_problems", n_eval=4), steps=1, prompts=1, group=2,
                   max_new_tokens=16, lora_steps=1, n_check=4, num_threads=1, gguf_quants=())),
    T4_MODEL: dict(
        lora=16, task=dict(name="arithmetic", digits=3, terms=4, n_eval=200, answer_rule="auto",
                           system_prompt="Reply with the final number only."),
        lr=2e-5, steps=50, prompts=16, group=8, max_new_tokens=16, lora_steps=10, n_check=200,
        gguf_quants=("f32", "f16", "q8_0"), num_threads=torch.get_num_threads(), fp16_max_logit_diff=None,
        ppo_teacher=dict(teacher_model="Qwen/Qwen2.5-1.5B-Instruct"),
        smoke=dict(steps=5, lora_steps=5, n_check=50)),
}
