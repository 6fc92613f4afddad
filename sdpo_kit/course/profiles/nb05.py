"""Notebook 05 (SDPO): the skill lab at both ends of its dial on the tiny lab; one model on a real one.

``lab`` is the skill lab's run config: its ``model.lab`` is the warm-start recipe (``dial`` sets its
``context_steps``: SFT batches of SDPO's own teacher prompts); ``warm_start`` overrides that recipe (smoke
mode's smaller lab). The tiny lab's trainer values (``max_new_tokens``, ``temperature``, ``prompts``,
``group``, ``lr``, ``steps``) and ``task`` are ``configs/sdpo_lab.yaml``'s (``tests/test_nb05_sdpo.py``
checks it). ``templates`` names the teacher prompts' form (``lab.skill.TEMPLATES``: the lab's one-line
``compact`` form, or TRL's English defaults, ``trl``). A real model has no dial: one model, no warm start.

``plain_spread`` is for section 7 on the full-size skill lab, which prints the warm starts' numbers beside
what they usually show: the two ends' plain accuracy differ by at most this much, only the top's teacher reads
a sibling's answer (None where the run is not that lab at full size: smoke mode, a real model). ``collapse``
and ``tie`` are the usual outcome of section 6's runs on that lab (seed 0), printed beside the run's own: SDPO
ends at least ``collapse`` below GRPO at the bottom of the dial, within ``tie`` of it at the top (the
notebook's full-size run measured -0.735 and -0.005; ``benchmarks/bench_sdpo_lab.py`` over five seeds a median
of -0.740 and +0.005). ``num_threads``: torch's threads (None: leave them)."""

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB

LAB_TASK = dict(name="long_addition", n_eval=200, seed=0)   # two 4-digit operands

PROFILES = {
    TINY_LAB: dict(
        lab="sdpo_lab", dial=(0, 1000), warm_start={}, task=LAB_TASK, templates="compact",
        max_new_tokens=7, temperature=1.0, prompts=16, group=8, lr=1e-5, steps=200, n_eval=200,
        plain_spread=0.1, collapse=0.3, tie=0.05, num_threads=1,   # its matmuls are too small to split
        # smoke: the same lab, smaller (2-digit operands, 800 plain SFT steps, the top of the dial at 400)
        smoke=dict(task=dict(LAB_TASK, digits=2), dial=(0, 400), prompts=4, steps=4, n_eval=100, plain_spread=None,
                   collapse=None, tie=None,
                   warm_start=dict(digits=2, sft_steps=800, sft_cycle_steps=400, sft_batch_size=16,
                                   context_lr_scale=1.0, context_feedback_share=0.0))),
    REAL_CPU_MODEL: dict(   # "What is 13 - 4? Show your work, then end with ####..."; LoRA: a larger lr
        lab=None, dial=None, warm_start=None, task=dict(name="word_problems"), templates="trl",
        max_new_tokens=48, temperature=0.7, prompts=2, group=4, lr=1e-4, steps=8, n_eval=16,
        plain_spread=None, collapse=None, tie=None, num_threads=None,
        smoke=dict(max_new_tokens=16, group=2, steps=1, n_eval=2, num_threads=1)),
    T4_MODEL: dict(
        lab=None, dial=None, warm_start=None, templates="trl",
        task=dict(name="arithmetic", digits=3, terms=4, n_train=20_000, answer_rule="auto",
                  system_prompt="Reply with the final number only."),
        max_new_tokens=16, temperature=1.0, prompts=8, group=8, lr=2e-5, steps=60, n_eval=200,
        plain_spread=None, collapse=None, tie=None, num_threads=None,
        smoke=dict(prompts=4, steps=4, n_eval=100)),
}
