"""The preflight (``core.preflight``, ``models.preflight``) from stated device properties: the device line, the dtype and
why, free memory, the peak-memory estimate worked by hand, the advice when it does not fit, one line
on a CPU; and the model sizes read on the meta device against the real model."""

from __future__ import annotations

import torch

from sdpo_kit.core.preflight import DeviceProps, GiB, ModelSizes, RunSizes, estimate_memory, preflight_report, sizes_of
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.models import add_peft_lora, lora_kwargs, model_sizes, preflight

T4 = DeviceProps("cuda", "Tesla T4", (7, 5), total_bytes=15 * GiB, free_bytes=14 * GiB)
A100 = DeviceProps("cuda", "NVIDIA A100-SXM4-40GB", (8, 0), total_bytes=40 * GiB, free_bytes=39 * GiB)
SMALL = ModelSizes(params=1000, quantizable=800, vocab=10, lora_per_rank=50)


def test_the_estimate_worked_by_hand():
    """4-bit base, LoRA r=4, a teacher, 2 completions x (3 + 2) tokens, vocabulary 10:
        weights   800 x 4 bits = 400 B  +  200 others x 16 bits = 400 B    ->  800
        trainable 4 x 50 LoRA parameters x (4 + 4 + 8) B                   -> 3200
        logits    2 x (3 + 2) x 10 x 4 B                                   ->  400, and 400 for the teacher"""
    parts = estimate_memory(SMALL, RunSizes(2, 3, 2, weight_bits=4, lora_rank=4, teacher=True))
    assert parts == {"weights": 800, "trainable": 3200, "policy logits": 400, "teacher logits": 400, "total": 4800}
    full = estimate_memory(SMALL, RunSizes(2, 3, 2, weight_bits=16, lora_rank=None))
    assert full["weights"] == 0 and full["trainable"] == 1000 * 16 and full["teacher logits"] == 0


def test_a_t4_report_names_the_device_the_dtype_and_why_and_the_memory():
    qwen = ModelSizes(params=494_032_768, quantizable=357_826_560, vocab=151_936, lora_per_rank=550_000)
    text = preflight_report(T4, qwen, RunSizes(64, 64, 16, weight_bits=4, teacher=True), label="Qwen/Qwen2.5-0.5B")
    assert "Tesla T4" in text and "compute capability 7.5" in text
    assert "fp16 autocast + gradient scaler" in text and "7.5 < 8.0" in text
    assert "14.00 GiB free of 15.00 GiB" in text
    # 64 x 80 x 151936 x 4 B = 2.90 GiB of logits, twice: fits in 14 GiB
    assert text.count("2.90 GiB") == 2 and "fits" in text and "try:" not in text


def test_a_run_that_does_not_fit_gets_the_advice_that_shrinks_it():
    qwen = ModelSizes(params=494_032_768, quantizable=357_826_560, vocab=151_936, lora_per_rank=550_000)
    text = preflight_report(T4, qwen, RunSizes(256, 256, 512, weight_bits=4, teacher=True))
    assert "may not fit" in text
    for hint in ("fewer generations", "shorter completion budget", "distillation_micro_batch_size", "chunked log-probs"):
        assert hint in text, hint


def test_ampere_trains_in_bf16_and_a_cpu_says_one_line():
    assert "bf16 autocast" in preflight_report(A100, SMALL, RunSizes(2, 3, 2))
    line = preflight_report(DeviceProps("cpu", "CPU"), label="tiny lab")
    assert line.startswith("CPU: tiny lab, fp32, no autocast") and "\n" not in line
    if not torch.cuda.is_available():  # this machine
        assert preflight("tiny-lab", completions=64, completion_len=4).startswith("CPU: tiny lab")


def test_sizes_on_the_meta_device_are_the_real_model_s():
    """The tiny lab built on the meta device has the real model's counts; r x lora_per_rank is the
    number of parameters PEFT adds at rank r."""
    tok = build_tokenizer()
    meta, real = model_sizes("tiny-lab"), sizes_of(build_model(tok))
    assert meta == real and meta.vocab == len(tok)
    peft = add_peft_lora(build_model(tok), lora_kwargs(4))
    assert sum(p.numel() for p in peft.parameters() if p.requires_grad) == 4 * meta.lora_per_rank
