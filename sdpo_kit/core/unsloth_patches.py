"""Models that did not come through Unsloth's loader, in a process where Unsloth has loaded one.

Unsloth speeds a model up by replacing its architecture's ``forward`` functions on the classes
(``LlamaForCausalLM.forward``, ``LlamaAttention.forward``, ...), so once it has loaded one Llama every
Llama in the process runs Unsloth's code: the tiny lab built in code, a reference model loaded by
plain transformers for an export's round trip, a GGUF file read back. That code runs Triton kernels
(CUDA tensors only) and reads what Unsloth's ``from_pretrained`` gives the models it loads: the
rotary embedding on every attention layer and a ``max_seq_length`` on the model. Without them
generation fails (``Pointer argument cannot be accessed from Triton (cpu tensor?)``, ``'LlamaAttention'
object has no attribute 'rotary_emb'``: the GPU run of 2026-11-27).

``fit_to_unsloth(model)`` gives such a model the same: on the GPU, one rotary embedding shared by
its attention layers (rebuilt with Unsloth's class when the model was built before the patch), a
``max_seq_length``, and a config whose dtype is the one its weights are in: Unsloth's forward casts the
hidden states to the config's dtype, so an fp16 export read back and cast to fp32 for a round trip failed
(``expected mat1 and mat2 to have the same dtype``: the GPU run of 2026-11-28). A model whose class Unsloth
has not patched comes back as it was.
``run_without_unsloth`` runs what must not meet the patch (the tiny lab's CPU warm start) in a process
of its own.
"""

from __future__ import annotations

import sys

import torch


def _core(model):
    """The transformers model under a PEFT wrapper (or ``model`` itself)."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


def patched_by_unsloth(model) -> bool:
    """Whether ``model``'s class (or ``model``, a class) runs a ``forward`` that Unsloth put there."""
    cls = model if isinstance(model, type) else type(_core(model))
    return getattr(getattr(cls, "forward", None), "__module__", "").startswith("unsloth")


_CHILD = """import pickle, sys
from importlib import import_module
module, name, args, kwargs = pickle.load(sys.stdin.buffer)
getattr(import_module(module), name)(*args, **kwargs)
"""


def run_without_unsloth(module: str, name: str, *args, **kwargs) -> None:
    """Call ``module.name(*args, **kwargs)`` in a fresh Python process, where Unsloth's patches are not:
    for work that must run on the CPU as it does everywhere else (the tiny lab's warm start, trained
    bit for bit as on any machine). Arguments are pickled; the process's output is printed here when it
    ends (a notebook shows it). RuntimeError, with the end of its output, when it fails."""
    import os
    import pickle
    import subprocess
    from pathlib import Path

    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])   # the sdpo_kit this process imported
    if package_root not in sys.path:   # an installed sdpo_kit is found as it is; a source tree is put first
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", _CHILD], input=pickle.dumps((module, name, args, kwargs)), env=env,
                          capture_output=True)
    out = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode:
        raise RuntimeError(f"{module}.{name} failed in a process of its own (exit {done.returncode}):\n{out[-3000:]}")
    if out.strip():
        print(out.rstrip(), flush=True)


def fit_to_unsloth(model, max_seq_length: int | None = None):
    """``model``, ready for the forward functions Unsloth patched into its class: moved to the GPU if on the CPU,
    every attention layer given the model's rotary embedding (of the class Unsloth put in the modeling
    module, rebuilt from the config when it is the original), ``max_seq_length`` (default the config's
    ``max_position_embeddings``) set on each level that lacks it, the config's dtype set to the embedding's
    weight's (Unsloth casts hidden states to it). A no-op for a class Unsloth has not
    patched. Returns the model (moved in place)."""
    if not patched_by_unsloth(model):
        return model
    if torch.cuda.is_available() and next(model.parameters()).device.type == "cpu":   # placed ones stay
        model = model.to("cuda")
    core = _core(model)
    inner = getattr(core, "model", None)
    rotary = getattr(inner, "rotary_emb", None)
    if rotary is not None:
        module = sys.modules.get(type(inner).__module__)
        patched_class = getattr(module, type(rotary).__name__, None)
        if isinstance(patched_class, type) and not isinstance(rotary, patched_class):
            device = next(core.parameters()).device
            with torch.device(device):
                rotary = inner.rotary_emb = patched_class(config=core.config)
        for layer in getattr(inner, "layers", ()):
            attention = getattr(layer, "self_attn", None)
            if attention is not None:
                attention.rotary_emb = rotary
    embed = core.get_input_embeddings() if hasattr(core, "get_input_embeddings") else None
    dtype = getattr(getattr(embed, "weight", None), "dtype", None)
    said = core.config.dtype
    if isinstance(said, str):
        said = getattr(torch, said, None)
    if dtype is not None and dtype.is_floating_point and said != dtype:
        core.config.dtype = dtype   # Unsloth casts the hidden states to the config's dtype: the weights' one
    length = max_seq_length or getattr(core.config, "max_position_embeddings", 2048)
    level = core
    while level is not None:
        if getattr(level, "max_seq_length", None) is None:
            level.max_seq_length = length
        level = getattr(level, "model", None)
    return model
