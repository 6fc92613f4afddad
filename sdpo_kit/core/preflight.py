"""A preflight for a GPU run: the device, the dtype it will train in and why, and whether the run fits.

    preflight_report(device, model, run) -> str     the report from stated properties (a pure function)
    estimate_memory(model, run) -> dict              the estimate alone, in bytes
    read_device(), sizes_of(model), hub_model_sizes(name)   the properties, read

``models.preflight(name, completions=..., completion_len=...)`` is what a notebook's config cell
and ``sdpo-kit train`` print: it knows what ``load_policy`` will load (the tiny lab, 4-bit through
Unsloth, LoRA's rank). On a CPU it is one line (``"CPU: tiny lab, fp32, no autocast ..."``).

The estimate of peak GPU memory adds up what a GRPO / SDPO step holds at once:

    weights            Linear layers at their precision (4-bit NF4: 0.5 byte a parameter), the
                       embeddings, norms and head in 16 bits (bitsandbytes leaves them so)
    trainable          LoRA's A and B (or, trained in full, every weight) in fp32, their gradients
                       and AdamW's two moments: 4 + 4 + 8 bytes a parameter
    policy logits      completions x (prompt + completion) x vocabulary x 4 bytes (fp32)
    teacher logits     the same again for a second model's forward (SDPO's teacher, the reference)

Activations, the CUDA context (about 0.3-0.5 GiB) and allocator slack are not counted, so the run is
said to fit only below 80% of the free memory. When it does not, the advice names what shrinks the
largest term: fewer generations, a shorter completion budget, SDPO's
``distillation_micro_batch_size`` for the teacher's logits, chunked log-probs.

Left out on purpose: multi-GPU placement, vLLM's share (``core.fast_generation`` sets it apart up
front: subtract it from the free memory), and measuring: ``make gpu-check`` reports the peaks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sdpo_kit.core.precision import choose_precision

GiB = 2**30
FIT_FRACTION = 0.8   # the estimate leaves activations and the allocator out: keep a fifth free
TRAINABLE_BYTES = 4 + 4 + 8  # fp32 weight, fp32 gradient, AdamW's m and v
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class DeviceProps:
    """What the preflight needs to know about a device (stated in tests, read by ``read_device``)."""

    type: str                              # "cuda" or "cpu"
    name: str = ""
    capability: tuple[int, int] | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None


@dataclass(frozen=True)
class ModelSizes:
    """A causal LM's parameter counts: ``quantizable`` sits in the decoder's Linear layers (what
    4-bit quantises), ``lora_per_rank`` is the sum of in + out features over the LoRA targets."""

    params: int
    quantizable: int
    vocab: int
    lora_per_rank: int


@dataclass(frozen=True)
class RunSizes:
    """One step's sizes: ``completions`` sequences in a forward (prompts x G), their lengths, the
    base's bits (4, 16 or 32), the LoRA rank (None: trained in full), a teacher forward or not."""

    completions: int
    prompt_len: int
    completion_len: int
    weight_bits: int = 16
    lora_rank: int | None = 16
    teacher: bool = False


def read_device(device=None) -> DeviceProps:
    """The current CUDA device's name, capability and memory, or a CPU."""
    if not torch.cuda.is_available() or (device is not None and torch.device(device).type != "cuda"):
        return DeviceProps("cpu", "CPU")
    index = torch.device(device or "cuda").index or 0
    free, total = torch.cuda.mem_get_info(index)
    return DeviceProps("cuda", torch.cuda.get_device_name(index), torch.cuda.get_device_capability(index), total, free)


def sizes_of(model) -> ModelSizes:
    """``ModelSizes`` of a model (real or on the meta device): Linear layers other than the head
    are quantizable; LoRA targets as ``models.LORA_TARGETS``."""
    head = model.get_output_embeddings()
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())  # tied weights once
    quantizable, lora_per_rank = 0, 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module is not head:
            quantizable += module.weight.numel()
            if name.rsplit(".", 1)[-1] in LORA_TARGETS:
                lora_per_rank += module.in_features + module.out_features
    return ModelSizes(params, quantizable, model.get_input_embeddings().weight.shape[0], lora_per_rank)


def hub_model_sizes(name: str) -> ModelSizes | None:
    """``ModelSizes`` of a hub model or folder from its config, built on the meta device (no
    weights, no memory); None when the config cannot be had (offline and not cached)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(name)
    except (OSError, ValueError):
        return None
    with torch.device("meta"):
        return sizes_of(AutoModelForCausalLM.from_config(config))


def estimate_memory(model: ModelSizes, run: RunSizes) -> dict[str, int]:
    """Peak memory of one step by part, in bytes, and ``"total"`` (see the module docstring)."""
    if run.lora_rank is None:  # trained in full: every weight is an fp32 trainable weight
        parts = {"weights": 0, "trainable": model.params * TRAINABLE_BYTES}
    else:
        other_bits = 16 if run.weight_bits < 16 else run.weight_bits
        weights = model.quantizable * run.weight_bits // 8 + (model.params - model.quantizable) * other_bits // 8
        parts = {"weights": weights, "trainable": run.lora_rank * model.lora_per_rank * TRAINABLE_BYTES}
    logits = run.completions * (run.prompt_len + run.completion_len) * model.vocab * 4   # fp32
    parts["policy logits"] = logits
    parts["teacher logits"] = logits if run.teacher else 0
    parts["total"] = sum(parts.values())
    return parts


def advice(parts: dict[str, int], run: RunSizes) -> list[str]:
    """What would shrink the largest terms, largest first."""
    out = []
    if parts["policy logits"] + parts["teacher logits"] >= parts["total"] / 2:
        out.append(f"fewer generations or prompts per step: the logits grow with the {run.completions} completions")
        out.append(f"a shorter completion budget (max_completion_length, now {run.completion_len})")
        if run.teacher:
            out.append("distillation_micro_batch_size: the teacher's logits a micro-batch at a time (SDPO)")
        out.append("chunked log-probs (core.logprobs.token_logprobs chunk_rows; TRL's fused log-prob head)")
    if parts["weights"] + parts["trainable"] > parts["total"] / 2:
        out.append("a 4-bit base with LoRA (load_in_4bit=True)" if run.lora_rank is None or run.weight_bits > 4
                   else "a smaller model")
    return out


def _gib(n: int | None) -> str:
    if n is None:
        return "unknown"
    return f"{n / GiB:.2f} GiB" if n >= GiB / 10 else f"{n / 2**20:.1f} MiB"


def preflight_report(device: DeviceProps, model: ModelSizes | None = None, run: RunSizes | None = None, *,
                     label: str = "the run", mixed_precision: str = "auto") -> str:
    """The preflight text for stated device properties, model and run sizes."""
    precision = choose_precision(device.type, device.capability, mixed_precision)
    if device.type != "cuda":
        return f"{device.type.upper()}: {label}, {precision.reason}"
    cc = "unknown" if device.capability is None else ".".join(map(str, device.capability))
    lines = [f"GPU: {device.name}, compute capability {cc}",
             f"  trains in: {precision.reason}",
             f"  memory: {_gib(device.free_bytes)} free of {_gib(device.total_bytes)}"]
    if model is None or run is None:
        lines.append(f"  peak-memory estimate: model sizes unknown for {label}")
        return "\n".join(lines)
    parts = estimate_memory(model, run)
    bits = {4: "4-bit", 16: "16-bit", 32: "fp32"}.get(run.weight_bits, f"{run.weight_bits}-bit")
    adapter = f"LoRA r={run.lora_rank}" if run.lora_rank is not None else "full fine-tune"
    lines.append(f"  peak-memory estimate for {label} ({model.params / 1e6:.1f}M parameters, {bits} base, "
                 f"{adapter}, {run.completions} completions x ({run.prompt_len} + {run.completion_len}) tokens, "
                 f"vocabulary {model.vocab}):")
    names = {"weights": f"weights ({bits} Linear layers, 16-bit rest)",
             "trainable": "trainable weights, gradients, AdamW (fp32)",
             "policy logits": "policy logits (fp32)", "teacher logits": "teacher logits (fp32)"}
    lines += [f"    {names[k]:<46} {_gib(v)}" for k, v in parts.items() if k != "total" and v]
    total = parts["total"]
    if device.free_bytes is None:
        verdict = "free memory unknown"
    elif total <= FIT_FRACTION * device.free_bytes:
        verdict = f"fits ({total / device.free_bytes:.0%} of free; activations not counted)"
    else:
        verdict = f"may not fit ({total / device.free_bytes:.0%} of free, over {FIT_FRACTION:.0%})"
    lines.append(f"    {'total':<46} {_gib(total)}: {verdict}")
    if device.free_bytes is not None and total > FIT_FRACTION * device.free_bytes:
        lines += [f"  try: {a}" for a in advice(parts, run)]
    return "\n".join(lines)
