"""VAPOR's config classes: VAPOR's knobs and the two backends' configs that carry them.

    VAPORFields      the tags of the verifiable and preference spans, ``preference_beta`` (DPO's beta),
                     the variant (``as_specified`` | ``additive``) and its ``preference_weight``, and
                     ``scale_rewards="none"`` (A = r - mean of the group, as VAPOR is specified)
    VAPORScratchConfig  the scratch loop's (``vapor/loop.py``): GRPOScratchConfig + VAPORFields
    VAPORTRLConfig   the YAML ``trainer:`` section of ``algorithm: vapor, backend: trl``: GRPOTRLConfig + VAPORFields

``VAPORTRLArgs``, the ``trl.GRPOConfig`` subclass VAPORTRLTrainer is built with, stays in ``vapor/trl.py``:
defining it imports TRL, which must come after Unsloth has patched it, and the scratch loop imports
this module without TRL.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdpo_kit.grpo.config import GRPOScratchConfig, GRPOTRLConfig

VAPOR_VARIANTS = ("as_specified", "additive")


@dataclass
class VAPORFields:
    """VAPOR's knobs, shared by the scratch and the TRL backend's configs."""

    verifiable_term_split: tuple = ("<answer>", "</answer>")   # tags around the verifiable span
    preference_term_split: tuple = ("<answer>", "</answer>")   # tags around the preference span of y_w / y_l
    preference_beta: float = 0.1      # DPO's beta: the temperature on the preference margin
    vapor_variant: str = "as_specified"  # as_specified | additive (GRPO on the span + preference_weight x DPO)
    preference_weight: float = 1.0    # lambda of the additive variant
    scale_rewards: str = "none"       # A_i = r_i - mean of its group, no std scaling (as VAPOR is specified)

    def __post_init__(self):
        super().__post_init__()
        for name in ("verifiable_term_split", "preference_term_split"):
            tags = tuple(getattr(self, name))
            if len(tags) != 2 or not all(isinstance(t, str) and t for t in tags):
                raise ValueError(f"{name} must be two non-empty tags, e.g. ['<answer>', '</answer>'], got {tags!r}")
            setattr(self, name, tags)
        if self.vapor_variant not in VAPOR_VARIANTS:
            raise ValueError(f"vapor_variant must be one of {VAPOR_VARIANTS}, got {self.vapor_variant!r}")


@dataclass
class VAPORScratchConfig(VAPORFields, GRPOScratchConfig):
    """The scratch VAPOR loop's config: GRPO's (``GRPOScratchConfig``) plus ``VAPORFields``."""


@dataclass
class VAPORTRLConfig(VAPORFields, GRPOTRLConfig):
    """The YAML ``trainer:`` section for ``algorithm: vapor``, ``backend: trl``."""
