"""Our SDPOTRLTrainer(GRPOTrainer) against TRL's own trl.experimental.sdpo.SDPOTrainer: on the same
batch (one TRL built, teacher prompts included) with the same teacher weights, the same loss and
gradients, for each distillation mode and a blended weight."""

from __future__ import annotations

import os

import pytest
import torch
from datasets import Dataset
from transformers import LlamaForCausalLM

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
from trl.experimental.sdpo import SDPOConfig as TRLOwnSDPOConfig  # noqa: E402
from trl.experimental.sdpo import SDPOTrainer as TRLOwnSDPOTrainer  # noqa: E402

from sdpo_kit.lab.model import build_model, build_tokenizer  # noqa: E402
from sdpo_kit.sdpo.trl import build_trl_sdpo_trainer  # noqa: E402
from sdpo_kit.tasks import ArithmeticTask  # noqa: E402

G = 4


def char_reward(prompts, completions, **kwargs):
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    path = tmp_path_factory.mktemp("start")
    tok = build_tokenizer()
    build_model(tok, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    return path, tok


@pytest.mark.parametrize("sdpo", [
    {"distillation_mode": "sampled_token"},
    {"distillation_mode": "topk_logits", "distillation_topk": 5, "distillation_add_tail": True, "distillation_alpha": 0.5},
    {"distillation_mode": "full_logits", "distillation_alpha": 0.0, "distillation_weight": 0.5},
])
def test_our_sdpo_trainer_equals_trls(lab, tmp_path, sdpo):
    path, tok = lab
    rows = [dict(r) for r in ArithmeticTask(n_eval=10).splits()[0][:2]]
    common = dict(num_generations=G, max_completion_length=4, learning_rate=1e-3, success_reward_threshold=0.5,
                  teacher_model_kind="base", **sdpo)
    trl_model = LlamaForCausalLM.from_pretrained(path)
    trl_trainer = TRLOwnSDPOTrainer(
        model=trl_model, reward_funcs=[char_reward], train_dataset=Dataset.from_list(rows), processing_class=tok,
        args=TRLOwnSDPOConfig(output_dir=str(tmp_path / "trl"), use_cpu=True, bf16=False, report_to="none",
                         per_device_train_batch_size=2 * G, max_steps=1, logging_strategy="no", save_strategy="no",
                         **common))
    ours_model = LlamaForCausalLM.from_pretrained(path)
    ours = build_trl_sdpo_trainer(ours_model, tok, [char_reward], rows, preset="cpu", output_dir=tmp_path / "ours",
                                  verbose=False, max_steps=1, prompts_per_step=2, **common)
    for t in (trl_trainer, ours):
        t.model.train()
        t.current_gradient_accumulation_steps = 1
    torch.manual_seed(0)
    batch = trl_trainer._prepare_training_batch([r for r in rows for _ in range(G)])
    assert batch["self_distillation_mask"].sum() > 0, "no row had a teacher: the comparison would prove little"

    trl_loss = trl_trainer.compute_loss(trl_model, batch)
    trl_loss.backward()
    our_loss = ours.compute_loss(ours_model, batch)
    our_loss.backward()
    torch.testing.assert_close(our_loss, trl_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(ours_model.parameters(), trl_model.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6)


def test_our_teacher_prompts_equal_trls_on_a_batch(lab, tmp_path):
    """_generate_and_score_completions builds the same teacher inputs and mask as TRL's builder
    would from the same completions and rewards."""
    path, tok = lab
    rows = [dict(r) for r in ArithmeticTask(n_eval=10).splits()[0][:2]]
    ours = build_trl_sdpo_trainer(LlamaForCausalLM.from_pretrained(path), tok, [char_reward], rows, preset="cpu",
                                  output_dir=tmp_path, verbose=False, max_steps=1, prompts_per_step=2,
                                  num_generations=G, max_completion_length=4, success_reward_threshold=0.5)
    ours.model.train()
    torch.manual_seed(0)
    out = ours._generate_and_score_completions([r for r in rows for _ in range(G)])
    T = out["completion_ids"].size(1)
    assert torch.equal(out["teacher_input_ids"][:, -T:], out["completion_ids"])
    assert out["self_distillation_mask"].shape == (2 * G,)
    texts = tok.batch_decode(out["teacher_input_ids"][:, :-T], skip_special_tokens=False)
    for t, m in zip(texts, out["self_distillation_mask"].tolist()):
        assert ("Correct solution:" in t) == bool(m)


@pytest.mark.parametrize("sdpo", [{}, {"distillation_mode": "full_logits", "distillation_weight": 0.5},
                                  {"distillation_mode": "sequence", "distillation_loss_scale": 0.5}])
def test_scratch_backend_equals_the_trl_subclass_on_one_batch(lab, tmp_path, sdpo):
    """SDPOScratchTrainer.objective and SDPOTRLTrainer.compute_loss on one rollout (the scratch loop's), the
    same teacher prompts and teacher weights: the same loss and gradients (our ``sequence`` mode
    and ``distillation_loss_scale`` included, which TRL's own trainer lacks)."""
    from sdpo_kit.losses import group_advantages
    from sdpo_kit.sdpo.config import SDPOScratchConfig
    from sdpo_kit.sdpo.loop import SDPOScratchTrainer
    from sdpo_kit.sdpo.teacher import teacher_prompt_batch

    path, tok = lab
    rows = [dict(r) for r in ArithmeticTask(n_eval=10).splits()[0][:2]]
    knobs = dict(num_generations=G, max_completion_length=4, success_reward_threshold=0.5,
                 teacher_model_kind="base", **sdpo)
    scratch = SDPOScratchTrainer(LlamaForCausalLM.from_pretrained(path), tok, [char_reward], rows,
                       SDPOScratchConfig(prompts_per_step=2, **knobs))
    trl = build_trl_sdpo_trainer(LlamaForCausalLM.from_pretrained(path), tok, [char_reward], rows, preset="cpu",
                                 output_dir=tmp_path, verbose=False, max_steps=1, prompts_per_step=2, **knobs)
    trl.model.train()
    trl.current_gradient_accumulation_steps = 1
    torch.manual_seed(0)
    ro = scratch.sample_batch(rows)
    rewards, _, feedbacks = scratch.score(rows, ro)
    prompts = [r["prompt"] for r in rows for _ in range(G)]
    teacher_prompts, selection = scratch.config.teacher_prompts(prompts, scratch.completions(ro, rows), rewards, feedbacks)
    assert selection.mask.sum() > 0
    t_ids, t_mask, _ = teacher_prompt_batch(tok, teacher_prompts, 10240)
    mask = ro.completion_mask * selection.mask.unsqueeze(1)
    advantages = group_advantages(rewards, G, "group")
    blended = sdpo.get("distillation_weight", 1.0) < 1.0
    loss, _, _, _ = scratch.objective(ro, t_ids, t_mask, mask, advantages if blended else None)
    loss.backward()
    batch = {"prompt_ids": ro.prompt_ids, "prompt_mask": ro.prompt_mask, "completion_ids": ro.completion_ids,
             "completion_mask": ro.completion_mask, "advantages": advantages, "self_distillation_mask": selection.mask,
             "teacher_input_ids": torch.cat([t_ids, ro.completion_ids], 1),
             "teacher_attention_mask": torch.cat([t_mask, ro.completion_mask], 1)}
    trl_loss = trl.compute_loss(trl.model, batch)
    trl_loss.backward()
    torch.testing.assert_close(loss, trl_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(scratch.model.parameters(), trl.model.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6)
