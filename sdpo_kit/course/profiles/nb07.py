"""Notebook 07 (teacher-student PPO): the student, its teacher, the reward model and the sizes per model.

``task`` the task's arguments (``tasks.base.make_task``); ``max_new_tokens`` the completion budget
(characters on the tiny lab, tokens on a real model); ``teacher`` (name, ``load_policy`` kwargs) and
``teacher_demo`` the chat messages the teacher reads before each question (the real CPU model's teacher is
the same model shown two worked answers: context distillation); ``reward_model`` the learned reward of
section 10; ``batch_size`` responses per PPO step (one per prompt), ``mini_batch_size``, ``ppo_epochs``,
``lr``, ``steps`` of each training run, ``eval_every``; ``probe_steps`` the short run whose rollout section 5
takes apart; ``rm_steps`` / ``rm_eval_every`` the run on the reward model; ``seeds`` of section 9;
``n_eval`` held-out questions; ``num_threads`` torch's CPU threads (None: leave torch's default);
``group`` / ``prompts`` what ``setup``'s preflight sizes the memory for (PPO samples one answer per prompt:
``group`` 1, ``prompts`` the batch size); ``kd_temperature`` the distillation temperature (``configs/teacher_student_ppo.yaml``'s);
``min_kd_gap_closed`` the share of the student-to-teacher gap distillation alone usually closes, printed beside
the run's (median over seeds; measured on the tiny lab at full size by ``benchmarks/bench_ppo.py``, where it closes
about 0.9; None where no run measured it, and in smoke mode)."""

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB

# the real CPU model's teacher reads two worked answers first (numbers outside the task's: no held-out problem shown)
DEMO = ({"role": "user", "content": "What is 23 + 14? Show your work, then end with #### and the number."},
        {"role": "assistant", "content": "23 + 14 = 37.\n#### 37"},
        {"role": "user", "content": "What is 31 - 6? Show your work, then end with #### and the number."},
        {"role": "assistant", "content": "31 - 6 = 25.\n#### 25"})

PROFILES = {   # settings that follow the model (a real model trains LoRA adapters: a smaller lr)
    TINY_LAB: dict(
        task=dict(name="arithmetic", digits=1, terms=3), max_new_tokens=4,      # "3+5+1=", the answer on the first line
        teacher=(TINY_LAB, dict(lab_config=dict(sft_steps=600))), teacher_demo=(),   # configs/teacher_student_ppo.yaml
        reward_model=dict(type="reward_model"),          # the tiny lab's own, built in code and cached
        batch_size=64, mini_batch_size=16, ppo_epochs=4, lr=3e-4, steps=60, eval_every=10, probe_steps=3,
        rm_steps=40, rm_eval_every=5, seeds=(0, 1, 2), n_eval=200, num_threads=1, kd_temperature=2.0,
        min_kd_gap_closed=0.5, group=1, prompts=64,
        smoke=dict(batch_size=16, mini_batch_size=8, steps=3, eval_every=1, rm_steps=3, rm_eval_every=1, seeds=(0,),
                   min_kd_gap_closed=None, prompts=16)),
    REAL_CPU_MODEL: dict(
        task=dict(name="word_problems"), max_new_tokens=48,   # "What is 13 - 4? Show your work, then end with ####..."
        teacher=(REAL_CPU_MODEL, dict(lora=False)), teacher_demo=DEMO,   # the same model, shown two worked answers
        reward_model=dict(type="probe_reward_model", n_questions=200, completion_format="#### {answer}"),
        batch_size=8, mini_batch_size=4, ppo_epochs=4, lr=1e-4, steps=12, eval_every=4, probe_steps=3,
        rm_steps=12, rm_eval_every=4, seeds=(0,), n_eval=50, num_threads=None, kd_temperature=2.0,
        min_kd_gap_closed=None, group=1, prompts=8,
        smoke=dict(max_new_tokens=16, batch_size=2, prompts=2, mini_batch_size=2, ppo_epochs=1, steps=1, eval_every=1,
                   probe_steps=1, rm_steps=1, rm_eval_every=1,
                   reward_model=dict(type="probe_reward_model", n_questions=8, wrong_per_question=1,
                                     completion_format="#### {answer}"),
                   n_eval=4, num_threads=1)),
    T4_MODEL: dict(
        task=dict(name="arithmetic", digits=3, terms=4, n_train=20_000, answer_rule="auto",
                  system_prompt="Reply with the final number only."), max_new_tokens=16,
        teacher=("Qwen/Qwen2.5-1.5B-Instruct", dict(lora=False)), teacher_demo=(),   # the same tokenizer
        reward_model=dict(type="probe_reward_model", n_questions=200),
        batch_size=32, mini_batch_size=8, ppo_epochs=4, lr=2e-5, steps=40, eval_every=6, probe_steps=3,
        rm_steps=40, rm_eval_every=5, seeds=(0, 1, 2), n_eval=200, num_threads=None, kd_temperature=2.0,
        min_kd_gap_closed=None, group=1, prompts=32,
        smoke=dict(batch_size=16, prompts=16, mini_batch_size=8, steps=3, eval_every=1, rm_steps=3, rm_eval_every=1,
                   seeds=(0,))),
}
