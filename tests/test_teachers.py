"""SDPO's teachers: live (no copy), base (frozen start; a LoRA policy's base model), ema (a copy
moved by the EMA rule every teacher_sync_steps optimizer steps, or an EMA adapter on a LoRA policy)."""

from __future__ import annotations

import pytest
import torch

from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.models import add_peft_lora, lora_kwargs
from sdpo_kit.sdpo.teacher import Teacher, ema_update, is_pure_lora


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def nudge(model, value=0.01):
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(value)


def test_live_and_base_teachers(tok):
    """live: the student itself, no copy. base: a frozen copy that stays at the start."""
    student = build_model(tok, seed=0)
    ids = torch.tensor([[5, 6, 7]])
    live = Teacher(student, "live")
    assert live.model is None
    with live.forward() as m:
        assert m is student
    base = Teacher(student, "base")
    start = logits(student, ids)
    nudge(student)
    with base.forward() as m:
        assert m is base.model and m is not student
        torch.testing.assert_close(logits(m, ids), start)
    assert not base.optimizer_step() and not any(p.requires_grad for p in base.model.parameters())


def test_ema_teacher_follows_the_rule(tok):
    """teacher <- (1 - r) teacher + r student every sync_steps optimizer steps; exactly the rule."""
    student = build_model(tok, seed=0)
    teacher = Teacher(student, "ema", update_rate=0.25, sync_steps=2)
    before = [p.detach().clone() for p in teacher.model.parameters()]
    nudge(student, 0.4)
    assert teacher.optimizer_step() is False  # step 1 of 2
    assert all(torch.equal(a, b) for a, b in zip(before, teacher.model.parameters()))
    assert teacher.optimizer_step() is True   # step 2: synced
    for t0, t, s in zip(before, teacher.model.parameters(), student.parameters()):
        torch.testing.assert_close(t, 0.75 * t0 + 0.25 * s.detach())
    a, b = build_model(tok, seed=1), build_model(tok, seed=2)
    ema_update(a, b, 1.0)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def test_lora_teachers_are_adapters_not_copies(tok):
    """A LoRA policy: base = adapters disabled, ema = a second adapter 'teacher' that starts at
    zero (the base model, as TRL's PEFTAdapterEMACallback) and moves by the rule; no copy of the
    model is made, and training stays on the student's adapter."""
    ids = torch.tensor([[5, 6, 7, 8]])
    student = add_peft_lora(build_model(tok, seed=0), lora_kwargs(4))
    assert is_pure_lora(student)
    nudge(student, 0.05)  # move the student's adapter away from the base model
    with student.disable_adapter():
        base_logits = logits(student, ids)
    base = Teacher(student, "base")
    assert base.model is None
    with base.forward() as m:
        torch.testing.assert_close(logits(m, ids), base_logits)
    ema = Teacher(student, "ema", update_rate=0.5)
    assert ema.model is None and ema.adapter == "teacher"
    trainable = {n for n, p in student.named_parameters() if p.requires_grad}
    assert trainable and all(".default." in n for n in trainable)
    with ema.forward() as m:
        torch.testing.assert_close(logits(m, ids), base_logits)  # zero adapter = the base model
    assert ema.optimizer_step()
    with ema.forward() as m:
        halfway = logits(m, ids)
    assert not torch.allclose(halfway, base_logits) and not torch.allclose(halfway, logits(student, ids))
    assert {n for n, p in student.named_parameters() if p.requires_grad} == trainable


def test_bad_teacher_settings(tok):
    with pytest.raises(ValueError, match="teacher_model_kind"):
        Teacher(build_model(tok, seed=0), "frozen")
    with pytest.raises(ValueError, match="teacher_update_rate"):
        Teacher(build_model(tok, seed=0), "ema", update_rate=1.5)


@pytest.mark.parametrize("lora", [False, True], ids=["copy", "adapter"])
def test_weights_follow_the_ema_rule_for_a_copy_and_an_adapter(tok, lora):
    """``Teacher.weights()`` reads the teacher's own weights whichever way it holds them (a copy of a plain
    model, or the EMA adapter of a LoRA policy), ``weights("student")`` the student's under the same names,
    and one EMA update moves every one of them by the rule (fp32: rtol=1e-5, atol=1e-6). What notebook 05
    checks on both the tiny lab and a LoRA model."""
    student = build_model(tok, seed=0)
    if lora:
        student = add_peft_lora(student, lora_kwargs(4))
    teacher = Teacher(student, "ema", update_rate=0.1)
    before = teacher.weights()
    assert before and before.keys() == teacher.weights("student").keys()
    if lora:
        assert teacher.model is None and all("lora_" in n for n in before)
        assert all(not v.any() for v in before.values()), "the EMA adapter starts at zero: the base model"
    nudge(student, 0.3)                                   # a pretend optimizer step (the trainable weights)
    assert teacher.optimizer_step()
    after, moved = teacher.weights(), teacher.weights("student")
    for n in before:
        torch.testing.assert_close(after[n], 0.9 * before[n] + 0.1 * moved[n], rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(after[n], before[n]) for n in before)
    assert Teacher(student, "live").weights() == {}
    with pytest.raises(ValueError, match="of must be"):
        teacher.weights("reference")


def test_a_second_ema_adapter_on_the_same_model_starts_afresh(tok):
    """Two trainers on one LoRA model (a notebook runs several in turn), or one on a copy of a model that
    already holds an EMA adapter: the new Teacher replaces the adapter with a fresh one (zero: the base
    model) instead of failing on the name, and training stays on the student's adapter."""
    import copy

    student = add_peft_lora(build_model(tok, seed=0), lora_kwargs(4))
    first = Teacher(student, "ema", update_rate=0.5)
    nudge(student, 0.2)
    first.optimizer_step()
    assert any(v.any() for v in first.weights().values())
    for model in (student, copy.deepcopy(student)):
        second = Teacher(model, "ema", update_rate=0.5)
        assert second.adapter == "teacher" and all(not v.any() for v in second.weights().values())
        assert {n for n, p in model.named_parameters() if p.requires_grad} == \
            {n for n, p in model.named_parameters() if ".default." in n}
