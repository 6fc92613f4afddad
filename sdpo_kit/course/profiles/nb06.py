"""Notebook 06 (test-time discovery: best-of-k, multi-turn reprompting and test-time SDPO).

The tiny lab runs the SDPO skill lab (``configs/sdpo_lab.yaml``: long addition with digit feedback) at both
ends of its dial; a real model runs one model, with LoRA. The settings:

``config``          the run config whose ``model.lab`` recipe builds the tiny lab's warm starts (None: a real model)
``task``            ``tasks.base.make_task`` arguments
``dial``            the warm starts' ``context_steps``, bottom and top (None: a real model, one model)
``warm_start``      changes to the config's warm-start recipe (smoke: small, cheap warm starts)
``load``            ``models.load_policy`` arguments for a real model (a 16-bit base: the copy per question
                    cannot train a 4-bit one)
``templates``       the teacher's reprompt (the lab's one-line form; English for an instruct model)
``max_new_tokens``, ``temperature``   sampling, as the config's trainer samples
``batch``           B: attempts sampled per batch (and per multi-turn round)
``budgets``         the k's the discovery rate is read at; K = max(budgets), a multiple of ``batch``
``lr``              test-time SDPO's AdamW rate (``test_time_sdpo``'s default)
``screen_rows``, ``screen_samples``   held-out questions screened for hard ones, and plain samples per question
``max_hard``        hard questions used at most
``n_check``         questions the inline loops run on, to compare them with the library
``num_threads``     torch threads (None: leave them as they are); the tiny lab's matmuls are too small to split
``check_dial``      True where the full-size run prints the dial's effect beside its usual one (section 8);
                    None where a run is too small to show it, as in smoke mode
"""

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.text.reprompt import FEEDBACK_TEMPLATE, REPROMPT_TEMPLATE, SOLUTION_TEMPLATE

# configs/sdpo_lab.yaml's one-line teacher prompt, the form the dial's SFT rows taught (tests check they agree)
LAB_TEMPLATES = dict(reprompt_template="{prompt}{solution}{feedback}",
                     solution_template="\nCorrect answer: {successful_previous_attempt}",
                     feedback_template="\nFeedback: {feedback_raw}")
# TRL's default English templates, which an instruct model reads
TRL_TEMPLATES = dict(reprompt_template=REPROMPT_TEMPLATE, solution_template=SOLUTION_TEMPLATE,
                     feedback_template=FEEDBACK_TEMPLATE)

PROFILES = {
    TINY_LAB: dict(   # the skill lab; task, templates, length and temperature are configs/sdpo_lab.yaml's
        config="sdpo_lab", task=dict(name="long_addition", n_eval=200, seed=0), dial=(0, 1000),
        warm_start={}, load={}, templates=LAB_TEMPLATES, max_new_tokens=7, temperature=1.0, batch=8,
        budgets=(8, 16, 32, 64, 128), lr=1e-4, screen_rows=200, screen_samples=32, max_hard=40, n_check=4,
        num_threads=1, check_dial=True,
        smoke=dict(warm_start=dict(sft_steps=200, sft_batch_size=16, sft_cycle_steps=0), dial=(0, 100),   # cheap
                   batch=4, budgets=(4, 8), screen_rows=24, screen_samples=8, max_hard=4, n_check=2,
                   check_dial=None)),
    REAL_CPU_MODEL: dict(   # SmolLM2-135M-Instruct: LoRA, fp32, sums asked in words
        config=None, task=dict(name="word_problems"), dial=None, warm_start=None, load=dict(load_in_4bit=False),
        templates=TRL_TEMPLATES, max_new_tokens=48, temperature=0.7, batch=4, budgets=(4, 8, 16), lr=1e-4,
        screen_rows=16, screen_samples=8, max_hard=4, n_check=2, num_threads=None, check_dial=None,
        smoke=dict(task=dict(name="word_problems", terms=3),   # three numbers: at 12 tokens most first batches fail
                   max_new_tokens=12, batch=2, budgets=(2, 4), screen_rows=2, screen_samples=4, max_hard=1,
                   n_check=1, num_threads=1)),
    T4_MODEL: dict(   # Qwen2.5-0.5B-Instruct on a GPU: LoRA on a 16-bit base (a copy per question)
        config=None, task=dict(name="arithmetic", digits=3, terms=4, n_train=20_000, answer_rule="auto",
                               system_prompt="Reply with the final number only."),
        dial=None, warm_start=None, load=dict(load_in_4bit=False), templates=TRL_TEMPLATES, max_new_tokens=16,
        temperature=1.0, batch=8, budgets=(8, 16, 32, 64, 128), lr=1e-4, screen_rows=100, screen_samples=32,
        max_hard=20, n_check=4, num_threads=None, check_dial=None,
        smoke=dict(batch=4, budgets=(4, 8), screen_rows=24, screen_samples=8, max_hard=4, n_check=2)),
}
