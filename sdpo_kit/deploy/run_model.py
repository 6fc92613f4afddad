"""A trained run's model loaded back, and two models compared: what every export checks against.

``RUN_DIR`` is what ``sdpo-kit train`` wrote: ``config.yaml`` (how the policy was loaded) and
``model/`` (``core.checkpoint.save_model``: a PEFT run's adapter, or a full model's weights).

An export reads only what it uses from ``config.yaml`` (``run_source``): ``model.name``,
``model.trust_remote_code`` and, for the tiny lab's warm start, ``model.lab`` and the task. The rest
of the run config (trainer, rewards, a task registered in Python) is not validated again: a run
that trained can be exported. A full model's run loads from ``model/`` itself; a LoRA adapter
needs its base, loaded again by name. Anything wrong is an ``ExportError`` whose one line says what.

The base an adapter is merged into is always a plain 16-bit or fp32 copy (``base_load_kwargs``),
never the 4-bit base a run may have trained on: merging into NF4 weights would either fail or
round the merged update back to 4 bits. The adapter learnt against the dequantised NF4 weights,
so the merged model differs from the trained one by the base's quantisation error (what
Unsloth's 16-bit merge does too); ``export.round_trip`` measures the difference.
"""

from __future__ import annotations

from pathlib import Path

import torch

from sdpo_kit.core.config import ModelSection
from sdpo_kit.core.unsloth_patches import fit_to_unsloth


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


def run_source(run_dir) -> tuple[ModelSection, dict]:
    """``(model, task)`` from the run's ``config.yaml``: a ``ModelSection`` holding the keys an export
    uses (``name``, ``trust_remote_code``, ``lab``; the others at their defaults) and the ``task``
    section as written. Only those keys are checked; ExportError names the first that is wrong."""
    import yaml

    path = Path(run_dir) / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ExportError(f"{path}: cannot be read as YAML ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise ExportError(f"{path}: no model section (a mapping with the model's name, as `sdpo-kit train` writes)")
    name, trust, lab = model.get("name"), model.get("trust_remote_code", False), model.get("lab") or {}
    if not isinstance(name, str) or not name:
        raise ExportError(f"{path}: model.name must be a model name or folder, got {name!r}")
    if not isinstance(trust, bool):
        raise ExportError(f"{path}: model.trust_remote_code must be true or false, got {trust!r}")
    if not isinstance(lab, dict):
        raise ExportError(f"{path}: model.lab must be a mapping, got {lab!r}")
    task = data.get("task") or {}
    if not isinstance(task, dict):
        raise ExportError(f"{path}: task must be a mapping, got {task!r}")
    return ModelSection(name=name, trust_remote_code=trust, lab=dict(lab)), dict(task)


def base_load_kwargs(model_config, dtype: torch.dtype | None = None) -> dict:
    """``load_policy`` keywords for the base an export merges into: the run's model without its
    adapter, in ``dtype`` (None: fp32 on a CPU, 16-bit on a GPU), never 4-bit and never through
    Unsloth (whose loader quantises by default), whatever ``model.load_in_4bit`` said in training."""
    return {"lora": False, "load_in_4bit": False, "use_unsloth": False,
            "trust_remote_code": model_config.trust_remote_code, "dtype": dtype}


def _lab_recipe(run_dir, model: ModelSection, task: dict) -> dict:
    """The tiny lab's warm-start recipe for the run (``lab.model.lab_config_for``), from its task."""
    from types import SimpleNamespace

    from sdpo_kit.core.config import ConfigError
    from sdpo_kit.lab.model import lab_config_for
    from sdpo_kit.registry import TASKS, make_task

    name = task.get("name", "arithmetic")
    if name not in TASKS:
        raise ExportError(f"{run_dir}: the tiny lab's warm start (this adapter's base) is made from the run's task, "
                          f"and task {name!r} is not registered here (sdpo_kit.registry.TASKS): export from Python "
                          "after registering it (sdpo_kit.deploy.export.export)")
    try:
        built = make_task(**task)
        return lab_config_for(SimpleNamespace(model=model, task={"name": name, **task}), built)
    except (TypeError, ValueError, ConfigError) as e:
        raise ExportError(f"{run_dir}: the task section cannot rebuild the tiny lab's warm start: {e}") from None


def base_model(run_dir, dtype: torch.dtype | None = None):
    """The run's starting policy (no adapter) and tokenizer, in 16 bits or fp32 (``base_load_kwargs``)."""
    from sdpo_kit.models import TINY_LAB, ModelNotAvailableError, load_policy

    model, task = run_source(run_dir)
    lab = _lab_recipe(run_dir, model, task) if model.name == TINY_LAB else None
    try:
        return load_policy(model.name, lab_config=lab, **base_load_kwargs(model, dtype))
    except ModelNotAvailableError as e:
        raise ExportError(f"{run_dir}: cannot load the run's base model {model.name!r}: {e}") from None


def full_model(run_dir, dtype: torch.dtype | None = None):
    """A full-model run's trained policy and tokenizer, straight from ``model/`` (no base needed)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sdpo_kit.models import finish_tokenizer, resolve_dtype

    model_dir = run_model_dir(run_dir)
    source, _ = run_source(run_dir)
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=resolve_dtype(dtype), use_safetensors=True,
                                                     trust_remote_code=source.trust_remote_code)
        tok = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=source.trust_remote_code)
    except (OSError, ValueError) as e:
        raise ExportError(f"{model_dir} cannot be loaded back as a transformers model: {str(e).splitlines()[0]}") from None
    return fit_to_unsloth(model), finish_tokenizer(tok, model)


def load_run_model(run_dir, dtype: torch.dtype | None = None):
    """The run's trained policy (a LoRA adapter merged into its base) and tokenizer."""
    model_dir = run_model_dir(run_dir)
    if not is_adapter(model_dir):
        model, tok = full_model(run_dir, dtype)
        return model.eval(), tok
    from peft import PeftModel

    base, tok = base_model(run_dir, dtype)
    return PeftModel.from_pretrained(base, model_dir).merge_and_unload().eval(), tok


def comparison_device() -> str:
    """Where a round trip compares two models: the GPU when there is one, else the CPU. Not the CPU beside a
    GPU: once Unsloth is imported, its patched Llama / Qwen forward runs Triton kernels that need CUDA
    tensors, whichever loader made the model (the first GPU run, 2026-11-26)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@torch.no_grad()
def compare_models(ref, got, tok, prompts, max_new_tokens: int = 8) -> dict:
    """``max_logit_diff`` (next-token logits on ``prompts``), ``greedy_agree`` (share of prompts whose
    greedy answers are the same) and ``greedy_equal`` (all of them)."""
    from sdpo_kit.core.sampling import encode_prompts, generate_completions

    enc = encode_prompts(tok, prompts, next(ref.parameters()).device)    # both models on one device
    diff = (ref(**enc).logits[:, -1].float() - got(**enc).logits[:, -1].float()).abs().max().item()
    a = generate_completions(ref, tok, prompts, max_new_tokens=max_new_tokens)
    b = generate_completions(got, tok, prompts, max_new_tokens=max_new_tokens)
    agree = sum(x == y for x, y in zip(a, b)) / len(prompts)
    return {"max_logit_diff": diff, "greedy_agree": agree, "greedy_equal": agree == 1.0}
