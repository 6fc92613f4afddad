"""A checklist of what our SDPOTRLTrainer(GRPOTrainer) must get right, with the tiny lab in place of Qwen: each item on a few steps of the real TRL trainer (a 10-step run included), not a
full training run to convergence (benchmarks/bench_sdpo.py does those). Every test name carries
"trl": `make test-trl115` runs them on trl 1.15 too."""

from __future__ import annotations

import test_sdpo_trl
import torch
from transformers import LlamaForCausalLM

from sdpo_kit.rewards import exact_match_reward, feedback_reward
from sdpo_kit.sdpo.trl import build_trl_sdpo_trainer
from sdpo_kit.tasks import ArithmeticTask

G = 4
char_reward = test_sdpo_trl.char_reward
lab = test_sdpo_trl.lab   # the fixture: the tiny start saved to a folder, and its tokenizer


def trainer(lab, tmp_path, rewards=(char_reward,), **kw):
    path, tok = lab
    rows = [dict(r) for r in ArithmeticTask(n_eval=10).splits()[0][:8]]
    args = dict(preset="cpu", output_dir=tmp_path, verbose=False, max_steps=2, prompts_per_step=2,
                num_generations=G, max_completion_length=4, learning_rate=1e-2, success_reward_threshold=0.5)
    t = build_trl_sdpo_trainer(LlamaForCausalLM.from_pretrained(path), tok, list(rewards), rows, **{**args, **kw})
    t.model.train()
    t.current_gradient_accumulation_steps = 1
    return t


def batch(t, n=2):
    rows = [dict(r) for r in ArithmeticTask(n_eval=10).splits()[0][:n]]
    torch.manual_seed(0)
    return t._generate_and_score_completions([r for r in rows for _ in range(G)])


def test_trl_sdpo_mode_replaces_grpo_loss_entirely(lab, tmp_path):
    """distillation_weight 1: the advantages do not enter the loss (scrambling them changes nothing)."""
    t = trainer(lab, tmp_path)
    b = batch(t)
    a = t.compute_loss(t.model, b)
    b["advantages"] = torch.randn_like(b["advantages"]) * 100
    torch.testing.assert_close(t.compute_loss(t.model, b), a)


def test_trl_teacher_prompt_constructed_correctly(lab, tmp_path):
    """Decoded teacher inputs: the template with a sibling's answer where the mask is 1, the
    original prompt where it is 0, and always the same completion tokens at the end."""
    t = trainer(lab, tmp_path)
    b = batch(t)
    T = b["completion_ids"].size(1)
    assert torch.equal(b["teacher_input_ids"][:, -T:], b["completion_ids"])
    texts = t.processing_class.batch_decode(b["teacher_input_ids"][:, :-T], skip_special_tokens=False)
    for text, m in zip(texts, b["self_distillation_mask"].tolist()):
        assert ("Correct solution:" in text and "Correctly solve the original question." in text) == bool(m)


def test_trl_student_topk_passed_to_teacher():
    """topk_logits takes the student's top-k indices for the teacher (the hand case of
    tests/test_losses_sdpo.py shows the values); here: a teacher whose own top-k differ
    changes the loss only through the student's indices."""
    from sdpo_kit.sdpo.loss import topk_log_probs

    student = torch.tensor([[[3.0, 2.0, 0.0, -1.0, -2.0]]])
    teacher = torch.tensor([[[-5.0, 0.0, 4.0, 3.0, 0.0]]])
    s, t = topk_log_probs(student, teacher, k=2, add_tail=False)
    t_all = torch.log_softmax(teacher, -1)[0, 0]
    expected = t_all[[0, 1]] - torch.logsumexp(t_all[[0, 1]], 0)  # the teacher at the student's tokens 0 and 1
    torch.testing.assert_close(t[0, 0], expected)


def test_trl_ema_updates_ref_model_in_place_and_no_third_model(lab, tmp_path):
    """The EMA teacher is the reference slot (one extra model, not two) and moves during training."""
    t = trainer(lab, tmp_path, teacher_update_rate=0.5)
    assert t.ref_model is t.teacher.model and t.ref_model is not t.model
    before = t.ref_model.lm_head.weight.detach().clone()
    t.train()
    assert not torch.equal(before, t.ref_model.lm_head.weight)
    assert t.args.beta == 0.0


def test_trl_zero_teacher_coverage_zero_loss(lab, tmp_path):
    """No rollout succeeds (threshold above every reward): mask 0 everywhere, loss 0, no NaN gradient."""
    t = trainer(lab, tmp_path, success_reward_threshold=2.0)
    b = batch(t)
    assert b["self_distillation_mask"].sum() == 0
    loss = t.compute_loss(t.model, b)
    loss.backward()
    assert loss.item() == 0.0 and all(torch.isfinite(p.grad).all() for p in t.model.parameters() if p.grad is not None)


def test_trl_reward_func_dict_format_extracts_feedback(lab, tmp_path):
    """A reward returning {"score", "feedback"}: scores are the rewards, the feedback reaches the
    teacher prompts of rows without a successful sibling."""
    t = trainer(lab, tmp_path, rewards=(feedback_reward(),), include_environment_feedback=True,
                success_reward_threshold=1.0)
    b = batch(t)
    T = b["completion_ids"].size(1)
    texts = t.processing_class.batch_decode(b["teacher_input_ids"][:, :-T], skip_special_tokens=False)
    assert any("feedback from your unsuccessful earlier attempt" in x and "Your " in x for x in texts)
    assert b["self_distillation_mask"].sum() > 0


def test_trl_reward_func_float_format_no_feedback(lab, tmp_path):
    """A plain float reward: no feedback text anywhere, teachers only from successful siblings."""
    t = trainer(lab, tmp_path, rewards=(exact_match_reward(), char_reward), include_environment_feedback=True)
    b = batch(t)
    assert t._feedbacks(b["completion_ids"].size(0)) == [None] * b["completion_ids"].size(0)
    T = b["completion_ids"].size(1)
    texts = t.processing_class.batch_decode(b["teacher_input_ids"][:, :-T], skip_special_tokens=False)
    assert not any("feedback" in x for x in texts)


def test_trl_training_loop_completes_10_steps_and_loss_decreases(lab, tmp_path):
    """10 steps with a fixed (base) teacher on a trivial task, one prompt over and over: the loop
    completes, logs the SDPO keys, and the distillation loss of the last steps is below the first's."""
    path, tok = lab
    rows = [dict(ArithmeticTask(n_eval=10).splits()[0][0])] * 8
    t = build_trl_sdpo_trainer(LlamaForCausalLM.from_pretrained(path), tok, [char_reward], rows, preset="cpu",
                               output_dir=tmp_path, verbose=False, max_steps=10, prompts_per_step=1, num_generations=8,
                               max_completion_length=4, learning_rate=3e-3, success_reward_threshold=0.5,
                               teacher_model_kind="base", distillation_mode="full_logits", seed=0)
    t.train()
    rows = [r for r in t.history if "loss" in r]
    assert len(rows) == 10 and all("sdpo/distill_loss" in r for r in rows)
    first, last = sum(r["sdpo/distill_loss"] for r in rows[:3]), sum(r["sdpo/distill_loss"] for r in rows[-3:])
    assert last < first, [round(r["sdpo/distill_loss"], 4) for r in rows]
