"""Sampling parity on the TRL backend: a model's own ``generation_config`` (a hub model's
repetition_penalty, top_k, ...) does not reach TRL's sampler either, so its samples are the
softmax(logits / T) the loss assumes (tests/test_sampling.py checks the scratch backend).

One TRL GRPO step with each model, the sampled completions caught by the reward function. Before
``trl_base.NeutralGenerationDefaults`` this failed on trl 1.16: ``no_repeat_ngram_size`` (TRL leaves
it unset) and ``min_p`` (TRL passes None) came from the model's config.
"""

from __future__ import annotations

from sdpo_kit.grpo.trl import build_trl_grpo_trainer
from sdpo_kit.models import load_policy
from sdpo_kit.tasks import ArithmeticTask

ROWS, _ = ArithmeticTask(n_eval=40).splits()
QUIRKS = {"repetition_penalty": 1.3, "top_k": 3, "no_repeat_ngram_size": 1, "min_p": 0.3}


def sampled(tmp_path, quirky: bool = False, **overrides) -> list[str]:
    """The completions of one TRL GRPO step (seed 0) on the tiny lab."""
    model, tok = load_policy("tiny-lab")
    if quirky:
        model.generation_config.update(**QUIRKS)
    seen: list[str] = []

    def catch(prompts, completions, **kwargs):
        seen.extend(c[0]["content"] for c in completions)
        return [0.0] * len(completions)

    trainer = build_trl_grpo_trainer(model, tok, catch, ROWS, preset="cpu", output_dir=tmp_path, verbose=False,
                                     max_steps=1, prompts_per_step=4, num_generations=4, max_completion_length=8,
                                     learning_rate=1e-6, seed=0, **overrides)
    trainer.train()
    if quirky:
        assert model.generation_config.repetition_penalty == 1.3  # given back as it was
    return seen


def test_trl_samples_ignore_the_model_generation_defaults(tmp_path):
    """The same weights with and without the quirks sample the same completions, seed for seed; the
    quirks passed to TRL on purpose (generation_kwargs) sample others, so the test can tell."""
    plain = sampled(tmp_path / "plain")
    assert len(plain) == 16
    assert sampled(tmp_path / "quirky", quirky=True) == plain
    assert sampled(tmp_path / "asked", generation_kwargs=QUIRKS) != plain
