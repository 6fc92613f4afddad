"""Which trainer runs a config: a registry keyed by ``(algorithm, backend)``.

Each entry names the trainer's own config dataclass (the YAML ``trainer:`` section is checked
against it, key by key) and how to build and run it:

    build(model, tokenizer, reward_funcs, train_rows, config, *, eval_fn, callbacks,
          reward_weights) -> trainer
    run(trainer, resume_from_checkpoint) -> list of metric rows

Entries are ``"module:attribute"`` strings, imported on first use. Each config class lives in its
algorithm's ``config.py``, which imports no TRL, so checking a config never imports TRL, on either
backend; the TRL trainers' modules are imported when the trainer is built, after the model is loaded
(and Unsloth, on a GPU, has patched TRL). The registrations at the bottom of this file are the whole list:
adding an algorithm is one ``register`` call there.

``load_config`` / ``config_from_dict`` read a YAML run config and check its ``trainer:`` section
against the registered trainer's dataclass (``core.config`` does the parsing and knows no trainer).

``make_task(**spec)`` builds a config's task. The lab registers its own tasks; an algorithm's tasks
register from its package (VAPOR's ``vapor_word_problems``, ``sdpo_kit.vapor.tasks``), which this module
imports, so every task name is known here: the CLI, the training API and deploy/ build tasks with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from sdpo_kit import presets
from sdpo_kit.core.config import Config, ConfigError, parse_config, read_config_file
from sdpo_kit.tasks.base import TASKS, Task
from sdpo_kit.tasks.base import make_task as make_lab_task
from sdpo_kit.vapor import tasks as vapor_tasks  # noqa: F401 (registers "vapor_word_problems" in TASKS)


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
    pieces: str | dict | None = None  # {name: core.pieces.Piece} the builder takes as keywords (a learner's own)

    @property
    def config_class(self) -> type:
        return _resolve(self.config)

    @property
    def learner_pieces(self) -> dict:
        """The pieces a learner may replace on this trainer (``core.pieces``): name -> Piece."""
        return {} if self.pieces is None else _resolve(self.pieces)

    def build_trainer(self, *args, **kwargs):
        return _resolve(self.build)(*args, **kwargs)

    def run_trainer(self, trainer, resume_from_checkpoint=None) -> list[dict]:
        return _resolve(self.run)(trainer, resume_from_checkpoint)


TRAINERS: dict[tuple[str, str], TrainerEntry] = {}


def register(algorithm: str, backend: str, *, config, build, run=run_scratch, pieces=None) -> TrainerEntry:
    """Register (or replace) the trainer for ``(algorithm, backend)``."""
    entry = TrainerEntry(algorithm, backend, config, build, run, pieces)
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


def trainer_config_class(algorithm: str, backend: str) -> type:
    """The config dataclass that ``(algorithm, backend)`` registers (ValueError if none)."""
    return get_trainer(algorithm, backend).config_class


def make_task(name: str = "arithmetic", **options) -> Task:
    """The task a config's ``task:`` section names, with its options (``make_task("word_problems", n_eval=30)``,
    or ``make_task(**cfg.task)``); every task is known here, an algorithm's own included (VAPOR's
    ``vapor_word_problems``)."""
    return make_lab_task(name, **options)


def config_from_dict(data: dict | None, overrides: dict | None = None) -> Config:
    """Build and check a ``Config`` from a dict; ``overrides`` maps dotted keys to values
    (``{"trainer.max_steps": 3, "backend": "trl"}``)."""
    cfg = parse_config(data, overrides, trainer_config=trainer_config_class, tasks=TASKS)
    try:
        make_task(**cfg.task)   # the task's own checks (an unknown answer_rule, ...), before any model loads
    except (TypeError, ValueError) as e:
        raise ConfigError(f"section 'task': {e}") from None
    return cfg


def with_base_dir(data: dict, base_dir) -> dict:
    """``data`` with the config's folder given to what names files relative to it: a ``dataset`` task's
    paths and answer rule, a ``python`` reward's function (unless they set ``base_dir`` themselves)."""
    data = dict(data)
    task = data.get("task")
    if isinstance(task, dict) and task.get("name") == "dataset" and "base_dir" not in task:
        data["task"] = {**task, "base_dir": str(base_dir)}
    rewards = data.get("reward")
    if isinstance(rewards, (list, dict)):
        entries = rewards if isinstance(rewards, list) else [rewards]
        entries = [{**r, "base_dir": str(base_dir)} if isinstance(r, dict) and r.get("type") == "python"
                   and "base_dir" not in r else r for r in entries]
        data["reward"] = entries if isinstance(rewards, list) else entries[0]
    return data


def load_config(config, overrides: dict | None = None) -> Config:
    """A checked ``Config`` from a preset's name (``"first_run"``, ``sdpo_kit.presets``), a YAML file's path
    (``yaml.safe_load``), a dict of its sections, or a ``Config`` (returned as it is). Files a dataset task or a python reward names are looked for next to the YAML file
    first (``with_base_dir``). ``overrides``: dotted keys, ``{"trainer.max_steps": 3}``, for a path or a dict."""
    import os
    from pathlib import Path

    if isinstance(config, Config):
        if overrides:
            raise ConfigError("overrides apply to a config's path or dict; set them on the Config itself")
        return config
    if isinstance(config, dict):
        return config_from_dict(config, overrides)
    if not isinstance(config, (str, os.PathLike)):
        raise ConfigError(f"config: a preset's name, a YAML path, a dict or a Config, got a {type(config).__name__}")
    path = presets.resolve(config) or config
    if not Path(path).exists():
        raise ConfigError(presets.missing(config))
    data = with_base_dir(read_config_file(path), Path(path).resolve().parent)
    try:
        return config_from_dict(data, overrides)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


# the whole list: (algorithm, backend) -> the trainer's config class, its builder and its runner
register("grpo", "scratch", config="sdpo_kit.grpo.config:GRPOScratchConfig", build="sdpo_kit.grpo.loop:GRPOScratchTrainer",
         pieces="sdpo_kit.grpo.pieces:PIECES")
register("grpo", "trl", config="sdpo_kit.grpo.config:GRPOTRLConfig",
         build="sdpo_kit.grpo.trl:build_from_config", run="sdpo_kit.core.trl_base:train_trl")
register("vapor", "scratch", config="sdpo_kit.vapor.config:VAPORScratchConfig",
         build="sdpo_kit.vapor.loop:VAPORScratchTrainer")
register("vapor", "trl", config="sdpo_kit.vapor.config:VAPORTRLConfig",
         build="sdpo_kit.vapor.trl:build_vapor_from_config", run="sdpo_kit.core.trl_base:train_trl")
register("sdpo", "scratch", config="sdpo_kit.sdpo.config:SDPOScratchConfig",
         build="sdpo_kit.sdpo.loop:SDPOScratchTrainer", pieces="sdpo_kit.sdpo.pieces:PIECES")
register("sdpo", "trl", config="sdpo_kit.sdpo.config:SDPOTRLConfig",
         build="sdpo_kit.sdpo.trl:build_sdpo_from_config", run="sdpo_kit.core.trl_base:train_trl")
register("ppo", "scratch", config="sdpo_kit.ppo.config:PPOScratchConfig",
         build="sdpo_kit.ppo.trainer:build_ppo_from_config", pieces="sdpo_kit.ppo.pieces:PIECES")
