"""The TRL path: build_trl_grpo_trainer on the tiny lab (CPU), its presets, its batch-size
check and its named reward errors."""

import json
import math

import datasets
import pytest
import torch
from test_metrics import GRPO_ROW_KEYS

from sdpo_kit.grpo.trl import build_trl_grpo_trainer, grpo_args
from sdpo_kit.models import load_policy
from sdpo_kit.rewards import RewardError, exact_match_reward
from sdpo_kit.tasks import ArithmeticTask

TASK = ArithmeticTask(n_eval=40)
TRAIN, HELDOUT = TASK.splits()
SMALL = {"max_steps": 2, "prompts_per_step": 4, "num_generations": 4, "max_completion_length": 4,
         "learning_rate": 1e-3, "seed": 0}


def test_two_steps_on_the_tiny_lab(tmp_path):
    """Two TRL GRPO steps on CPU with an exact-match reward: the loss is finite, the weights
    move, metrics.jsonl has a step-0 eval row then one row per step with the scratch loop's
    keys (eval/accuracy again at the last step), and plain callables get the same rows."""
    model, tok = load_policy("tiny-lab")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    seen = []
    trainer = build_trl_grpo_trainer(
        model, tok, exact_match_reward(), datasets.Dataset.from_list(TRAIN), preset="cpu",
        eval_fn=lambda m: TASK.evaluate(m, tok, HELDOUT[:20]), output_dir=tmp_path,
        callbacks=[seen.append], verbose=False, **SMALL,
    )
    a = trainer.args
    assert a.use_cpu and not a.bf16 and not a.fp16 and not a.gradient_checkpointing
    assert a.per_device_train_batch_size == 16 and a.num_generations == 4 and a.report_to == []
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert set(rows[0]) == {"step", "eval/accuracy"}
    for r in rows[1:]:
        assert {"reward/mean", "reward/std", "loss", "reward/exact_match"} <= set(r)
        assert math.isfinite(r["loss"]) and 0.0 <= r["reward/mean"] <= 1.0
    assert "eval/accuracy" in rows[2] and 0.0 <= rows[2]["eval/accuracy"] <= 1.0
    assert seen == rows
    changed = [n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert changed, "no parameter changed after two GRPO steps"


@pytest.mark.parametrize(
    "kwargs, nearest",
    [
        ({"per_device_train_batch_size": 10, "num_generations": 4}, "8 or 12"),
        ({"per_device_train_batch_size": 3, "num_generations": 4, "gradient_accumulation_steps": 2}, "2 or 4"),
        ({"per_device_train_batch_size": 3, "num_generations": 8}, "8"),  # nothing valid below
        ({"per_device_train_batch_size": 2, "num_generations": 4, "generation_batch_size": 10}, "8 or 12"),
    ],
)
def test_batch_not_divisible_by_group_names_the_nearest_valid_values(kwargs, nearest, tmp_path):
    """A generation batch that is not whole groups fails with a ValueError giving the nearest
    valid sizes; TRL itself rejects the bad size and accepts each suggested one."""
    from trl import GRPOConfig

    with pytest.raises(ValueError, match=f"Nearest valid .*: {nearest}") as e:
        grpo_args("cpu", tmp_path, **kwargs)
    assert f"num_generations={kwargs['num_generations']}" in str(e.value)
    key = "generation_batch_size" if "generation_batch_size" in kwargs else "per_device_train_batch_size"
    base = {"output_dir": str(tmp_path), "use_cpu": True, "bf16": False, "report_to": "none"}
    with pytest.raises(ValueError):
        GRPOConfig(**base, **kwargs)
    for good in nearest.split(" or "):
        GRPOConfig(**base, **{**kwargs, key: int(good)})


def test_prompts_per_step_maps_to_whole_groups(tmp_path):
    """prompts_per_step x num_generations completions per optimizer step, split over
    gradient accumulation; t4 preset is fp16 with gradient checkpointing, never bf16."""
    args = grpo_args("cpu", tmp_path, prompts_per_step=16, num_generations=8, gradient_accumulation_steps=4)
    assert args["per_device_train_batch_size"] * args["gradient_accumulation_steps"] == 16 * 8
    t4 = grpo_args("t4", tmp_path, prompts_per_step=2, num_generations=4)
    assert t4["fp16"] is True and t4["bf16"] is False and t4["gradient_checkpointing"] is True


def test_learning_rate_schedule_matches_the_scratch_default_unless_set(tmp_path):
    """Constant by default (the scratch loop's default; TRL's own is linear); the config's choice passes through."""
    assert grpo_args("cpu", tmp_path)["lr_scheduler_type"] == "constant"
    assert grpo_args("cpu", tmp_path, lr_scheduler_type="linear")["lr_scheduler_type"] == "linear"


def test_unknown_option_is_named(tmp_path):
    """A misspelt option is reported by name instead of being passed on or dropped."""
    with pytest.raises(ValueError, match="num_generation"):
        grpo_args("cpu", tmp_path, num_generation=4)


def boom_reward(prompts, completions, **kw):
    raise ZeroDivisionError("bad reward")


def nan_reward(prompts, completions, **kw):
    return [float("nan")] * len(completions)


@pytest.mark.parametrize("fn, cause", [(boom_reward, ZeroDivisionError), (nan_reward, None)])
def test_bad_reward_inside_trl_is_reraised_naming_the_function(fn, cause, tmp_path):
    """A reward that raises (traceback chained) or returns NaN stops TRL's training with a
    RewardError that names the function."""
    model, tok = load_policy("tiny-lab")
    trainer = build_trl_grpo_trainer(model, tok, [fn], TRAIN, output_dir=tmp_path, verbose=False,
                                     **{**SMALL, "max_steps": 1})
    with pytest.raises(RewardError, match=fn.__name__) as e:
        trainer.train()
    if cause is not None:
        assert isinstance(e.value.__cause__, cause)


def test_missing_answer_column_is_named(tmp_path):
    """A dataset without the column a reward needs fails before training, naming both."""
    model, tok = load_policy("tiny-lab")
    rows = [{"prompt": r["prompt"]} for r in TRAIN[:32]]
    with pytest.raises(ValueError, match="'exact_match'.*'answer'"):
        build_trl_grpo_trainer(model, tok, exact_match_reward(), rows, output_dir=tmp_path, **SMALL)


def test_num_iterations_counts_sampled_batches_like_the_scratch_loop(tmp_path):
    """One sdpo_kit step is one sampled batch with mu optimizer passes; TRL counts passes, so
    max_steps is multiplied by mu there, and the metrics rows are numbered in sampled batches."""
    args = grpo_args("cpu", tmp_path, max_steps=5, num_iterations=3, prompts_per_step=2, num_generations=4)
    assert args["max_steps"] == 15
    assert grpo_args("cpu", tmp_path, max_steps=5, num_iterations=1)["max_steps"] == 5

    task = ArithmeticTask(n_eval=8)
    train_rows, heldout = task.splits()
    model, tok = load_policy("tiny-lab")
    trainer = build_trl_grpo_trainer(
        model, tok, [exact_match_reward()], train_rows[:16], preset="cpu", output_dir=tmp_path,
        eval_fn=lambda m: task.evaluate(m, tok, heldout), verbose=False,
        max_steps=2, num_iterations=2, prompts_per_step=2, num_generations=4, max_completion_length=4,
    )
    trainer.train()
    assert trainer.state.global_step == 4
    steps = [r["step"] for r in trainer.metrics_callback.history]
    assert steps == [0, 1, 2]  # step-0 eval, then one row per sampled batch
    assert "eval/accuracy" in trainer.metrics_callback.history[-1]


def test_rows_have_the_scratch_keys_and_follow_the_schedule_in_sampled_batches(tmp_path):
    """mu = 2, a linear schedule: each row (one per sampled batch) carries the scratch loop's keys but
    the three TRL has no counterpart for here (loss/policy: TRL 1.16 logs it only with an entropy bonus;
    stats/ratio_mean; stats/share_prompt), and its learning rate is the rate transformers logs, the one the
    batch's last optimizer pass used: lr (1 - (mu s - 1) / (mu max_steps)). (The scratch loop logs the rate
    after the step, lr (1 - s / max_steps): one optimizer step later, tests/test_metrics.py.)"""
    model, tok = load_policy("tiny-lab")
    trainer = build_trl_grpo_trainer(
        model, tok, [exact_match_reward()], datasets.Dataset.from_list(TRAIN), preset="cpu", output_dir=tmp_path,
        eval_fn=lambda m: TASK.evaluate(m, tok, HELDOUT[:8]), verbose=False,
        **{**SMALL, "max_steps": 3, "num_iterations": 2, "lr_scheduler_type": "linear"})
    trainer.train()
    rows = [r for r in trainer.metrics_callback.history if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert GRPO_ROW_KEYS - {"loss/policy", "stats/ratio_mean", "stats/share_prompt"} <= set(r), r
        assert r["stats/learning_rate"] == pytest.approx(1e-3 * (1 - (2 * r["step"] - 1) / 6), rel=1e-6)
