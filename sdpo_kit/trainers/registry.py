"""Which trainer runs a config: a registry keyed by ``(algorithm, backend)``.

Each entry names the trainer's own config dataclass (the YAML ``trainer:`` section is checked
against it, key by key) and how to build and run it:

    build(model, tokenizer, reward_funcs, train_rows, config, *, eval_fn, callbacks,
          reward_weights) -> trainer
    run(trainer, resume_from_checkpoint) -> list of metric rows

Entries are ``"module:attribute"`` strings, imported on first use, so looking up the scratch
trainer never imports TRL. Adding an algorithm (VAPOR, SDPO, PPO) is one ``register`` call in
``trainers/__init__.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass


def _resolve(target):
    """An object, or ``"package.module:attribute"`` imported now."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_scratch(trainer, resume_from_checkpoint=None) -> list[dict]:
    """How a scratch trainer runs: ``trainer.train(resume_from_checkpoint=...)`` returns its rows."""
    return trainer.train(resume_from_checkpoint=resume_from_checkpoint)


@dataclass(frozen=True)
class TrainerEntry:
    algorithm: str
    backend: str
    config: str | type          # the trainer's config dataclass
    build: str | Callable        # build(model, tokenizer, reward_funcs, train_rows, config, **kw)
    run: str | Callable = run_scratch

    @property
    def config_class(self) -> type:
        return _resolve(self.config)

    def build_trainer(self, *args, **kwargs):
        return _resolve(self.build)(*args, **kwargs)

    def run_trainer(self, trainer, resume_from_checkpoint=None) -> list[dict]:
        return _resolve(self.run)(trainer, resume_from_checkpoint)


TRAINERS: dict[tuple[str, str], TrainerEntry] = {}


def register(algorithm: str, backend: str, *, config, build, run=run_scratch) -> TrainerEntry:
    """Register (or replace) the trainer for ``(algorithm, backend)``."""
    entry = TrainerEntry(algorithm, backend, config, build, run)
    TRAINERS[(algorithm, backend)] = entry
    return entry


def get_trainer(algorithm: str, backend: str) -> TrainerEntry:
    """The entry for ``(algorithm, backend)``; ValueError listing what is registered."""
    try:
        return TRAINERS[(algorithm, backend)]
    except KeyError:
        known = ", ".join(f"{a}/{b}" for a, b in sorted(TRAINERS))
        raise ValueError(f"no trainer for algorithm={algorithm!r}, backend={backend!r}; "
                         f"registered: {known}") from None


def algorithms() -> list[str]:
    return sorted({a for a, _ in TRAINERS})


def backends(algorithm: str | None = None) -> list[str]:
    return sorted({b for a, b in TRAINERS if algorithm is None or a == algorithm})
