"""A trained run's model loaded back, and two models compared: what every export checks against.

``RUN_DIR`` is what ``sdpo-kit train`` wrote: ``config.yaml`` (how the policy was loaded) and
``model/`` (``core.checkpoint.save_model``: a PEFT run's adapter, or a full model's weights).

The base an adapter is merged into is always a plain 16-bit or fp32 copy (``base_load_kwargs``),
never the 4-bit base a run may have trained on: merging into NF4 weights would either fail or
round the merged update back to 4 bits. The adapter learnt against the dequantised NF4 weights,
so the merged model differs from the trained one by the base's quantisation error (what
Unsloth's 16-bit merge does too); ``export.round_trip`` measures the difference.
"""

from __future__ import annotations

from pathlib import Path

import torch


class ExportError(ValueError):
    """An export that cannot be made from this input (the message says why and what would work)."""


def run_model_dir(run_dir) -> Path:
    run_dir = Path(run_dir)
    model_dir = run_dir / "model"
    if not run_dir.is_dir():
        raise ExportError(f"{run_dir}: no such run directory")
    if not (model_dir / "adapter_model.safetensors").exists() and not any(model_dir.glob("model*.safetensors")):
        raise ExportError(f"{run_dir} holds no trained model (expected model/ with adapter_model.safetensors or "
                          f"model*.safetensors, as `sdpo-kit train` writes)")
    if not (run_dir / "config.yaml").exists():
        raise ExportError(f"{run_dir} has no config.yaml: cannot tell how the base model was loaded")
    return model_dir


def is_adapter(model_dir: Path) -> bool:
    return (Path(model_dir) / "adapter_model.safetensors").exists()


def base_load_kwargs(model_config, dtype: torch.dtype | None = None) -> dict:
    """``load_policy`` keywords for the base an export merges into: the run's model without its
    adapter, in ``dtype`` (None: fp32 on a CPU, 16-bit on a GPU), never 4-bit and never through
    Unsloth (whose loader quantises by default), whatever ``model.load_in_4bit`` said in training."""
    return {"lora": False, "load_in_4bit": False, "use_unsloth": False,
            "trust_remote_code": model_config.trust_remote_code, "dtype": dtype}


def base_model(run_dir, dtype: torch.dtype | None = None):
    """The run's starting policy (no adapter) and tokenizer, in 16 bits or fp32 (``base_load_kwargs``)."""
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.lab.tasks import make_task
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import load_config

    cfg = load_config(Path(run_dir) / "config.yaml")
    return load_policy(cfg.model.name, lab_config=lab_config_for(cfg, make_task(**cfg.task)),
                       **base_load_kwargs(cfg.model, dtype))


def load_run_model(run_dir, dtype: torch.dtype | None = None):
    """The run's trained policy (adapter merged in) and tokenizer."""
    model_dir = run_model_dir(run_dir)
    base, tok = base_model(run_dir, dtype)
    if is_adapter(model_dir):
        from peft import PeftModel

        model = PeftModel.from_pretrained(base, model_dir).merge_and_unload()
    else:
        from sdpo_kit.core.checkpoint import load_model_weights

        load_model_weights(base, model_dir)
        model = base
    return model.eval(), tok



@torch.no_grad()
def compare_models(ref, got, tok, prompts, max_new_tokens: int = 8) -> dict:
    """``max_logit_diff`` (next-token logits on ``prompts``), ``greedy_agree`` (share of prompts whose
    greedy answers are the same) and ``greedy_equal`` (all of them)."""
    from sdpo_kit.core.sampling import encode_prompts, generate_completions

    enc = encode_prompts(tok, prompts)
    diff = (ref(**enc).logits[:, -1].float() - got(**enc).logits[:, -1].float()).abs().max().item()
    a = generate_completions(ref, tok, prompts, max_new_tokens=max_new_tokens)
    b = generate_completions(got, tok, prompts, max_new_tokens=max_new_tokens)
    agree = sum(x == y for x, y in zip(a, b)) / len(prompts)
    return {"max_logit_diff": diff, "greedy_agree": agree, "greedy_equal": agree == 1.0}
