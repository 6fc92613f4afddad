"""Notebook 04 (VAPOR, a case study): the settings that follow the model.

``load_kw`` goes to ``models.load_policy`` (the tiny lab warm-starts on the tagged sums as
``configs/vapor.yaml`` does); ``task`` to ``tasks.base.make_task`` (a task whose rows carry a ``chosen`` and a
``rejected`` answer); ``max_new_tokens`` is the completion budget (characters for the tiny lab, tokens for a
real model); ``prompts`` x ``group`` completions per step; ``lr`` AdamW's, decayed linearly to 0; ``steps``
each training run's (section 5), ``eval_every`` its held-out evaluations; ``probe_steps`` the VAPOR steps that
move the policy off its reference before section 4 measures the gradient on one batch of ``probe_prompts``
prompts; ``seeds`` one run per variant each; ``n_eval`` held-out problems and pairs; ``num_threads`` torch's.

Claims about a run, used only where they were measured (None / False elsewhere): ``min_pushed_out``, the
pairs of section 4's batch whose margin the largest ``preference_beta`` usually pushes out of the clip range
while the smallest keeps every one inside (printed beside the run's own); ``every_run_moves``, every run of
section 5 has groups with mixed rewards (checked).
VAPOR's own knobs (tags, epsilon, preference_beta, mu, temperature) are ``configs/vapor.yaml``'s, set in the
notebook where each is introduced."""

import torch

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB

PROFILES = {   # a real model trains LoRA adapters: a smaller lr
    TINY_LAB: dict(
        load_kw=dict(lab_config=dict(task="vapor_arithmetic", sft_steps=280)),   # configs/vapor.yaml's warm start
        task=dict(name="vapor_arithmetic", digits=1, terms=3),    # "3+5+1= <answer>" -> "9</answer>"
        max_new_tokens=20,                                        # "<answer>27</answer>" is 19 characters
        prompts=16, group=8, lr=3e-4, steps=80, eval_every=20, probe_steps=10, probe_prompts=16,
        seeds=(0, 1, 2), n_eval=200, num_threads=1,   # its matmuls are too small to split (see sdpo_kit.cli)
        min_pushed_out=2, every_run_moves=True,
        smoke=dict(prompts=4, steps=4, eval_every=2)),
    REAL_CPU_MODEL: dict(
        load_kw=dict(),                  # LoRA adapters on the fp32 model
        task=dict(name="vapor_word_problems"),   # an example "4 + 3 = 7 <answer>7</answer>", then "What is 13 - 4?"
        max_new_tokens=24,                                        # "19 + 17 = 36 <answer>36</answer>" is 18 tokens
        prompts=2, group=4, lr=1e-4, steps=10, eval_every=5, probe_steps=4, probe_prompts=8,
        seeds=(0, 1, 2), n_eval=40, num_threads=torch.get_num_threads(),
        min_pushed_out=None, every_run_moves=False,
        smoke=dict(max_new_tokens=20, prompts=1, group=2, steps=1, eval_every=1, probe_steps=1,
                   probe_prompts=2, seeds=(0,), n_eval=4, num_threads=1)),
    T4_MODEL: dict(
        load_kw=dict(),
        task=dict(name="vapor_arithmetic", digits=3, terms=4, n_train=20_000, answer_rule="answer_tag",
                  system_prompt="Reply with the final number only, written as <answer>N</answer>."),
        max_new_tokens=24, prompts=8, group=8, lr=2e-5, steps=60, eval_every=15, probe_steps=10,
        probe_prompts=16, seeds=(0, 1, 2), n_eval=200, num_threads=torch.get_num_threads(),
        min_pushed_out=None, every_run_moves=False,
        smoke=dict(prompts=4, steps=4, eval_every=2)),
}
