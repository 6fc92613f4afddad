"""The code lab's shared pieces: its config, its variants (warm starts) and its methods' run configs.
``bench_code_lab.py`` trains them and ``bench_code_lab_heldout.py`` scores their warm starts.

The lab: ``lab_code`` (``configs/sdpo_code_lab.yaml``): an affine function's expression from three of its
values, checked by the sandbox's call tests, with LiveCodeBench-style feedback. A method is a change to that
config (``method_config``); a variant is a warm start's fields over the config's and the dials it measures.
"""

from __future__ import annotations

from lab import SDPO_ONLY  # the SDPO-only trainer keys, dropped for grpo

CONFIG = "configs/sdpo_code_lab.yaml"
METHODS = ("grpo", "sdpo", "sdpo_feedback", "blend")
BLEND_WEIGHT = 0.5   # the blend's distillation_weight: half GRPO's loss, half SDPO's

# each variant: its warm start's fields over the config's, trainer fields, and the dials it measures
VARIANTS = {
    "top": {"lab": {}, "trainer": {}, "dials": [0, 1000], "results": "code_lab"},
    # the config's recipe stopped at 700 plain steps, its context rows 60% feedback-only. Probed once with
    # sdpo.quality on the held-out split (plain / teacher with the tests' feedback): 700 steps 0.100 /
    # 0.650; 500 steps 0.045 / 0.141 (the teacher cannot read yet); the top variant 0.370 / 0.833. Groups of 4:
    # at the 0.14 of samples a probe of the warm start found right, about half the groups hold no success
    "starving": {"lab": {"sft_steps": 700, "context_feedback_share": 0.6},
                 "trainer": {"max_steps": 60, "eval_every": 10, "num_generations": 4},
                 "dials": [700], "results": "code_lab_starving"},
}


def method_config(method: str, dial: int, variant: str = "top") -> dict:
    """The run config of ``method`` from ``variant``'s warm start at one dial setting."""
    from sdpo_kit.core.config import read_config_file

    v = VARIANTS[variant]
    data = read_config_file(CONFIG)
    data["model"]["lab"] = {**data["model"]["lab"], **v["lab"], "context_steps": dial}
    t = {**data["trainer"], **v["trainer"]}
    if method == "grpo":
        data["algorithm"] = "grpo"
        t = {k: val for k, val in t.items() if k not in SDPO_ONLY}
    elif method == "sdpo":
        t["include_environment_feedback"] = False
    elif method == "sdpo_feedback":
        t["include_environment_feedback"] = True
    elif method == "blend":
        t.update(include_environment_feedback=True, distillation_weight=BLEND_WEIGHT)
    else:
        raise SystemExit(f"unknown method {method!r}; choose from {METHODS}")
    data["trainer"] = t
    return data
