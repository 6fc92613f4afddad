"""The four real-model configs run on SmolLM2-135M-Instruct, a few steps on every backend the algorithm
has, and do what a run must: a finite loss, the adapter moved, metrics and completions logged, the
held-out evaluation within the run's budget; GRPO's reward pays right answers and only right answers.

Sizes are cut to a smoke run (2 steps, 2 prompts x 2 samples, 16 tokens, 4 held-out problems): the
configs' own sizes are what ``benchmarks/bench_real.py`` times."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

from sdpo_kit.registry import load_config
from sdpo_kit.training import train

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMOKE = {"trainer.max_steps": 2, "trainer.eval_every": 0, "task.n_eval": 4, "trainer.log_completions_every": 1,
         "trainer.max_completion_length": 16, "threads": 1}
GROUPED = {"trainer.prompts_per_step": 2, "trainer.num_generations": 2}
RUNS = [("real_grpo", "scratch", GROUPED), ("real_grpo", "trl", GROUPED), ("real_sdpo", "scratch", GROUPED),
        ("real_sdpo", "trl", GROUPED), ("real_sdpo_rlhf_book", "scratch", GROUPED), ("real_vapor", "scratch", GROUPED),
        ("real_vapor", "trl", GROUPED),
        ("real_ppo", "scratch", {"trainer.batch_size": 4, "trainer.mini_batch_size": 2, "trainer.ppo_epochs": 1})]


def final_answer(text: str) -> str | None:
    """An oracle written apart from text/answers.py: the number after the last '####', else the last integer."""
    marked = re.findall(r"####\s*(-?\d+)", text.replace(",", ""))
    numbers = re.findall(r"-?\d+", text.replace(",", ""))
    return marked[-1] if marked else numbers[-1] if numbers else None


@pytest.mark.parametrize("name, backend, sizes", RUNS, ids=[f"{n}-{b}" for n, b, _ in RUNS])
def test_a_real_config_runs_on_its_backends(name, backend, sizes, tmp_path):
    """Two steps of the config: finite losses, trainable weights changed, a row per step with reward and
    loss, held-out accuracy at the start and the end, completions.jsonl rows with their reference answers."""
    path = CONFIGS / f"{name}.yaml"
    if not path.exists():
        pytest.skip(f"{path.name} is not in configs/")
    cfg = load_config(path, {**SMOKE, **sizes, "backend": backend, "output_dir": str(tmp_path)})
    out = train(cfg, config_path=str(path))
    steps = [r for r in out["history"] if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(math.isfinite(r["loss"]) for r in steps)
    assert out["before"] is not None and out["after"] is not None
    rows = [json.loads(x) for x in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert rows and all(r.get("answer") is not None for r in rows)
    model = out["model"]
    assert hasattr(model, "peft_config"), "a real model trains its LoRA adapter"
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    if any(r["reward/mean"] > 0 or r.get("sdpo/teacher_coverage", 0) > 0 for r in steps) or name == "real_ppo":
        assert any(p.abs().sum() > 0 for p in lora_b), "the adapter moved (LoRA's B starts at zero)"


def test_real_grpo_pays_right_answers_and_only_right_answers(tmp_path):
    """Every completion a one-step run of configs/real_grpo.yaml sampled (4 prompts x 4 samples at its own
    48-token budget): reward 1 exactly when its final answer (an oracle written apart from the library)
    is the reference."""
    path = CONFIGS / "real_grpo.yaml"
    cfg = load_config(path, {**SMOKE, "trainer.max_steps": 1, "trainer.max_completion_length": 48,
                             "output_dir": str(tmp_path)})
    torch.manual_seed(0)
    train(cfg, config_path=str(path))
    rows = [json.loads(x) for x in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 4
    for r in rows:
        assert r["reward"] == float(final_answer(r["completion"]) == r["answer"]), r
    assert any(r["reward"] == 1.0 for r in rows), "some sampled answer is right (about 0.3 of them are)"


def test_real_grpo_samples_from_a_bf16_copy_and_weights_its_samples(tmp_path):
    """``trainer.sampling_dtype: bfloat16`` on the real model: two steps sampled from the bf16 copy, each row
    with the correction's weights (pi / pi_bf16 per token, TRL's token_truncate without a bound here: the raw
    ratios), which stay near 1 for a copy of the same weights, and the adapter trained."""
    path = CONFIGS / "real_grpo.yaml"
    cfg = load_config(path, {**SMOKE, **GROUPED, "trainer.sampling_dtype": "bfloat16", "output_dir": str(tmp_path),
                             "trainer.sampling_correction": "token_truncate", "trainer.sampling_correction_max": None})
    out = train(cfg, config_path=str(path))
    steps = [r for r in out["history"] if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(math.isfinite(r["loss"]) for r in steps)
    for r in steps:
        assert 0.9 < r["stats/sampler_weight_mean"] < 1.1, r
        assert 0.2 < r["stats/sampler_weight_min"] <= r["stats/sampler_weight_max"] < 5, r
