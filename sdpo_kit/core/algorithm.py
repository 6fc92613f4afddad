"""What the library knows about an algorithm, declared once in the algorithm's own package.

    Algorithm(name, backends, panels=(), metric_keys={}, has_teacher=False, dataset_refusal=None, verl=None,
              tasks=(), prepare=None)
    Backend(config, build, run=run_scratch, pieces=None)       one per backend ("scratch", "trl")

Each algorithm's ``algorithm.py`` (``grpo/algorithm.py``, ...) builds one ``Algorithm``; ``sdpo_kit.registry``
registers them, and the rest of the library reads them there: the config check (each backend's config class), the
training API (the builder, the dashboard's panels, whether a second model's logits are in the step, whether a
question-and-answer file can feed it, the pieces a learner may replace), ``sdpo-kit export-verl`` (its verl
mapping) and the metric names. Adding an algorithm is one folder and one ``register_algorithm`` call, from the
library or from a package of one's own.

References to code are objects or ``"package.module:attribute"`` strings imported on first use, so declaring
an algorithm imports neither its trainer nor TRL.

Left out on purpose: anything an algorithm does; this is what it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


def resolve(target):
    """An object, or ``"package.module:attribute"`` imported now."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_scratch(trainer, resume_from_checkpoint=None) -> list[dict]:
    """How a scratch trainer runs: ``trainer.train(resume_from_checkpoint=...)`` returns its rows."""
    return trainer.train(resume_from_checkpoint=resume_from_checkpoint)


@dataclass(frozen=True)
class Backend:
    """How one backend runs an algorithm.

    ``config``: the dataclass its YAML ``trainer:`` section is checked against; ``build(model, tokenizer,
    reward_funcs, train_rows, config, *, eval_fn, callbacks, reward_weights, **pieces) -> trainer``;
    ``run(trainer, resume_from_checkpoint) -> metric rows``; ``pieces``: ``{name: core.pieces.Piece}`` a learner
    may replace (the builder takes them as keywords)."""

    config: str | type
    build: str | Callable
    run: str | Callable = run_scratch
    pieces: str | Mapping | None = None

    @property
    def config_class(self) -> type:
        return resolve(self.config)

    @property
    def learner_pieces(self) -> dict:
        return {} if self.pieces is None else dict(resolve(self.pieces))

    def build_trainer(self, *args, **kwargs):
        return resolve(self.build)(*args, **kwargs)

    def run_trainer(self, trainer, resume_from_checkpoint=None) -> list[dict]:
        return resolve(self.run)(trainer, resume_from_checkpoint)


@dataclass(frozen=True)
class Algorithm:
    """An algorithm, as the library sees it.

    ``panels``: ``viz.panels.Panel`` the dashboard draws after the default ones; ``metric_keys``: ``{key: what
    it means}`` its rows add to ``core.metrics.METRICS``; ``has_teacher(trainer_config) -> bool`` (or a bool): a
    second model's logits in the step (a teacher, a frozen reference), which the preflight's memory estimate
    counts; ``dataset_refusal``: why a question-and-answer file (``task: {name: dataset}``) cannot feed it, None
    when it can; ``verl``: ``verl(cfg, paths, settings, micro_batch_size_per_gpu)`` writes its keys into a
    ``core.verl_keys.VerlSettings``, None when verl has no loss for it; ``tasks``: modules that register its own
    tasks, imported when it is registered; ``prepare(config)``: its check of a whole config (the task and rewards
    with its trainer's settings), run when a config is loaded, before any model: it may fill in a setting left to
    it and raises ValueError naming the key to set."""

    name: str
    backends: Mapping[str, Backend]
    panels: tuple = ()
    metric_keys: Mapping[str, str] = field(default_factory=dict)
    has_teacher: bool | Callable = False
    dataset_refusal: str | None = None
    verl: str | Callable | None = None
    tasks: tuple[str, ...] = ()
    prepare: str | Callable | None = None

    def teacher_in_step(self, trainer_config) -> bool:
        return bool(self.has_teacher(trainer_config) if callable(self.has_teacher) else self.has_teacher)

    def backend(self, name: str) -> Backend:
        try:
            return self.backends[name]
        except KeyError:
            raise ValueError(f"algorithm {self.name!r} has no backend {name!r}; it has {sorted(self.backends)}") from None
