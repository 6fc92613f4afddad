"""One naming scheme: every key a trainer logs is documented in sdpo_kit.core.metrics.METRICS, and the
TRL name map lands on documented keys; the sink writes, replays and calls back."""

from __future__ import annotations

import re

import pytest

from sdpo_kit.core.metrics import TRL_TO_SDPO, MetricsSink, metrics_from_trl_logs, read_jsonl
from sdpo_kit.grpo import loop as loop_module
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.registry import metric_keys
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.tasks import ArithmeticTask

METRICS = metric_keys()   # the shared keys and every registered algorithm's


def documented(key: str) -> bool:
    """A key of METRICS, or an instance of one of its <name> / <stat> patterns."""
    for pattern in METRICS:
        if re.fullmatch(re.sub(r"<\w+>", "[^/]+", re.escape(pattern)), key):
            return True
    return False


def test_every_key_the_scratch_loop_logs_is_documented():
    """A GRPOScratchTrainer row (beta > 0, eval on) carries only keys METRICS names."""
    tok = build_tokenizer()
    task = ArithmeticTask(n_eval=8)
    rows, heldout = task.splits()
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [exact_match_reward()], rows,
                    GRPOScratchConfig(max_steps=1, prompts_per_step=2, num_generations=2, beta=0.1, max_completion_length=2),
                    eval_fn=lambda m: task.evaluate(m, tok, heldout))
    keys = {k for row in loop.train() for k in row}
    assert {"loss/policy", "loss/kl", "stats/share_prompt", "eval/accuracy", "reward/exact_match"} <= keys
    assert not [k for k in keys if not documented(k)]


# the keys GRPOScratchTrainer's module docstring lists, its reward/<func name> as exact_match's; TRL's backend logs them
# too but for three it has no counterpart for with beta = 0 and no entropy bonus (tests/test_trl_grpo.py)
GRPO_ROW_KEYS = {"step", "reward/mean", "reward/std", "reward/exact_match", "loss", "loss/policy", "loss/kl",
                 "stats/clip_frac", "stats/clip_frac_low", "stats/clip_frac_high", "stats/ratio_mean",
                 "stats/frac_zero_std", "stats/learning_rate", "stats/share_prompt", "completion/mean_length",
                 "time/step_s"}


@pytest.mark.parametrize("num_iterations", [1, 2])
def test_every_row_has_every_key_the_docstring_lists_and_the_schedule(num_iterations):
    """Every training row of GRPOScratchTrainer carries each key its docstring lists, one row per step; the
    logged learning rate follows the linear schedule counted in steps, whatever mu (lr after step s:
    lr (1 - s / max_steps)); clip_frac is the sum of its low and high parts."""
    doc = loop_module.__doc__
    assert "reward/<func name>" in doc and all(k in doc for k in GRPO_ROW_KEYS - {"reward/exact_match"})
    tok = build_tokenizer()
    task = ArithmeticTask(n_eval=8)
    rows, heldout = task.splits()
    cfg = GRPOScratchConfig(max_steps=3, prompts_per_step=2, num_generations=4, max_completion_length=3,
                     learning_rate=1e-3, lr_scheduler_type="linear", num_iterations=num_iterations, seed=0)
    history = GRPOScratchTrainer(build_model(tok, seed=0), tok, [exact_match_reward()], rows, cfg,
                       eval_fn=lambda m: task.evaluate(m, tok, heldout)).train()
    steps = [r for r in history if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2, 3] and "eval/accuracy" in history[0] and "eval/accuracy" in history[-1]
    for r in steps:
        assert GRPO_ROW_KEYS <= set(r), GRPO_ROW_KEYS - set(r)
        assert r["stats/learning_rate"] == pytest.approx(1e-3 * (1 - r["step"] / 3), rel=1e-6, abs=1e-12)
        assert r["stats/clip_frac"] == pytest.approx(r["stats/clip_frac_low"] + r["stats/clip_frac_high"], abs=1e-6)


def test_trl_names_map_onto_documented_keys():
    """Every TRL name we map, and TRL's per-function and completion stats, land on METRICS keys."""
    assert not [v for v in TRL_TO_SDPO.values() if not documented(v)]
    row = metrics_from_trl_logs({"rewards/exact_match/mean": 0.5, "rewards/exact_match/std": 0.1,
                                 "completions/max_length": 4, "reward": 0.5}, step=3)
    assert row == {"reward/exact_match": 0.5, "reward/exact_match/std": 0.1, "completion/max_length": 4,
                   "reward/mean": 0.5, "step": 3}
    assert all(documented(k) for k in row)
    assert not documented("reward/mean/typo") and not documented("stats/made_up")


def test_sink_writes_replays_and_calls_back(tmp_path):
    """start(rows) rewrites metrics.jsonl with earlier rows (a resumed run's), log() appends and
    calls every callback with the new row only."""
    seen = []
    sink = MetricsSink(tmp_path, [seen.append])
    sink.start([{"step": 0, "eval/accuracy": 0.5}])
    sink.log({"step": 1, "loss": 0.1})
    assert read_jsonl(tmp_path / "metrics.jsonl") == [{"step": 0, "eval/accuracy": 0.5}, {"step": 1, "loss": 0.1}]
    assert seen == [{"step": 1, "loss": 0.1}] and sink.history[-1] == {"step": 1, "loss": 0.1}
    sink.start()
    assert read_jsonl(tmp_path / "metrics.jsonl") == [] and sink.history == []
