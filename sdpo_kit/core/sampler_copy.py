"""Sampling from a bfloat16 copy of the policy: faster on a CPU with bf16 matmuls, and off-policy.

    SamplerCopy(policy, dtype)   a plain transformers model holding the policy's weights in ``dtype``, LoRA
                                 folded in (W + s B A); ``refresh()`` copies them again, in place
    SAMPLING_DTYPES              the dtypes ``trainer.sampling_dtype`` names: float32 (the policy itself) or bfloat16
    SAMPLING_CHOICES             its values: those, or ``auto``
    resolve_sampling_dtype(...)  what ``auto`` is here: bfloat16 on a CPU that multiplies bf16 in hardware
                                 (AVX-512 BF16 or AMX), when the loss can correct for it; float32 otherwise

Why: a decoding step multiplies a few rows by every weight, so it is bound by reading the weights and by
the row products; bf16 halves the bytes, and a CPU with AVX-512 BF16 multiplies them faster
(``benchmarks/results/real_decode.json`` measures the real model's batch from the copy against fp32, on the
machine it names: ``bf16_s`` against ``merged_s``). A CPU without bf16 in hardware runs them slower than
fp32: the option is off unless a config asks for it, and ``auto`` takes it only where the CPU says it
multiplies bf16 (its ``avx512_bf16`` or ``amx_bf16`` flag).

The price: the tokens come from pi_bf16, a slightly different policy (rounded weights: some sampled rows
differ from fp32's; ``benchmarks/results/real_decode.json`` measures the share that stays the same on the
real model, ``rows_identical_bf16``), so the loss no longer samples from the policy it trains. GRPO
corrects it as TRL corrects vLLM's samples (``grpo.loss.sampler_weights``: importance weights pi / pi_bf16
per token or per sequence, truncated or masked), from the log-probs ``decode`` returns for the tokens it
drew. The copy is refreshed before every batch, so it is never an older policy.
"""

from __future__ import annotations

import torch

SAMPLING_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
SAMPLING_CHOICES = (*SAMPLING_DTYPES, "auto")
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")   # /proc/cpuinfo's names for bf16 dot products in hardware


def cpu_bf16_flags(cpuinfo: str | None = None) -> list[str]:
    """The flags of ``BF16_CPU_FLAGS`` this CPU reports (Linux's ``/proc/cpuinfo``; elsewhere none known)."""
    if cpuinfo is None:
        try:
            cpuinfo = open("/proc/cpuinfo").read()
        except OSError:
            return []
    flags = set(next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                      if line.startswith("flags")), []))
    return [f for f in BF16_CPU_FLAGS if f in flags]


def resolve_sampling_dtype(name: str, device, correctable: bool = True, cpuinfo: str | None = None) -> tuple[str, str]:
    """(the dtype to sample in, why) for ``trainer.sampling_dtype`` = ``name`` on ``device``.

    ``float32`` and ``bfloat16`` are themselves; ``auto`` is bfloat16 on a CPU whose flags say it multiplies bf16
    (``cpu_bf16_flags``) when the loss can correct for another sampler (``correctable``: GRPO's can), and
    float32 otherwise: on a GPU the policy already samples in its 16-bit autocast, and on a CPU without bf16
    matmuls a bf16 copy samples more slowly than fp32. ValueError for an unknown name."""
    if name not in SAMPLING_CHOICES:
        raise ValueError(f"sampling_dtype must be one of {SAMPLING_CHOICES}, got {name!r}")
    if name != "auto":
        return name, "set in the config"
    if not correctable:
        return "float32", "auto: this loss has no correction for another sampler"
    if torch.device(device).type != "cpu":
        return "float32", f"auto: on {torch.device(device).type} the policy samples in its own precision"
    flags = cpu_bf16_flags(cpuinfo)
    if not flags:
        return "float32", "auto: this CPU reports no bf16 matmuls (avx512_bf16, amx_bf16)"
    return "bfloat16", f"auto: this CPU multiplies bf16: {', '.join(flags)}"


def _plain_name(name: str) -> str:
    """A PEFT-wrapped parameter's name as the plain model has it (``q_proj.base_layer.weight`` -> ``q_proj.weight``)."""
    return name.replace(".base_layer.", ".")


class SamplerCopy:
    """A ``dtype`` copy of ``policy`` to sample from (``core.sampling.sample(copy.model, ...)``).

    ``policy``: a transformers causal LM, or a PEFT model around one whose LoRA ``merged_lora`` can fold
    (anything else is refused: the copy would not be the policy). The copy is built once from the policy's
    config (eager attention) and filled by ``refresh``, which sampling calls before each
    batch: every weight, or W + s B A for a LoRA layer, cast into the copy's tensors in place."""

    def __init__(self, policy, dtype: torch.dtype = torch.bfloat16):
        from transformers import AutoModelForCausalLM

        from sdpo_kit.core.sampling import generation_model, mergeable_lora_layers

        if hasattr(policy, "disable_adapter") and mergeable_lora_layers(policy) is None:
            raise ValueError("sampling_dtype: this policy's adapters cannot be folded into a plain copy (not fp32 LoRA "
                             "on nn.Linear layers); sample in float32")
        hf = generation_model(policy)
        self.policy, self.dtype = policy, dtype
        device = next(policy.parameters()).device
        # eager attention: on a CPU, sdpa's bf16 kernel takes a decoding step's attention several times longer
        self.model = AutoModelForCausalLM.from_config(hf.config, dtype=dtype, attn_implementation="eager")
        self.model.to(device).eval().requires_grad_(False)
        self.model.generation_config = hf.generation_config
        self._params = dict(self.model.named_parameters())
        self.refresh(everything=True)

    @torch.no_grad()
    def refresh(self, everything: bool = False) -> None:
        """Copy the policy's current weights (LoRA folded) into the copy, cast to its dtype: the weights that
        train and the LoRA layers' bases (the frozen rest never changes; ``everything`` copies it too)."""
        from sdpo_kit.core.sampling import generation_model, mergeable_lora_layers

        hf = generation_model(self.policy)
        deltas = {}
        for layer, adapter in mergeable_lora_layers(self.policy) or []:
            deltas[id(layer.get_base_layer().weight)] = layer.get_delta_weight(adapter)   # (out, in) s B A
        filled = set()
        for name, p in hf.named_parameters():
            if "lora_" in name:
                continue
            target = self._params.get(_plain_name(name).removeprefix("base_model.model."))
            if target is None:
                raise ValueError(f"SamplerCopy: the copy has no parameter for the policy's {name}")
            if everything or p.requires_grad or id(p) in deltas:
                target.copy_(p + deltas[id(p)] if id(p) in deltas else p)
            filled.add(id(target))
        missing = [n for n, t in self._params.items() if id(t) not in filled]
        if missing:
            raise ValueError(f"SamplerCopy: the policy has no weights for the copy's {missing[:3]}")
