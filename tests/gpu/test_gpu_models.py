"""GPU checks, loading: Unsloth's import order, and the tiny lab loaded as a hub model would be, in fp16
and in 4-bit through bitsandbytes (transformers' path) and through Unsloth (its 4-bit default).

Each Unsloth check runs in a fresh interpreter: Unsloth patches transformers and TRL on import, and
the import order is the point. Skipped without CUDA, or without the package a check needs.
"""

from __future__ import annotations

import torch
from gpu_checks import GPU, ROOT, run_script, skip_unless

from sdpo_kit.core.sampling import encode_prompts, generate_completions
from sdpo_kit.models import load_policy

pytestmark = GPU
PROMPTS = [[{"role": "user", "content": q}] for q in ("1+2+3=", "9+9+9=", "4+0+7=")]


def finite_logits(model, tok) -> bool:
    enc = encode_prompts(tok, PROMPTS, "cuda")
    with torch.no_grad():
        return bool(torch.isfinite(model(**enc).logits.float()).all())


@skip_unless("unsloth")
def test_unsloth_import_order_gives_the_patched_trainer():
    """unsloth first, then our trainers: SDPOTRLTrainer derives from Unsloth's patched GRPOTrainer."""
    out, _ = run_script("import unsloth, trl\nfrom sdpo_kit.sdpo.trl import SDPOTRLTrainer\n"
                        "print('MRO', SDPOTRLTrainer.__mro__[1] is trl.GRPOTrainer, 'Unsloth' in trl.GRPOTrainer.__name__)",
                        ROOT, {}, timeout=600)
    assert [line for line in out.splitlines() if line.startswith("MRO")][-1] == "MRO True True"


def test_tiny_lab_in_fp16_with_lora(lab_dir):
    """fp16 base on the GPU, the LoRA weights in fp32 (PEFT upcasts adapters), finite logits, greedy answers."""
    model, tok = load_policy(str(lab_dir), dtype="fp16", lora=4, use_unsloth=False)
    base = {p.dtype for n, p in model.named_parameters() if "lora_" not in n}
    lora = {p.dtype for n, p in model.named_parameters() if "lora_" in n}
    assert next(model.parameters()).is_cuda and base == {torch.float16} and lora == {torch.float32}
    assert finite_logits(model, tok)
    assert len(generate_completions(model, tok, PROMPTS, max_new_tokens=4)) == len(PROMPTS)


@skip_unless("bitsandbytes")
def test_tiny_lab_in_4bit_through_bitsandbytes(lab_dir):
    """NF4 Linear layers (bitsandbytes), a LoRA adapter on top, finite logits."""
    import bitsandbytes as bnb

    model, tok = load_policy(str(lab_dir), load_in_4bit=True, lora=4, use_unsloth=False)
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())
    assert finite_logits(model, tok)


@skip_unless("unsloth")
def test_tiny_lab_through_unsloth(lab_dir):
    """load_policy's Unsloth branch (4-bit + LoRA) on the tiny lab: loads, finite logits, generates."""
    code = (f"import unsloth, torch\nfrom sdpo_kit.models import load_policy\n"
            f"from sdpo_kit.core.sampling import generate_completions\n"
            f"model, tok = load_policy({str(lab_dir)!r}, lora=4)\n"
            f"print('TEXTS', generate_completions(model, tok, ['1+2+3='], max_new_tokens=4))\n"
            f"print('SDPO_KIT_PEAK_GPU_MIB', torch.cuda.max_memory_allocated() / 2**20)\n")
    out, _ = run_script(code, ROOT, {}, timeout=600)
    assert "TEXTS" in out
