"""What a dashboard draws: ``Panel`` (metric keys against the step) and the panels every run shows.

    DEFAULT_PANELS   reward mean with a +-std band (``reward/mean``, ``reward/std``), ``loss``, KL to the reference
                     (``loss/kl``), clip fraction (``stats/clip_frac``), completion length
                     (``completion/mean_length``) and held-out accuracy (``eval/accuracy``, markers: it is sparse)

An algorithm adds its own panels in its declaration (``Algorithm.panels``, e.g. ``vapor/algorithm.py``);
``sdpo_kit.registry.panels_for(name)`` is the default panels and the algorithm's. Plain data, no matplotlib: the
drawing is ``viz/plots.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Panel:
    """One subplot: ``keys`` drawn as lines against ``step``.

    ``std_key`` draws a +-std band around the first key; ``markers`` puts a dot on every
    point (for sparse metrics such as eval accuracy); ``ylim`` fixes the y range.
    """

    title: str
    keys: tuple[str, ...]
    std_key: str | None = None
    markers: bool = False
    ylim: tuple[float, float] | None = None

    def __post_init__(self):
        if isinstance(self.keys, str):
            self.keys = (self.keys,)
        self.keys = tuple(self.keys)
        if not self.keys:
            raise ValueError(f"panel {self.title!r} has no metric keys")


DEFAULT_PANELS: tuple[Panel, ...] = (
    Panel("reward (mean ± std)", ("reward/mean",), std_key="reward/std"),
    Panel("loss", ("loss",)),
    Panel("KL to reference", ("loss/kl",)),
    Panel("clip fraction", ("stats/clip_frac",)),
    Panel("completion length", ("completion/mean_length",)),
    Panel("eval accuracy", ("eval/accuracy",), markers=True, ylim=(-0.02, 1.02)),
)
