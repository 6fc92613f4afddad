"""Notebook 02 (GRPO: the ratio and PPO's clip, the k3 KL, the four aggregations, the scratch loop and TRL):
the settings that follow the model. Sections 1 to 3 are tensor code and use none of them.

``task`` a task of ``tasks.base.TASKS`` and its settings (the prompt format and the answer rule are the task's);
``max_new_tokens`` the completion budget (characters for the tiny lab, tokens for a real model); ``prompts``
the prompts per training step and ``group`` G, the completions per prompt (a batch is ``prompts * group``
completions); ``lr`` AdamW's first rate (it decays linearly to 0); ``steps`` the steps of each of the two runs
(the scratch ``GRPOScratchTrainer``, then TRL's ``GRPOTrainer``); ``n_eval`` the held-out problems; ``trl_preset`` the
TRL preset (``"cpu"``: fp32; ``"t4"``: 16 bits, gradient checkpointing; ``"auto"``: t4 on a GPU, else cpu);
``num_threads`` torch's CPU threads (the tiny lab's matmuls are too small to split); ``min_lift`` the rise in
held-out greedy accuracy both runs usually make, printed beside theirs at the end (the full-size tiny-lab run,
seed 0, gains about +0.2 on both backends; None where a run is too short to promise one, as in smoke mode, or
was not measured). ``final_config`` and ``final_overrides``: what section 7 trains twice, with the learner's loss and
advantage and with the library's: notebook 00's first run on the real model at full size (the T4 model on a
GPU, with notebook 00's T4 changes), the tiny lab's demo config, a few steps, in smoke mode (on every model).
"""

import torch

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.course.profiles.nb00 import PROFILES as FIRST_RUN

SMOKE_FINAL = dict(final_config="demo", final_overrides={"trainer.max_steps": 4, "trainer.eval_every": 0,
                                                         "task.n_eval": 50, "trainer.prompts_per_step": 4})

PROFILES = {
    TINY_LAB: dict(   # "3+5+1=", the answer on the first line; the sizes of configs/demo.yaml
        task=dict(name="arithmetic", digits=1, terms=3),
        max_new_tokens=4, prompts=16, group=8, lr=3e-4, steps=500, n_eval=200, trl_preset="cpu",
        num_threads=1, min_lift=0.1, final_config="first_run", final_overrides={},
        smoke=dict(prompts=8, group=4, steps=12, min_lift=None, **SMOKE_FINAL)),
    REAL_CPU_MODEL: dict(   # "What is 13 - 4? Show your work, then end with ####..."
        task=dict(name="word_problems"),
        max_new_tokens=48, prompts=4, group=4, lr=1e-4, steps=30, n_eval=100, trl_preset="auto",
        num_threads=torch.get_num_threads(), min_lift=None, final_config="first_run", final_overrides={},
        smoke=dict(max_new_tokens=16, prompts=2, group=2, steps=2, n_eval=4, num_threads=1, **SMOKE_FINAL)),
    T4_MODEL: dict(   # LoRA on a 4-bit base through Unsloth
        task=dict(name="arithmetic", digits=3, terms=4, n_train=20_000, answer_rule="auto",
                  system_prompt="Reply with the final number only."),
        max_new_tokens=16, prompts=8, group=8, lr=2e-5, steps=200, n_eval=200, trl_preset="t4",
        num_threads=torch.get_num_threads(), min_lift=None, final_config="first_run",
        final_overrides=FIRST_RUN[T4_MODEL]["overrides"],
        smoke=dict(prompts=8, group=4, steps=12, **SMOKE_FINAL)),
}
