"""Notebook 01 (policy gradient from scratch): the settings that follow the model.

``task`` a task of ``tasks.base.TASKS`` and its settings; ``max_new_tokens`` the completion budget (characters
for the tiny lab, tokens for a real model); ``temperature`` the sampling temperature; ``group`` G, the
completions per prompt; ``prompts`` the prompts per training step (a batch is ``prompts * group``
completions); ``lr`` AdamW's first rate (it decays linearly to 0); ``steps`` the steps of each of the two
training runs (inline, then ``GRPOScratchTrainer``); ``n_var_batches`` and ``var_prompts`` the size of the
gradient-variance experiment; ``n_eval`` the held-out problems; ``min_lift`` the rise in held-out greedy
accuracy each run usually makes, printed beside its own (measured on the full-size tiny-lab run, seed 0:
+0.20 for both runs; None where a run is too short to promise one, as in smoke mode, or was not measured).
"""

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB

PROFILES = {
    TINY_LAB: dict(   # "3+5+1=", the answer on the first line; the sizes of configs/demo.yaml
        task=dict(name="arithmetic", digits=1, terms=3),
        max_new_tokens=4, temperature=0.7, group=8, prompts=16, lr=3e-4, steps=500,
        n_var_batches=32, var_prompts=8, n_eval=200, min_lift=0.1,
        smoke=dict(steps=40, n_var_batches=16, min_lift=None)),
    REAL_CPU_MODEL: dict(   # "What is 13 - 4? Show your work, then end with ####..."; at T = 1 rarely right
        task=dict(name="word_problems"),
        max_new_tokens=48, temperature=0.7, group=4, prompts=4, lr=1e-4, steps=20,
        n_var_batches=8, var_prompts=2, n_eval=30, min_lift=None,
        smoke=dict(max_new_tokens=16, prompts=1, steps=1, n_var_batches=2, var_prompts=1, n_eval=2)),
    T4_MODEL: dict(   # LoRA on a 16-bit base, not through Unsloth (its fused backward takes one gradient per forward)
        task=dict(name="arithmetic", digits=3, terms=4, n_train=20_000, answer_rule="auto",
                  system_prompt="Reply with the final number only."),
        max_new_tokens=16, temperature=1.0, group=8, prompts=8, lr=2e-5, steps=200,
        n_var_batches=32, var_prompts=8, n_eval=200, min_lift=None,
        smoke=dict(steps=40, n_var_batches=16)),
}
