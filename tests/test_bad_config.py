"""Bad data and config that used to pass silently now fail up front, naming what is wrong.

Covers: a dataset with fewer rows than one step's distinct prompts (TRL trained 0 steps with a
buried transformers warning; the scratch loop repeated prompts inside a step), on both backends
and before any model work; and SDPO's ``loss_type``, which the distillation term never reads.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from sdpo_kit import make_task  # noqa: E402
from sdpo_kit.core.trl_base import check_enough_rows  # noqa: E402
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer  # noqa: E402
from sdpo_kit.lab.model import build_model, build_tokenizer  # noqa: E402
from sdpo_kit.registry import load_config  # noqa: E402
from sdpo_kit.rewards import exact_match_reward  # noqa: E402
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loop import SDPOScratchTrainer  # noqa: E402
from sdpo_kit.tasks import ArithmeticTask  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def arithmetic_rows(n):
    return [dict(r) for r in ArithmeticTask(n_eval=10).splits()[0][:n]]


# ---------------------------------------------------------------------------------------
# a dataset smaller than one step's batch
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("loop_class, config_class", [(GRPOScratchTrainer, GRPOScratchConfig), (SDPOScratchTrainer, SDPOScratchConfig)])
def test_scratch_loop_refuses_fewer_rows_than_prompts_per_step(tok, loop_class, config_class):
    """3 rows and prompts_per_step=4: the scratch trainer (the shared scaffold, so every scratch
    loop) fails while being built, naming the row count and the batch it needs; 4 rows pass."""
    model = build_model(tok, seed=0)
    config = config_class(max_steps=1, prompts_per_step=4, num_generations=2, max_completion_length=2)
    with pytest.raises(ValueError, match=r"train_rows has 3 row\(s\).*prompts_per_step=4"):
        loop_class(model, tok, [exact_match_reward()], arithmetic_rows(3), config)
    loop_class(model, tok, [exact_match_reward()], arithmetic_rows(4), config)


@pytest.mark.parametrize("algorithm", ["grpo", "sdpo", "vapor"])
def test_trl_builders_refuse_a_dataset_smaller_than_one_step(algorithm):
    """The reported case: 8 rows, num_generations=4, max_steps=2 and the default batch
    (per_device_train_batch_size 64 = 16 prompts x 4) trained 0 steps through TRL. Each builder
    now raises naming the 8 rows and the 16 prompts, before any model work: it is handed no
    model and no tokenizer at all, so anything past the check would crash differently."""
    from sdpo_kit.grpo.trl import build_trl_grpo_trainer
    from sdpo_kit.sdpo.trl import build_trl_sdpo_trainer
    from sdpo_kit.vapor.trl import build_trl_vapor_trainer

    build = {"grpo": build_trl_grpo_trainer, "sdpo": build_trl_sdpo_trainer, "vapor": build_trl_vapor_trainer}
    rows = [dict(r) for r in make_task("vapor_arithmetic", n_eval=10).splits()[0][:8]]
    with pytest.raises(ValueError, match=r"train_dataset has 8 row\(s\), but one step needs 16 distinct prompts"):
        build[algorithm](None, None, [exact_match_reward()], rows, preset="cpu", output_dir="unused",
                         verbose=False, num_generations=4, max_steps=2)


@pytest.mark.parametrize("prompts_per_step, accumulation", [(4, 1), (4, 2), (3, 3)])
def test_trl_row_check_matches_trls_sampler(prompts_per_step, accumulation):
    """The check fails exactly where TRL's RepeatSampler (the train dataloader's sampler) yields
    no index: for n rows around the threshold, ``check_enough_rows`` raises iff the sampler is empty."""
    from trl import GRPOConfig as GRPOTRLConfig
    from trl.trainer.utils import RepeatSampler

    from sdpo_kit.grpo.trl import grpo_args

    G = 4
    args = GRPOTRLConfig(**grpo_args("cpu", "unused", prompts_per_step=prompts_per_step, num_generations=G,
                                     gradient_accumulation_steps=accumulation))
    for n in range(1, 2 * prompts_per_step + 1):
        sampler = RepeatSampler(range(n), mini_repeat_count=G, batch_size=args.generation_batch_size // G,
                                repeat_count=args.steps_per_generation, seed=0)
        if len(list(sampler)) == 0:
            with pytest.raises(ValueError, match=f"has {n} row"):
                check_enough_rows(n, args)
        else:
            check_enough_rows(n, args)
    check_enough_rows(None, args)  # an iterable dataset has no length: not checked


# ---------------------------------------------------------------------------------------
# SDPO's loss_type
# ---------------------------------------------------------------------------------------
def test_sdpo_refuses_a_loss_type_the_distillation_term_ignores():
    """With distillation_weight=1 the loss is the distillation term alone, whose aggregation is
    fixed (TRL's SDPO: per-sequence token mean, then the mean), so a loss_type other than the
    default would change nothing: refused on both backends' configs, naming the reason. With
    distillation_weight < 1 it aggregates the GRPO term (as in TRL) and is accepted."""
    from sdpo_kit.sdpo.config import SDPOTRLConfig

    for config_class in (SDPOScratchConfig, SDPOTRLConfig):
        for loss_type in ("grpo", "bnpo", "dr_grpo"):
            with pytest.raises(ValueError, match=f"loss_type='{loss_type}' would change nothing.*"
                                                 "distillation_weight < 1"):
                config_class(loss_type=loss_type)
            assert config_class(loss_type=loss_type, distillation_weight=0.5).loss_type == loss_type
        assert config_class().loss_type == "dapo"  # the default, unchanged
    with pytest.raises(ValueError, match="loss_type must be one of"):
        SDPOScratchConfig(loss_type="ppo", distillation_weight=0.5)


@pytest.mark.parametrize("name", ["sdpo.yaml", "sdpo_feedback.yaml"])
@pytest.mark.parametrize("backend", ["scratch", "trl"])
def test_sdpo_configs_still_load(name, backend):
    """The shipped SDPO presets pass the new check on both backends, with the default loss_type."""
    cfg = load_config(CONFIGS / name, {"backend": backend})
    assert cfg.trainer.loss_type == "dapo" and cfg.trainer.distillation_weight == 1.0
