"""The scratch SDPO trainer: a few steps on the tiny lab for each mode and teacher kind, the
teacher in the reference slot (no third model), feedback reprompts, the coverage warning,
resume with an EMA teacher, the update norm and the loss-scale ablation (AdamW barely notices)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.rewards import feedback_reward
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loop import SDPOScratchTrainer
from sdpo_kit.sdpo.teacher import teacher_prompt_batch
from sdpo_kit.tasks import ArithmeticTask

SDPO_KEYS = {"sdpo/distill_loss", "sdpo/teacher_coverage", "sdpo/success_rate", "sdpo/feedback_frac",
             "sdpo/reprompt_truncated", "sdpo/teacher_student_kl", "sdpo/update_norm", "loss", "reward/mean"}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def char_reward(prompts, completions, **kwargs):
    """In [0, 1) and varied, so with success_reward_threshold 0.5 some siblings succeed."""
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


def make_loop(tok, out=None, rewards=(char_reward,), **cfg):
    task = ArithmeticTask(n_eval=16)
    rows, heldout = task.splits()
    kw = dict(max_steps=3, prompts_per_step=3, num_generations=4, max_completion_length=4, learning_rate=1e-2,
              success_reward_threshold=0.5, output_dir=str(out) if out else None)
    return SDPOScratchTrainer(build_model(tok, seed=0), tok, list(rewards), rows, SDPOScratchConfig(**{**kw, **cfg}),
                    eval_fn=lambda m: task.evaluate(m, tok, heldout))


@pytest.mark.parametrize("cfg", [
    {},                                                                         # sampled_token, ema
    {"distillation_mode": "topk_logits", "distillation_topk": 5, "teacher_model_kind": "base"},
    {"distillation_mode": "full_logits", "distillation_alpha": 0.5, "teacher_model_kind": "live", "num_iterations": 2},
    {"distillation_weight": 0.5, "distillation_micro_batch_size": 5},
    {"distillation_mode": "sequence", "teacher_model_kind": "base"},
])
def test_a_few_steps(tok, cfg):
    """Finite losses, the weights move, every row has the SDPO keys, some rows have a teacher."""
    loop = make_loop(tok, **cfg)
    before = [p.detach().clone() for p in loop.model.parameters()]
    rows = [r for r in loop.train() if r["step"] > 0]
    assert len(rows) == 3 and all(SDPO_KEYS <= set(r) and math.isfinite(r["loss"]) for r in rows)
    assert any(r["sdpo/teacher_coverage"] > 0 for r in rows)
    assert any(not torch.equal(a, b) for a, b in zip(before, loop.model.parameters()))


def first_step(tok, **cfg) -> dict:
    return [r for r in make_loop(tok, max_steps=1, **cfg).train() if r["step"] == 1][0]


@pytest.fixture(scope="module")
def unscaled(tok):
    return first_step(tok)


def test_update_norm_is_the_parameter_change(tok, unscaled):
    """lr > 0 (with a teacher for most rows): the weights move, sdpo/update_norm > 0; lr = 0: AdamW
    moves nothing and the norm is exactly 0 (the loss is not 0: it is the norm, not the loss)."""
    assert unscaled["sdpo/teacher_coverage"] > 0 and unscaled["sdpo/update_norm"] > 0
    frozen = first_step(tok, learning_rate=0.0)
    assert frozen["sdpo/update_norm"] == 0.0 and frozen["loss"] == pytest.approx(unscaled["loss"], rel=1e-6) != 0


def test_update_norm_equals_the_flat_norm_and_the_foreach_computation(tok):
    """One ``optimizer_step`` (AdamW on the tiny lab): the norm it returns (public ops: a vector_norm per
    tensor, then over the tensors) equals the L2 norm of all the parameter changes flattened into one
    vector, taken in float64 (a flat fp32 norm of the lab's 113k changes is itself off by ~4e-5), and the
    computation it replaced (torch._foreach_sub / _foreach_norm, 501ed74), within fp32 tolerance
    (rtol=1e-5, atol=1e-6)."""
    loop = make_loop(tok)
    params = [p for p in loop.model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    ids = torch.tensor([tok("12+34=46")["input_ids"]])                              # (1, T)
    got = torch.tensor(loop.optimizer_step(loop.model(input_ids=ids, labels=ids).loss))  # scalar
    after = [p.detach() for p in params]
    delta = torch.cat([(a.double() - b.double()).flatten() for a, b in zip(after, before)])  # (N,) float64
    flat = torch.linalg.vector_norm(delta)                                                   # scalar
    old = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(torch._foreach_sub(after, before))))  # scalar
    assert got > 0
    torch.testing.assert_close(got, flat.float(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got, old, rtol=1e-5, atol=1e-6)


def test_loss_scale_changes_the_loss_not_the_adamw_update(tok, unscaled):
    """distillation_loss_scale 1/3 at the same lr and seed: the same rollout, so ``loss`` is a third
    and sdpo/distill_loss (unscaled) the same; AdamW's first step is about lr * sign(g), so the
    update norm stays within 5% of the unscaled one (measured ~0.997), nowhere near 1/3."""
    third = first_step(tok, distillation_loss_scale=1 / 3)
    assert third["loss"] == pytest.approx(unscaled["loss"] / 3, rel=1e-5)
    assert third["sdpo/distill_loss"] == pytest.approx(unscaled["sdpo/distill_loss"], rel=1e-6)
    ratio = third["sdpo/update_norm"] / unscaled["sdpo/update_norm"]
    assert 0.95 < ratio < 1.05


def test_the_teacher_takes_the_reference_slot(tok):
    """beta is forced to 0 (with a warning) and the EMA teacher is the one extra model: no third."""
    with pytest.warns(UserWarning, match="beta is set to 0"):
        loop = make_loop(tok, beta=0.1)
    assert loop.config.beta == 0.0 and loop.ref_model is loop.teacher.model
    models = {id(m) for m in (loop.model, loop.ref_model, loop.teacher.model) if m is not None}
    assert len(models) == 2
    ema = loop.teacher.model.lm_head.weight.detach().clone()
    loop.train()
    assert not torch.equal(ema, loop.teacher.model.lm_head.weight)  # the EMA followed the student


def test_feedback_reaches_the_teacher_prompt(tok):
    """With the feedback reward and include_environment_feedback, rows without a successful sibling
    still get a teacher (its prompt carries the checker's feedback)."""
    loop = make_loop(tok, rewards=(feedback_reward(),), include_environment_feedback=True, max_steps=1,
                     success_reward_threshold=1.0)
    row = [r for r in loop.train() if r["step"] == 1][0]
    assert row["sdpo/feedback_frac"] > 0 and row["sdpo/teacher_coverage"] >= row["sdpo/feedback_frac"]


def test_no_teacher_for_long_is_reported(tok):
    """Coverage 0 for 10 steps in a row (an untrained model never succeeds): a warning saying why."""
    loop = make_loop(tok, rewards=(feedback_reward(),), success_reward_threshold=1.0, max_steps=10,
                     prompts_per_step=1, num_generations=2, max_completion_length=1)
    with pytest.warns(UserWarning, match="no row had a teacher for 10 steps"):
        rows = loop.train()
    assert all(r["sdpo/teacher_coverage"] == 0 and r["loss"] == 0 for r in rows if r["step"] > 0)


def test_teacher_prompts_are_cut_from_the_left(tok):
    with pytest.warns(UserWarning, match="cut from the left"):
        ids, mask, cut = teacher_prompt_batch(tok, ["a" * 30, "b" * 5], max_len=12)
    assert ids.shape == (2, 12) and cut == 0.5 and tok.decode(ids[0][mask[0].bool()]).endswith("a" * 5)


def test_resume_with_an_ema_teacher(tok, tmp_path):
    """4 steps straight vs 2 + resume from checkpoint-2: the same rows (the EMA teacher's weights
    and step count are in the checkpoint)."""
    full = make_loop(tok, tmp_path / "full", max_steps=4, save_steps=2, teacher_update_rate=0.3).train()
    resumed = make_loop(tok, tmp_path / "resumed", max_steps=4, save_steps=2, teacher_update_rate=0.3)
    rows = resumed.train(resume_from_checkpoint=tmp_path / "full" / "checkpoint-2")
    assert (tmp_path / "full" / "checkpoint-2" / "teacher" / "model.safetensors").exists()
    strip = [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]   # wall clocks differ
    expect = [{k: v for k, v in r.items() if not k.startswith("time/")} for r in full]
    for a, b in zip(strip, expect):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-6), (a["step"], k)
    assert json.loads((tmp_path / "full" / "checkpoint-2" / "trainer_state.json").read_text())["extra"]["teacher"]["steps"] == 2


@pytest.mark.parametrize("name", ["sdpo", "sdpo_feedback"])
def test_shipped_configs_run(name, tmp_path):
    """configs/sdpo.yaml and configs/sdpo_feedback.yaml load as algorithm sdpo and train two steps."""
    from pathlib import Path

    from sdpo_kit import cli
    from sdpo_kit.registry import load_config

    path = Path(__file__).resolve().parents[1] / "configs" / f"{name}.yaml"
    cfg = load_config(path)
    assert cfg.algorithm == "sdpo" and type(cfg.trainer) is SDPOScratchConfig
    assert cfg.trainer.include_environment_feedback == (name == "sdpo_feedback")
    assert cli.main(["train", str(path), "--max-steps", "2", "--output-dir", str(tmp_path), "--set", "task.n_eval=16",
                     "--set", "trainer.prompts_per_step=2"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(SDPO_KEYS <= set(r) for r in rows if "loss" in r)


def test_without_feedback_a_step_with_no_success_has_no_teacher(tok):
    """Successful siblings only (the feedback reward, include_environment_feedback off): a row has a teacher
    only where another row of its group succeeded, so every step whose batch has no success has coverage 0
    and distils nothing; and some step of this run does have a teacher (notebook 05 states this of its runs)."""
    loop = make_loop(tok, max_steps=8, prompts_per_step=1, num_generations=3, include_environment_feedback=False)
    rows = [r for r in loop.train() if r["step"] > 0]
    assert all(r["sdpo/feedback_frac"] == 0 for r in rows)
    assert any(r["sdpo/success_rate"] == 0 for r in rows) and any(r["sdpo/teacher_coverage"] > 0 for r in rows)
    assert all(r["sdpo/teacher_coverage"] == 0 and r["sdpo/distill_loss"] == 0 for r in rows if r["sdpo/success_rate"] == 0)


def test_grpo_and_sdpo_from_one_start_and_seed_sample_the_same_first_batch(tok):
    """Notebook 05 compares GRPO and SDPO from one warm start with one seed: both evaluate the same start
    (step 0) and sample the same first batch (the same rewards), so they differ only from the first update on."""
    from sdpo_kit.grpo.config import GRPOScratchConfig
    from sdpo_kit.grpo.loop import GRPOScratchTrainer

    task = ArithmeticTask(n_eval=16)
    rows, heldout = task.splits()
    kw = dict(max_steps=1, prompts_per_step=3, num_generations=4, max_completion_length=4, learning_rate=1e-3,
              eval_every=1, seed=3)
    eval_fn = lambda m: task.evaluate(m, tok, heldout)   # noqa: E731
    grpo = GRPOScratchTrainer(build_model(tok, seed=0), tok, [feedback_reward()], rows, GRPOScratchConfig(**kw), eval_fn=eval_fn).train()
    sdpo = SDPOScratchTrainer(build_model(tok, seed=0), tok, [feedback_reward()], rows, SDPOScratchConfig(**kw),
                    eval_fn=eval_fn).train()
    first = [next(r for r in h if r.get("step") == 0 and "eval/accuracy" in r) for h in (grpo, sdpo)]
    step1 = [next(r for r in h if r.get("step") == 1 and "loss" in r) for h in (grpo, sdpo)]
    assert first[0]["eval/accuracy"] == pytest.approx(first[1]["eval/accuracy"], abs=1e-12)
    for key in ("reward/mean", "reward/std"):
        assert step1[0][key] == pytest.approx(step1[1][key], rel=1e-6, abs=1e-9), key
