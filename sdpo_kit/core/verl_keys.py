"""What an algorithm's verl mapping writes into, and the few keys every mapping shares.

    VerlPaths       where the run's files are, as verl's workers will see them
    VerlSettings    verl key -> value, and what verl's config cannot say ("our key: why")
    ACTOR, ROLLOUT  verl's key prefixes for the actor and the rollout
    schedule(...)   our learning-rate schedule in verl's optimizer keys

Each algorithm's ``verl.py`` (``grpo/verl.py``, ``ppo/verl.py``) fills a ``VerlSettings`` for its own keys;
``deploy/verl_config.py`` adds what every run has (data, model, lengths, cadence) and composes it with verl.
Nothing here imports verl.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"


@dataclass
class VerlPaths:
    """Where the run's files are, as verl's workers will see them (absolute, or ``$D/...`` in the script)."""

    train_files: str
    val_files: str
    reward_module: str
    model: str
    teacher_model: str | None = None


@dataclass
class VerlSettings:
    values: dict = field(default_factory=dict)    # verl key -> value, in order
    unmapped: list[str] = field(default_factory=list)  # "our key: why verl's config cannot say it"


def schedule(name: str, key: str, s: VerlSettings, roles=(ACTOR,), kwargs: dict | None = None) -> None:
    for role in roles:
        s.values[f"{role}.optim.lr_scheduler_type"] = name if name in ("constant", "cosine") else "constant"
    if name not in ("constant", "cosine"):
        s.unmapped.append(f"trainer.{key}={name}: verl schedules constant or cosine; constant written")
    kwargs = dict(kwargs or {})
    for ours, theirs in (("warmup_steps", "lr_warmup_steps"), ("num_cycles", "num_cycles")):
        if ours in kwargs:
            value = kwargs.pop(ours)
            for role in roles:
                s.values[f"{role}.optim.{theirs}"] = value
    if kwargs:
        s.unmapped.append(f"trainer.scheduler_kwargs {sorted(kwargs)}: no verl counterpart")
