"""Notebook 03 (rewards: verifiable, self-scored and supervised): the settings that follow the model.

``task`` names a task of ``tasks.base.TASKS`` and its settings (the prompt format and the answer rule are
the task's); ``max_new_tokens`` the completion budget (characters for the tiny lab, tokens for a real
model); ``group`` the completions per prompt (G); ``n_probe`` the held-out prompts whose G samples every
reward scores; ``hack_steps`` the GRPO steps of each reward-hacking run, ``prompts`` its prompts per step
(B = prompts x G), ``lr`` its AdamW learning rate and ``temperature`` its sampling temperature (the probe
batch's too); ``n_eval`` the held-out problems of the greedy evaluation, run every ``eval_every`` steps;
``collapse`` the usual change of section 5's runs from their first steps to their last, printed beside each
run's own: ``(low, high)`` per scorer and metric, None for an open side (measured on the tiny lab only: None
elsewhere, where the notebook prints the changes without a range)."""

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB

PROFILES = {
    TINY_LAB: dict(
        task=dict(name="arithmetic", digits=1, terms=3),          # "3+5+1=", the answer on the first line
        max_new_tokens=4, group=8, n_probe=100, hack_steps=100, prompts=16, lr=3e-4, temperature=1.0,
        n_eval=200, eval_every=10,
        # the collapse section 5 shows (within 30 steps, so at either size): the self-scored reward climbs,
        # the group's answers agree, accuracy does not rise; the frozen scorer heads the same way
        collapse=dict(policy={"reward/mean": (0.3, None), "reward/distinct_in_group": (None, -1.0),
                              "eval/accuracy": (None, 0.0)},
                      frozen={"reward/mean": (0.0, None), "reward/distinct_in_group": (None, 0.0),
                              "eval/accuracy": (None, 0.0)}),
        smoke=dict(n_probe=32, hack_steps=30)),
    REAL_CPU_MODEL: dict(
        task=dict(name="word_problems"),                          # "What is 13 - 4? Show your work, then end with ####..."
        max_new_tokens=48, group=4, n_probe=8, hack_steps=20, prompts=2, lr=1e-4, temperature=0.7,
        n_eval=30, eval_every=10, collapse=None,                  # notebook 01's settings for this model
        smoke=dict(max_new_tokens=16, n_probe=2, hack_steps=2, prompts=1, n_eval=4)),
    T4_MODEL: dict(
        task=dict(name="arithmetic", digits=3, terms=4, n_train=20_000, answer_rule="auto",
                  system_prompt="Reply with the final number only."),
        max_new_tokens=16, group=8, n_probe=16,                   # 16: the inline rewards run one unbatched forward
        hack_steps=60, prompts=8, lr=2e-5, temperature=1.0, n_eval=200, eval_every=10, collapse=None,
        smoke=dict(hack_steps=30)),
}
