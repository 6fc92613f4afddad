"""Run configs: a YAML file -> ``Config`` (plain dataclasses), checked key by key.

    model:    name, lora, load_in_4bit, max_seq_length, trust_remote_code, dtype, lab
    task:     name, digits, terms, n_eval, n_train, seed
    reward:   one dict or a list of dicts, each with ``type`` (options go to ``rewards.make_reward``)
    trainer:  backend (scratch | trl), preset, max_steps, prompts_per_step, num_generations, ...
    output_dir

An unknown key anywhere in model / task / trainer or at the top level is an error that
names it (a typo must not silently fall back to a default). Numbers written as ``3e-4``
(a string to YAML 1.1) are converted to the field's type. ``overrides`` use dotted keys:
``{"trainer.max_steps": 3}``.

Left out on purpose: config inheritance / includes; each YAML file is complete.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

BACKENDS = ("scratch", "trl")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


class ConfigError(ValueError):
    """A config file or dict that cannot be used as it is."""


@dataclass
class ModelConfig:
    name: str = "tiny-lab"                  # "tiny-lab", a hub id, or a local directory
    lora: Any = None                        # None: on for hub models, off for the tiny lab; bool, rank or dict
    load_in_4bit: bool | None = None        # None: 4-bit on the Unsloth (GPU) path only
    max_seq_length: int = 1024
    trust_remote_code: bool = False
    dtype: str | None = None                # None: fp32 on CPU, bf16 or fp16 on GPU
    lab: dict = field(default_factory=dict)  # sdpo_kit.lab.LabConfig overrides (tiny lab only)


@dataclass
class TaskConfig:
    name: str = "arithmetic"                # arithmetic | tagged_arithmetic
    digits: int = 1
    terms: int = 3
    n_eval: int = 200                       # held-out problems (greedy accuracy is measured on them)
    n_train: int | None = None              # None: every other problem
    seed: int = 0


@dataclass
class TrainerConfig:
    backend: str = "scratch"                # scratch (trainers/grpo.py) | trl (trl.GRPOTrainer)
    preset: str = "auto"                    # trl only: cpu | t4 | auto
    max_steps: int = 100
    prompts_per_step: int = 16
    num_generations: int = 8
    num_iterations: int = 1
    learning_rate: float = 1e-3
    lr_scheduler_type: str = "constant"     # constant | linear (decay to 0 by the last step)
    max_grad_norm: float = 1.0
    temperature: float = 1.0
    max_completion_length: int = 8
    beta: float = 0.0
    loss_type: str = "dapo"
    epsilon: float = 0.2
    epsilon_high: float | None = None
    scale_rewards: str = "group"
    eval_every: int = 25
    seed: int = 0
    share_prompt: bool = True               # scratch only: each prompt runs once for its G completions
    threads: int = 0                        # torch CPU threads; 0: 1 for the tiny lab, else up to 4
    trl_args: dict = field(default_factory=dict)  # extra trl.GRPOConfig fields (trl backend)

    def grpo_kwargs(self) -> dict:
        """The knobs both backends share (sdpo_kit names)."""
        skip = {"backend", "preset", "threads", "trl_args", "share_prompt"}
        return {k: v for k, v in asdict(self).items() if k not in skip}


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    reward: list[dict] = field(default_factory=lambda: [{"type": "exact_match"}])
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    output_dir: str = "runs/default"

    def to_dict(self) -> dict:
        return asdict(self)


SECTIONS = {"model": ModelConfig, "task": TaskConfig, "trainer": TrainerConfig}


def _coerce(value, hint, where: str):
    """YAML 1.1 reads ``3e-4`` as a string: turn it into the field's number type."""
    if value is None or not isinstance(hint, str):
        return value
    if isinstance(value, str) and "float" in hint:
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if isinstance(value, float) and hint.startswith("int") and value.is_integer():
        return int(value)
    if isinstance(value, str) and hint.startswith("int"):
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
    return value


def _section(cls, data, name: str):
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config section {name!r} must be a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key(s) in section {name!r}: {unknown}; known keys: {sorted(fields)}")
    # field types are strings (postponed annotations): "float", "int | None", ...
    return cls(**{k: _coerce(v, fields[k].type, f"{name}.{k}") for k, v in data.items()})


def _rewards(data) -> list[dict]:
    if data is None:
        data = [{"type": "exact_match"}]
    if isinstance(data, str):
        data = [{"type": data}]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise ConfigError("config section 'reward' must be a type name, a mapping or a non-empty list")
    for i, r in enumerate(data):
        if not isinstance(r, dict) or "type" not in r:
            raise ConfigError(f"reward entry {i} needs a 'type' key, got {r!r}")
    return [dict(r) for r in data]


def _validate(cfg: Config) -> Config:
    t = cfg.trainer
    if t.backend not in BACKENDS:
        raise ConfigError(f"trainer.backend must be one of {BACKENDS}, got {t.backend!r}")
    if t.loss_type not in LOSS_TYPES:
        raise ConfigError(f"trainer.loss_type must be one of {LOSS_TYPES}, got {t.loss_type!r}")
    if t.num_generations < 2:
        raise ConfigError("trainer.num_generations must be >= 2: a group of one has no baseline")
    if t.max_steps < 1 or t.prompts_per_step < 1:
        raise ConfigError("trainer.max_steps and trainer.prompts_per_step must be >= 1")
    return cfg


def _set_dotted(d: dict, key: str, value) -> None:
    parts = key.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
        if not isinstance(d, dict):
            raise ConfigError(f"override {key!r}: {p!r} is not a section")
    d[parts[-1]] = value


def config_from_dict(data: dict | None, overrides: dict | None = None) -> Config:
    """Build and check a ``Config``; ``overrides`` maps dotted keys to values."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in (data or {}).items()}
    for k, v in (overrides or {}).items():
        _set_dotted(data, k, v)
    known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {unknown}; known keys: {sorted(known)}")
    cfg = Config(
        model=_section(ModelConfig, data.get("model"), "model"),
        task=_section(TaskConfig, data.get("task"), "task"),
        reward=_rewards(data.get("reward")),
        trainer=_section(TrainerConfig, data.get("trainer"), "trainer"),
        output_dir=str(data.get("output_dir", Config.output_dir)),
    )
    return _validate(cfg)


def load_config(path, overrides: dict | None = None) -> Config:
    """Read a YAML file (``yaml.safe_load``) into a checked ``Config``."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    try:
        return config_from_dict(data, overrides)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def dump_config(cfg: Config, path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
