"""Notebook 00 (your first RL run): ``configs/first_run.yaml`` on the real CPU model, the same file with
the T4 model on a GPU, and ``configs/demo.yaml`` on the tiny lab (``SDPO_KIT_MODEL=tiny-lab``).

``overrides`` are dotted config keys applied to ``config`` (``registry.load_config``); ``n_show`` the
held-out questions shown before and after; ``min_lift`` the rise in held-out accuracy a run like this usually
makes, printed beside the learner's own (measured by ``benchmarks/bench_first_run.py`` for the real model; None
where a run is too short to promise one, as in smoke mode)."""

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB

DEFAULT_MODEL = {"cpu": REAL_CPU_MODEL}   # the first run is the real model's, on any machine

PROFILES = {
    REAL_CPU_MODEL: dict(
        config="first_run", overrides={}, n_show=6, min_lift=0.26,
        smoke=dict(overrides={"trainer.max_steps": 2, "task.n_eval": 8}, n_show=3, min_lift=None)),
    T4_MODEL: dict(   # not measured here (no hub): a 0.5B model answers one-step sums, so three terms of two digits
        config="first_run", n_show=6, min_lift=None,
        overrides={"model.name": T4_MODEL, "task.max_operand": 99, "task.terms": 3,
                   "trainer.max_steps": 40, "trainer.prompts_per_step": 8, "trainer.learning_rate": 1e-4,
                   "trainer.lr_scheduler_type": "constant", "trainer.max_completion_length": 16,
                   "trainer.beta": 0.0},   # no frozen reference copy of a model that may be 4-bit
        smoke=dict(overrides={"model.name": T4_MODEL, "trainer.max_steps": 2, "task.n_eval": 8, "trainer.beta": 0.0},
                   n_show=3)),
    TINY_LAB: dict(   # the microscope: the demo run, "3+5+1=" answered on the first line
        config="demo", overrides={"trainer.max_steps": 300, "trainer.eval_every": 50}, n_show=6,
        min_lift=0.1,
        smoke=dict(overrides={"trainer.max_steps": 10, "trainer.eval_every": 5, "task.n_eval": 16}, n_show=3,
                   min_lift=None)),
}
