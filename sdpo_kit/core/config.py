"""Run configs: a YAML file -> ``Config``, checked key by key (``sdpo_kit.registry.load_config``).

    algorithm:  grpo (the registry, ``sdpo_kit.registry``, lists what else is there)
    backend:    scratch | trl
    model:      name, lora, load_in_4bit, max_seq_length, trust_remote_code, dtype, fast_inference, lab
    task:       name (a key of ``tasks.base.TASKS``) and that task's options (digits, terms, n_eval, ...)
    reward:     one dict or a list of dicts, each with ``type`` (options go to ``rewards.make_reward``)
    trainer:    the fields of the registered trainer's own config dataclass, e.g.
                ``grpo.config.GRPOScratchConfig`` (scratch) or ``grpo.config.GRPOTRLConfig`` (trl)
    output_dir: where metrics.jsonl, checkpoints, the model and the plot go
    threads:    torch CPU threads (0: 1 for the tiny lab, else up to 4)

The ``trainer:`` section is validated against the dataclass that ``(algorithm, backend)``
registers, so each trainer owns its knobs: ``share_prompt`` exists for the scratch loop only,
``preset`` and ``trl_args`` for the TRL backend only. An unknown key anywhere is an error that
names it and lists the known ones (a typo must not silently fall back to a default). Numbers
written as ``3e-4`` (a string to YAML 1.1) are converted to the field's type. ``overrides`` use
dotted keys: ``{"trainer.max_steps": 3, "backend": "trl"}``.

This module knows no trainer and no task: ``parse_config`` is handed the registry's lookup and
the task table, so the registry depends on the configs and never the other way round.

Left out on purpose: config inheritance / includes; each YAML file is complete.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config file or dict that cannot be used as it is."""


@dataclass
class ModelSection:
    """A config's ``model:`` section (named apart from ``trl.ModelConfig``, which is TRL's)."""

    name: str = "tiny-lab"                  # "tiny-lab", a hub id, or a local directory
    lora: Any = None                        # None: on for hub models, off for the tiny lab; bool, rank or dict
    load_in_4bit: bool | None = None        # None: 4-bit on the Unsloth (GPU) path only
    max_seq_length: int = 1024
    trust_remote_code: bool = False
    dtype: str | None = None                # None: fp32 on CPU, bf16 or fp16 on GPU
    fast_inference: bool = False            # Unsloth's vLLM generation (GPU + vllm; else a warning and off)
    lab: dict = field(default_factory=dict)  # sdpo_kit.lab.model.LabConfig overrides (tiny lab only)


@dataclass
class Config:
    """A checked run config: algorithm, backend, model, task, rewards, the trainer's own config, output_dir."""

    algorithm: str = "grpo"
    backend: str = "scratch"
    model: ModelSection = field(default_factory=ModelSection)
    task: dict = field(default_factory=lambda: {"name": "arithmetic"})
    reward: list[dict] = field(default_factory=lambda: [{"type": "exact_match"}])
    trainer: Any = None                     # an instance of the registered trainer's config class
    output_dir: str = "runs/default"
    threads: int = 0

    def to_dict(self) -> dict:
        """A plain dict that ``config_from_dict`` reads back (the trainer's output_dir is the top-level one)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["model"] = asdict(self.model)
        out["trainer"] = {k: v for k, v in asdict(self.trainer).items() if k != "output_dir"} if self.trainer else {}
        return _plain(out)


# every trainer config's default completion budget (GRPOFields and so VAPOR's and SDPO's, PPOScratchConfig)
DEFAULT_COMPLETION_LENGTH = 8


def completion_budget(trainer) -> int:
    """The run's completion budget: ``trainer.max_completion_length`` (tokens; characters on the tiny lab).

    The one place a run's budget is read outside its trainer: held-out evaluation during training and the
    preflight's memory estimate (``sdpo_kit.training``) and ``sdpo-kit eval`` (``deploy/evaluate.py``) use the
    number the trainer samples with. Every registered trainer's config declares the field, with the default
    ``DEFAULT_COMPLETION_LENGTH``; a trainer section without it (not one the registry builds) gets that default."""
    return getattr(trainer, "max_completion_length", DEFAULT_COMPLETION_LENGTH)


def _plain(x):
    """Tuples as lists, recursively (YAML's safe dumper writes lists, not tuples)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


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


def _mapping(data, name: str) -> dict:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config section {name!r} must be a mapping, got {type(data).__name__}")
    return dict(data)


def _section(cls, data: dict, name: str, **fixed):
    """``cls(**data, **fixed)`` with unknown keys named and values coerced to the field types;
    a ValueError from the dataclass's own checks becomes a ConfigError naming the section."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - (set(fields) - set(fixed)))
    if unknown:
        known = sorted(set(fields) - set(fixed))
        raise ConfigError(f"unknown key(s) in section {name!r}: {unknown}; known keys: {known}")
    kwargs = {k: _coerce(v, fields[k].type, f"{name}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs, **fixed)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"section {name!r}: {e}") from None


def _task(data, tasks: dict) -> dict:
    """``{"name": ..., **options}`` with the options checked against the task's signature."""
    data = _mapping(data, "task")
    name = data.pop("name", "arithmetic")
    if name not in tasks:
        raise ConfigError(f"task.name must be one of {sorted(tasks)}, got {name!r}")
    params = inspect.signature(tasks[name]).parameters
    unknown = sorted(set(data) - set(params))
    if unknown:
        raise ConfigError(f"unknown key(s) in section 'task' for task {name!r}: {unknown}; "
                          f"known keys: {sorted(['name', *params])}")
    return {"name": name, **data}


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


def _trainer(algorithm: str, backend: str, data, output_dir: str, trainer_config):
    try:
        config_class = trainer_config(algorithm, backend)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    data = _mapping(data, "trainer")
    if "output_dir" in data:
        raise ConfigError("trainer.output_dir: set the top-level output_dir instead")
    if "backend" in data:
        raise ConfigError("trainer.backend: backend is a top-level key now (backend: scratch | trl)")
    return _section(config_class, data, f"trainer ({algorithm}/{backend})", output_dir=output_dir)


def _set_dotted(d: dict, key: str, value) -> None:
    parts = key.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
        if not isinstance(d, dict):
            raise ConfigError(f"override {key!r}: {p!r} is not a section")
    d[parts[-1]] = value


def parse_config(data: dict | None, overrides: dict | None = None, *, trainer_config, tasks: dict) -> Config:
    """Build and check a ``Config``; ``overrides`` maps dotted keys to values.

    ``trainer_config(algorithm, backend)`` returns the trainer's config dataclass (ValueError when
    none is registered) and ``tasks`` maps task names to their factories: the registry passes both
    (``sdpo_kit.registry.config_from_dict``), so this module needs neither the registry nor a task.
    """
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in (data or {}).items()}
    for k, v in (overrides or {}).items():
        _set_dotted(data, k, v)
    known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {unknown}; known keys: {sorted(known)}")
    output_dir = str(data.get("output_dir", Config.output_dir))
    algorithm, backend = str(data.get("algorithm", "grpo")), str(data.get("backend", "scratch"))
    threads = _coerce(data.get("threads", 0), "int", "threads")
    if not isinstance(threads, int) or threads < 0:
        raise ConfigError(f"threads must be an integer >= 0, got {threads!r}")
    return Config(
        algorithm=algorithm, backend=backend,
        model=_section(ModelSection, _mapping(data.get("model"), "model"), "model"),
        task=_task(data.get("task"), tasks),
        reward=_rewards(data.get("reward")),
        trainer=_trainer(algorithm, backend, data.get("trainer"), output_dir, trainer_config),
        output_dir=output_dir, threads=threads,
    )


def read_config_file(path) -> dict:
    """A YAML file (``yaml.safe_load``) as a dict; ConfigError when it is missing or not a mapping."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def dump_config(cfg: Config, path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
