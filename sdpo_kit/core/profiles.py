"""Which model a notebook runs, and which sizes go with it: one rule for every notebook.

    MODEL_NAME = choose_model()                       # $SDPO_KIT_MODEL, else the default for the device
    P = pick_profile(PROFILES, MODEL_NAME, SMOKE)     # that model's settings (SMOKE: its smoke sizes)

Each notebook keeps a table ``PROFILES`` of the settings that follow the model (task, prompts,
completion budget, learning rate, steps, TRL preset, ...), one entry per profile:

    "tiny-lab"       the offline tiny lab on a CPU: seconds
    "smollm2-135m"   SmolLM2-135M-Instruct, a real instruct model, on a CPU (``lab/real_model.py``):
                     fp32, TRL's ``cpu`` preset, no gradient checkpointing, sizes that take minutes
    T4_MODEL         Qwen2.5-0.5B-Instruct on a Colab T4: fp16, LoRA on a 4-bit base through
                     Unsloth, gradient checkpointing; tens of minutes

``$SDPO_KIT_PROFILE`` names the profile outright, whatever the device: ``SDPO_KIT_MODEL=smollm2-135m
SDPO_KIT_PROFILE=smollm2-135m`` on a GPU runs that model's own task and sizes on the GPU path (16 bits,
LoRA, Unsloth's 4-bit base when it is installed), which is how ``make gpu-check`` tests the GPU path
with a model that has no hub to come from and is too small to learn the T4 profile's task.

A profile's ``"smoke"`` entry holds its smoke-mode sizes (``SDPO_KIT_SMOKE=1``, what CI runs), which
replace the full sizes; nothing else differs between the two. The device decides the rest: on CUDA
every model but the tiny lab runs the T4 profile, on a CPU every real model runs the CPU one, so a
model without a profile of its own borrows one, and ``pick_profile`` says which.

Left out on purpose: any size chosen at run time from free memory (``models.preflight`` reports it).
"""

from __future__ import annotations

import os

import torch

TINY_LAB = "tiny-lab"
REAL_CPU_MODEL = "smollm2-135m"
T4_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
ENV = "SDPO_KIT_MODEL"
PROFILE_ENV = "SDPO_KIT_PROFILE"
CHOICES = {TINY_LAB: "the offline tiny lab (CPU, seconds)",
           REAL_CPU_MODEL: "SmolLM2-135M-Instruct, a real instruct model, offline on a CPU (minutes)",
           T4_MODEL: "Qwen2.5-0.5B-Instruct on a GPU such as Colab's T4 (the default there)"}


def choose_model(env=None, cuda: bool | None = None) -> str:
    """``$SDPO_KIT_MODEL`` when set (any name ``models.load_policy`` takes), else the tiny lab on a CPU
    and ``T4_MODEL`` on CUDA."""
    env = os.environ if env is None else env
    cuda = torch.cuda.is_available() if cuda is None else cuda
    return env.get(ENV) or (T4_MODEL if cuda else TINY_LAB)


def profile_key(model: str, cuda: bool | None = None, env=None) -> str:
    """The profile ``model`` runs: ``$SDPO_KIT_PROFILE`` when set; else the tiny lab's own; on CUDA the T4
    profile; on a CPU the real CPU model's."""
    env = os.environ if env is None else env
    if env.get(PROFILE_ENV):
        return env[PROFILE_ENV]
    cuda = torch.cuda.is_available() if cuda is None else cuda
    if model == TINY_LAB:
        return TINY_LAB
    return T4_MODEL if cuda else REAL_CPU_MODEL


def pick_profile(profiles: dict, model: str, smoke: bool = False, *, cuda: bool | None = None,
                 verbose: bool = True) -> dict:
    """``profiles[profile_key(model)]`` with its ``"smoke"`` sizes applied when ``smoke``; prints the
    model, the profile and, when the model borrows another's profile, that it does."""
    key = profile_key(model, cuda)
    if key not in profiles:
        raise KeyError(f"this notebook has no {key!r} profile (profiles: {sorted(profiles)})")
    profile = dict(profiles[key])
    sizes = profile.pop("smoke", {})
    if smoke:
        profile.update(sizes)
    if verbose:
        borrowed = "" if key == model else f" (borrowed: {model!r} has no profile of its own here)"
        print(f"model: {model}   profile: {key}{borrowed}   {'smoke sizes' if smoke else 'full sizes'}")
    return profile
