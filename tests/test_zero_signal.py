"""When a run cannot learn, it says so, on both backends; completions carry their reference answer;
held-out evaluation uses the run's completion budget and answer rule."""

import json
import logging

import datasets
import pytest

from sdpo_kit.core.metrics import MetricsSink, ZeroSignalWatch
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.trl import build_trl_grpo_trainer
from sdpo_kit.models import load_policy
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.tasks import ArithmeticTask

TASK = ArithmeticTask(n_eval=20)
TRAIN, HELDOUT = TASK.splits()


def zero_reward(prompts, completions, **kw):
    """A reward that cannot read anything: every completion scores 0."""
    return [0.0] * len(completions)


def rows(*fracs):
    return [{"step": i + 1, "stats/frac_zero_std": f, "reward/mean": 0.0} for i, f in enumerate(fracs)]


def test_the_watch_fires_once_after_n_steps_in_a_row_at_the_fraction(caplog):
    """3 steps in a row at >= 0.9 fire on the third; a step below resets the count; it fires once;
    steps=0 never fires; the text names the causes and the completions file."""
    watch = ZeroSignalWatch(0.9, 3, output_dir="runs/x")
    said = [watch(r) for r in rows(1.0, 0.95, 0.5, 1.0, 0.9, 1.0, 1.0, 1.0)]
    assert [bool(s) for s in said] == [False] * 5 + [True, False, False]
    text = said[5]
    for cause in ("answer_rule", "temperature", "too hard", "too easy", "runs/x/completions.jsonl", "step 6"):
        assert cause in text, cause
    off = ZeroSignalWatch(0.9, 0)
    assert not any(off(r) for r in rows(*[1.0] * 20))
    with pytest.raises(ValueError, match="zero_signal_fraction"):
        ZeroSignalWatch(1.5, 3)
    sink = MetricsSink(None, watch=ZeroSignalWatch(0.5, 2))
    with caplog.at_level(logging.WARNING, logger="sdpo_kit"):
        for r in rows(1.0, 1.0):
            sink.log(r)
    assert len(sink.warnings) == 1 and "no learning signal" in caplog.text


def test_scratch_loop_warns_when_no_completion_can_score(tmp_path, caplog):
    """A GRPO run whose reward pays nothing: the scratch loop logs the warning after
    zero_signal_steps steps, and writes each completion's reference answer to completions.jsonl."""
    model, tok = load_policy("tiny-lab")
    cfg = GRPOScratchConfig(max_steps=3, prompts_per_step=2, num_generations=2, max_completion_length=4, eval_every=0,
                     output_dir=str(tmp_path), log_completions_every=1, zero_signal_steps=2, seed=0)
    with caplog.at_level(logging.WARNING, logger="sdpo_kit"):
        loop = GRPOScratchTrainer(model, tok, [zero_reward], TRAIN, cfg)
        loop.train()
    assert len(loop.sink.warnings) == 1 and "for 2 steps in a row" in caplog.text
    logged = [json.loads(x) for x in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert logged and all(r["answer"] in {t["answer"] for t in TRAIN} for r in logged)


def test_trl_backend_warns_the_same_way(tmp_path, caplog):
    """The TRL backend reads TRL's frac_reward_zero_std through the same watch, and its completions
    table carries the rows' reference answers too."""
    model, tok = load_policy("tiny-lab")
    with caplog.at_level(logging.WARNING, logger="sdpo_kit"):
        trainer = build_trl_grpo_trainer(
            model, tok, [zero_reward, exact_match_reward()], datasets.Dataset.from_list(TRAIN), preset="cpu",
            output_dir=tmp_path, verbose=False, max_steps=2, prompts_per_step=2, num_generations=2,
            max_completion_length=4, seed=0, zero_signal_steps=2, log_completions_every=1,
            reward_weights=[1.0, 0.0])
        trainer.train()
    assert "no learning signal" in caplog.text and len(trainer.metrics_callback.sink.warnings) == 1
    logged = [json.loads(x) for x in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert logged and all(r["answer"] in {t["answer"] for t in TRAIN} for r in logged)


def test_cli_evaluates_with_the_runs_completion_budget(monkeypatch, tmp_path):
    """``sdpo-kit train`` evaluates held-out accuracy within trainer.max_completion_length, not the
    task's own (character-sized) default."""
    from sdpo_kit.registry import config_from_dict
    from sdpo_kit.training import train

    seen = []
    original = ArithmeticTask.evaluate

    def spy(self, model, tokenizer, rows=None, batch_size=256, max_new_tokens=None):
        seen.append(max_new_tokens)
        return original(self, model, tokenizer, rows, batch_size, max_new_tokens)

    monkeypatch.setattr(ArithmeticTask, "evaluate", spy)
    cfg = config_from_dict({"task": {"name": "arithmetic", "n_eval": 10},
                            "trainer": {"max_steps": 1, "prompts_per_step": 2, "num_generations": 2,
                                        "max_completion_length": 6, "eval_every": 0},
                            "output_dir": str(tmp_path)})
    train(cfg)
    assert seen and set(seen) == {6}


def test_a_gradient_left_on_the_model_does_not_leak_into_a_step():
    """A backward of the caller's own before the loop must not add to the loop's first step: the step from
    a model holding a stale gradient equals the step from a clean one (SGD, lr 1, no clip: the change is the
    gradient)."""
    import torch

    model, tok = load_policy("tiny-lab")
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg = GRPOScratchConfig(max_steps=1, prompts_per_step=2, num_generations=4, max_completion_length=4, eval_every=0,
                     max_grad_norm=float("inf"), temperature=1.0, seed=0)

    def one_step(stale: bool):
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(start[n])
        if stale:
            model(**tok(["1+2+3="], return_tensors="pt")).logits.sum().backward()
        loop = GRPOScratchTrainer(model, tok, [exact_match_reward()], TRAIN, cfg)
        loop.optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
        torch.manual_seed(0)
        loop.step()
        return torch.cat([(p.detach() - start[n]).flatten() for n, p in model.named_parameters()])

    torch.testing.assert_close(one_step(stale=True), one_step(stale=False), rtol=1e-5, atol=1e-6)
