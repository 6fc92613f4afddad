"""The algorithms the library knows, each declared in its own package, and the configs that name them.

    register_algorithm(algorithm)    an ``core.algorithm.Algorithm`` (or ``"package.module:NAME"``): adds or replaces it
    get_algorithm(name) / algorithms() / backends(name)
    get_trainer(algorithm, backend)  the ``Backend``: its config class, builder, runner and a learner's pieces
    panels_for(name)                 the dashboard's panels: the default ones and the algorithm's
    metric_keys()                    every metric key a trainer may log, and what it means
    load_config(config, overrides)   a preset's name, a YAML path, a dict or a Config -> a checked ``Config``
    make_task(name, **options)       any registered task, an algorithm's own included

The library's four (``LIBRARY``: ``grpo/algorithm.py``, ``vapor/``, ``sdpo/``, ``ppo/``) are registered when this
module is imported; a package of one's own registers its algorithm the same way (``sdpo_kit.register_algorithm``),
and ``sdpo_kit.train`` runs it. A declaration names its code as ``"module:attribute"`` strings, imported on first
use, so checking a config never imports a trainer or TRL; the TRL trainers are imported when one is built, after
the model is loaded (and Unsloth, on a GPU, has patched TRL).

``load_config`` checks a config's ``trainer:`` section against the dataclass its algorithm's backend names
(``core.config`` does the parsing and knows no algorithm).
"""

from __future__ import annotations

import importlib

from sdpo_kit import presets
from sdpo_kit.core.algorithm import Algorithm, Backend, resolve
from sdpo_kit.core.config import Config, ConfigError, parse_config, read_config_file
from sdpo_kit.core.metrics import METRICS
from sdpo_kit.tasks.base import TASKS, Task
from sdpo_kit.tasks.base import make_task as make_lab_task
from sdpo_kit.viz.panels import DEFAULT_PANELS

LIBRARY = ("sdpo_kit.grpo.algorithm:GRPO", "sdpo_kit.vapor.algorithm:VAPOR", "sdpo_kit.sdpo.algorithm:SDPO",
           "sdpo_kit.ppo.algorithm:PPO")
ALGORITHMS: dict[str, Algorithm] = {}


def register_algorithm(algorithm: Algorithm | str) -> Algorithm:
    """Register (or replace) an algorithm: an ``Algorithm``, or ``"package.module:NAME"`` naming one. The modules
    that register its own tasks (``Algorithm.tasks``) are imported now."""
    algorithm = resolve(algorithm)
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"register_algorithm takes a core.algorithm.Algorithm, got a {type(algorithm).__name__}")
    for module in algorithm.tasks:
        importlib.import_module(module)
    ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def get_algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"no algorithm {name!r}; registered: {', '.join(algorithms())}") from None


def algorithms() -> list[str]:
    return sorted(ALGORITHMS)


def backends(algorithm: str | None = None) -> list[str]:
    names = [algorithm] if algorithm is not None else algorithms()
    return sorted({b for a in names for b in get_algorithm(a).backends})


def get_trainer(algorithm: str, backend: str) -> Backend:
    """The ``Backend`` that runs ``(algorithm, backend)``; ValueError listing what is registered."""
    entry = ALGORITHMS.get(algorithm)
    if entry is None or backend not in entry.backends:
        known = ", ".join(f"{a}/{b}" for a in algorithms() for b in sorted(ALGORITHMS[a].backends))
        raise ValueError(f"no trainer for algorithm={algorithm!r}, backend={backend!r}; registered: {known}")
    return entry.backends[backend]


def trainer_config_class(algorithm: str, backend: str) -> type:
    """The config dataclass that ``(algorithm, backend)`` registers (ValueError if none)."""
    return get_trainer(algorithm, backend).config_class


def panels_for(algorithm: str) -> tuple:
    """The dashboard's panels for ``algorithm``: ``DEFAULT_PANELS`` and the algorithm's own."""
    return DEFAULT_PANELS + tuple(get_algorithm(algorithm).panels)


def metric_keys() -> dict[str, str]:
    """Every metric key a trainer may log, with what it means: the shared ones and each algorithm's."""
    out = dict(METRICS)
    for name in algorithms():
        out.update(ALGORITHMS[name].metric_keys)
    return out


def verl_algorithms() -> list[str]:
    """The algorithms ``sdpo-kit export-verl`` can write (their declaration has a verl mapping)."""
    return [a for a in algorithms() if ALGORITHMS[a].verl is not None]


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
    prepare = get_algorithm(cfg.algorithm).prepare
    if prepare is not None:     # the algorithm's check of the whole config (SDPO: a dataset's feedback column)
        try:
            resolve(prepare)(cfg)
        except ValueError as e:
            raise ConfigError(str(e)) from None
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
    (``yaml.safe_load``), a dict of its sections, or a ``Config`` (returned as it is). Files a dataset task or a
    python reward names are looked for next to the YAML file first (``with_base_dir``). ``overrides``: dotted keys, ``{"trainer.max_steps": 3}``, for a path or a dict."""
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


for _name in LIBRARY:
    register_algorithm(_name)
