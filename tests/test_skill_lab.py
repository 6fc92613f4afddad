"""The SDPO skill lab: digit feedback, near misses, teacher-prompt SFT rows, the dial's warm
start and the teacher-quality probe."""

from __future__ import annotations

import math
import random

import pytest

from sdpo_kit import make_task
from sdpo_kit.lab.model import LabConfig, cycles, interleave, sft, warm_start
from sdpo_kit.lab.skill import KINDS, TEMPLATES, context_rows, near_miss
from sdpo_kit.tasks.feedback import digit_feedback, direction_feedback, place_name
from sdpo_kit.text.reprompt import reprompt


def test_digit_feedback_names_the_wrong_places_and_masks_them():
    assert digit_feedback("13391", "13201") == "Your answer 13391 is wrong in the hundreds and tens digits: 13??1"
    assert digit_feedback("4915", "4905") == "Your answer 4915 is wrong in the tens digit: 49?5"
    assert digit_feedback(" 4,905. ", "4905") == ""
    assert digit_feedback("1339", "13201") == "Your answer 1339 has 4 digits; the sum has 5."
    assert digit_feedback(None, "5") == "Your reply is empty; write the sum as a number."
    assert digit_feedback("abc", "5") == "Your answer 'abc' is not a whole number."
    assert digit_feedback("-3", "5") == "Your answer -3 is negative; the sum is not."
    assert place_name(4) == "ten-thousands" and place_name(7) == "digit 8 from the right"


def test_direction_feedback_is_todays_arithmetic_feedback():
    task = make_task("arithmetic")
    assert task.feedback("12", "9") == direction_feedback("12", "9") == "Your answer 12 is too large; the sum is smaller."
    assert task.feedback("3", "9") == "Your answer 3 is too small; the sum is larger."
    assert task.feedback("9", "9") == ""


def test_digit_feedback_never_holds_the_answer():
    rng = random.Random(0)
    task = make_task("long_addition")
    for _ in range(2000):
        answer = str(rng.randrange(1000, 20000))
        attempt = near_miss(answer, rng) if rng.random() < 0.8 else str(rng.randrange(100, 200000))
        fb = task.feedback(attempt, answer)
        if attempt != answer:
            assert fb and answer not in fb, (attempt, answer, fb)


def test_near_miss_keeps_the_length_and_is_wrong():
    rng = random.Random(1)
    changed = []
    for _ in range(3000):
        answer = str(rng.randrange(0, 20000))
        miss = near_miss(answer, rng)
        assert len(miss) == len(answer) and miss != answer and miss.isdigit()
        assert len(miss) == 1 or miss[0] != "0"
        changed.append(sum(a != b for a, b in zip(miss, answer)))
    assert set(changed) == {1, 2} and 0.2 < changed.count(2) / len(changed) < 0.45


def test_the_long_addition_task_has_long_answers_and_digit_feedback():
    task = make_task("long_addition", n_eval=50)
    train, held = task.splits()
    assert task.digits == 4 and task.terms == 2 and task.feedback_style == "digits"
    lengths = [len(r["answer"]) for r in held]
    assert sum(n >= 4 for n in lengths) / len(lengths) > 0.9     # + the eos: at least 5 tokens
    with pytest.raises(ValueError, match="feedback_style"):
        make_task("arithmetic", feedback_style="loud")


def test_context_rows_are_sdpo_teacher_prompts_with_the_right_answer():
    task = make_task("long_addition", n_eval=20)
    rows = task.splits()[0][:300]
    out = context_rows(task, rows, seed=0)
    assert len(out) == len(rows)
    kinds = [r["kind"] for r in out]
    assert all(abs(kinds.count(k) / len(kinds) - 1 / 3) < 0.08 for k in KINDS)
    for row, ctx in zip(rows, out):
        assert ctx["completion"] == row["answer"]
        text = ctx["prompt"][-1]["content"]
        assert text.startswith(row["prompt"][-1]["content"])
        if ctx["kind"] == "demo":
            assert ctx["prompt"] == reprompt(row["prompt"], row["answer"], None)
        if ctx["kind"] == "feedback":
            assert "feedback" in text and row["answer"] not in text
        if ctx["kind"] == "both":
            assert "Correct solution" in text and "feedback" in text
    assert context_rows(task, rows, seed=0) == out            # deterministic in the seed


def test_interleave_spreads_the_extra_steps_evenly():
    order = interleave(6, 3)
    assert len(order) == 9 and sum(order) == 3 and order == [False, False, True] * 3
    assert interleave(5, 0) == [False] * 5 and interleave(0, 0) == []
    assert sum(interleave(1000, 333)) == 333


def test_the_dial_adds_context_steps_and_keeps_the_task_budget(tmp_path, monkeypatch):
    """A warm start with context_steps trains on teacher prompts too; the plain steps are the same."""
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path))
    import sdpo_kit.lab.model as lab_model

    calls = []
    real = lab_model.sft

    def spy(model, tok, rows, **kw):
        calls.append((len(rows), kw["steps"], kw.get("context_steps"), kw.get("context_rows")))
        return real(model, tok, rows, **kw)

    monkeypatch.setattr(lab_model, "sft", spy)
    base = dict(task="long_addition", digits=4, terms=2, n_eval=20, sft_steps=3, copy_fraction=0.0,
                max_position_embeddings=256, hidden_size=16, intermediate_size=32, sft_batch_size=4)
    warm_start(LabConfig(**base), verbose=False)
    warm_start(LabConfig(**base, context_steps=2), verbose=False)
    (_, s0, c0, r0), (_, s1, c1, r1) = calls
    assert s0 == s1 == 3 and c0 == 0 and r0 is None and c1 == 2
    assert {r["kind"] for r in r1} == set(KINDS)


def test_cycles_cut_the_task_budget_and_share_out_the_context_steps():
    assert cycles(1000, 300, 500) == [(500, 150), (500, 150)]
    assert cycles(1000, 301, 400) == [(400, 120), (400, 120), (200, 61)]
    assert cycles(1000, 7, 0) == [(1000, 7)] == cycles(1000, 7, 5000)
    assert cycles(0, 5, 10) == []
    for steps, extra, cycle in [(999, 333, 250), (10, 3, 3)]:
        parts = cycles(steps, extra, cycle)
        assert sum(n for n, _ in parts) == steps and sum(e for _, e in parts) == extra


def test_joint_cycles_put_the_context_on_the_last_task_steps():
    assert cycles(1000, 300, 500, last=True) == [(500, 0), (500, 300)]
    assert cycles(1000, 700, 500, last=True) == [(500, 200), (500, 500)]
    assert cycles(10, 4, 0, last=True) == [(10, 4)] and cycles(10, 40, 4, last=True) == [(4, 4), (4, 4), (2, 2)]


def test_joint_context_leaves_the_task_steps_before_it_as_they_were():
    """context_mix="joint": the task batches and schedule do not depend on the dial, so the task
    losses before the context window are bitwise those of a run without context; inside it the
    context loss joins the update, and context_lr_scale = 0 gives back the plain run exactly."""
    import torch

    from sdpo_kit.lab.model import build_model, build_tokenizer

    task = make_task("long_addition", n_eval=20)
    rows = task.sft_rows(task.splits()[0][:50], copy_fraction=0.0)
    ctx = context_rows(task, task.splits()[0][:50], templates="compact")
    tok = build_tokenizer()
    cfg = LabConfig(hidden_size=16, intermediate_size=32, max_position_embeddings=128)

    def run(**kw):
        torch.manual_seed(0)
        model = build_model(tok, cfg)
        losses = sft(model, tok, rows, steps=6, batch_size=4, lr=1e-2, context_mix="joint", **kw)
        return losses, [p.detach().clone() for p in model.parameters()]

    plain, p_plain = run()
    joint, p_joint = run(context_rows=ctx, context_steps=2)
    off, p_off = run(context_rows=ctx, context_steps=2, context_lr_scale=0.0)
    assert plain[:5] == joint[:5] and plain[5] != joint[5]          # step 5 follows the first joint update
    assert not all(torch.equal(a, b) for a, b in zip(p_plain, p_joint))
    assert off == plain and all(torch.equal(a, b) for a, b in zip(p_plain, p_off))
    with pytest.raises(ValueError, match="context_mix"):
        sft(build_model(tok, cfg), tok, rows, steps=1, batch_size=4, lr=1e-2, context_mix="mixed")


def test_cycled_warm_start_restarts_the_optimizer_per_cycle(tmp_path, monkeypatch):
    """sft_cycle_steps: one sft call (a fresh AdamW and schedule) per cycle, the task budget kept."""
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path))
    import sdpo_kit.lab.model as lab_model

    calls = []
    real = lab_model.sft

    def spy(model, tok, rows, **kw):
        calls.append((kw["steps"], kw.get("context_steps"), kw.get("context_lr_scale")))
        return real(model, tok, rows, **kw)

    monkeypatch.setattr(lab_model, "sft", spy)
    base = dict(task="long_addition", digits=4, terms=2, n_eval=20, sft_steps=5, copy_fraction=0.0,
                max_position_embeddings=128, hidden_size=16, intermediate_size=32, sft_batch_size=4,
                context_templates="compact", context_lr_scale=0.5)
    warm_start(LabConfig(**base, sft_cycle_steps=2, context_steps=3), verbose=False)
    assert calls == [(2, 1, 0.5), (2, 1, 0.5), (1, 1, 0.5)]


def test_context_steps_run_at_their_own_learning_rate():
    """context_lr_scale = 0 leaves a context step's update at zero; the task steps still move."""
    import torch

    from sdpo_kit.lab.model import build_model, build_tokenizer

    task = make_task("long_addition", n_eval=20)
    rows = task.sft_rows(task.splits()[0][:50], copy_fraction=0.0)
    ctx = context_rows(task, task.splits()[0][:50], templates="compact")
    tok = build_tokenizer()
    cfg = LabConfig(hidden_size=16, intermediate_size=32, max_position_embeddings=128)
    model = build_model(tok, cfg)
    before = [p.detach().clone() for p in model.parameters()]
    sft(model, tok, rows, steps=0, batch_size=4, lr=1e-2, context_rows=ctx, context_steps=3, context_lr_scale=0.0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    sft(model, tok, rows, steps=1, batch_size=4, lr=1e-2, context_rows=ctx, context_steps=0)
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_compact_context_rows_use_the_labs_one_line_templates():
    task = make_task("long_addition", n_eval=20)
    rows = context_rows(task, task.splits()[0][:30], seed=1, templates="compact")
    trl = context_rows(task, task.splits()[0][:30], seed=1)
    for r, t in zip(rows, trl):
        assert r["completion"] == t["completion"] and r["kind"] == t["kind"]
        text = r["prompt"][-1]["content"]
        assert ("\nCorrect answer: " in text) == (r["kind"] != "feedback")
        assert ("\nFeedback: " in text) == (r["kind"] != "demo")
        assert len(text) < len(t["prompt"][-1]["content"])
    assert set(TEMPLATES) == {"trl", "compact"}
    with pytest.raises(ValueError, match="templates"):
        context_rows(task, task.splits()[0][:3], templates="nope")


def test_teacher_quality_reports_every_measure(tmp_path, monkeypatch):
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path))
    from sdpo_kit.sdpo.quality import teacher_quality

    cfg = LabConfig(task="long_addition", digits=4, terms=2, n_eval=20, sft_steps=5, copy_fraction=0.0,
                    max_position_embeddings=256, hidden_size=16, intermediate_size=32, sft_batch_size=4,
                    context_steps=3)
    model, tok = warm_start(cfg, verbose=False)
    task = make_task("long_addition", n_eval=20)
    q = teacher_quality(model, tok, task, task.splits()[1])
    assert q["n"] == 20 and q["n_wrong"] == round((1 - q["plain_acc"]) * 20)
    for k in ("plain_acc", "demo_acc"):
        assert 0.0 <= q[k] <= 1.0
    for k in ("feedback_acc", "right_token_frac", "token_win_demo", "token_win_feedback"):
        assert math.isnan(q[k]) or 0.0 <= q[k] <= 1.0
    with pytest.raises(ValueError, match="at least one row"):
        teacher_quality(model, tok, task, [])


def test_the_feedback_reward_speaks_the_tasks_style():
    from sdpo_kit.rewards import feedback_reward, make_reward

    [reward] = make_reward({"type": "feedback"}, task=make_task("long_addition"))
    out = reward(["q"] * 2, ["13391", "13201"], answer=["13201", "13201"])
    assert out == [{"score": 0.0, "feedback": "Your answer 13391 is wrong in the hundreds and tens digits: 13??1"},
                   {"score": 1.0, "feedback": ""}]
    [plain] = make_reward({"type": "feedback"}, task=make_task("arithmetic"))
    assert plain(["q"], ["12"], answer=["9"])[0]["feedback"] == "Your answer 12 is too large; the sum is smaller."
    assert feedback_reward(style="digits")(["q"], ["4915"], answer=["4905"])[0]["feedback"].endswith("49?5")
    with pytest.raises(ValueError, match="style"):
        feedback_reward(style="loud")


def test_joint_dial_settings_share_their_first_task_cycles_bit_for_bit(tmp_path, monkeypatch, capsys):
    """context_mix="joint": the cycles before the first context batch are the same at every dial setting, so the
    top's warm start resumes from the bottom's snapshot of them, and ends bit-identical to one built from scratch."""
    import torch

    import sdpo_kit.lab.model as lab_model

    base = dict(task="long_addition", digits=2, terms=2, n_eval=20, sft_steps=6, sft_cycle_steps=2, copy_fraction=0.0,
                max_position_embeddings=128, hidden_size=16, intermediate_size=32, sft_batch_size=4,
                context_templates="compact", context_mix="joint", context_lr_scale=0.5)
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path / "scratch"))
    scratch, _ = warm_start(LabConfig(**base, context_steps=2), verbose=False)      # cycles (2, 0), (2, 0), (2, 2)
    # built from nothing, it saves its own two shared cycles (not its last: that is the warm start itself)
    assert sorted(p.name for p in (tmp_path / "scratch").glob("tiny-lab-prefix-*/*")) == ["cycle0.pt", "cycle1.pt"]
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path / "shared"))
    calls = []
    real = lab_model.sft
    monkeypatch.setattr(lab_model, "sft", lambda *a, **kw: calls.append(kw["seed"]) or real(*a, **kw))
    warm_start(LabConfig(**base, context_steps=0), verbose=False)                   # the bottom: saves cycles 0, 1
    snaps = lab_model.prefix_dir(LabConfig(**base, context_steps=2))
    assert snaps == lab_model.prefix_dir(LabConfig(**base)) and sorted(p.name for p in snaps.iterdir()) == [
        "cycle0.pt", "cycle1.pt"]
    calls.clear()
    resumed, _ = warm_start(LabConfig(**base, context_steps=2))
    assert calls == [2000] and "2 shared task cycle(s) loaded" in capsys.readouterr().out   # only the third cycle ran
    a, b = scratch.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_tokenize_sft_matches_one_tokenizer_call_a_row_and_pools_train_the_same():
    """The batched tokenization gives the ids, labels and mask of one tokenizer call a row (a reference written
    here), and sft on pools tokenized beforehand (what a cycled warm start passes) trains bit for bit as on rows."""
    import torch

    from sdpo_kit.core.sampling import render_prompts
    from sdpo_kit.lab.model import build_model, build_tokenizer, tokenize_sft

    tok = build_tokenizer()
    task = make_task("long_addition", n_eval=20)
    rows = task.sft_rows(task.splits()[0][:40], copy_fraction=0.5)
    rows[3] = {**rows[3], "completion": ""}                                 # an empty completion: eos alone
    ids, lab, att = tokenize_sft(tok, rows)
    prompts = render_prompts(tok, [r["prompt"] for r in rows])
    for i, (p, r) in enumerate(zip(prompts, rows)):
        p_ids = tok(p, add_special_tokens=False)["input_ids"]
        c_ids = tok(r["completion"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        n = len(p_ids) + len(c_ids)
        assert ids[i, :n].tolist() == p_ids + c_ids and set(ids[i, n:].tolist()) <= {tok.pad_token_id}
        assert lab[i].tolist() == [-100] * len(p_ids) + c_ids + [-100] * (ids.size(1) - n)
        assert att[i].tolist() == [1] * n + [0] * (ids.size(1) - n)
    assert ids.size(1) == max(att.sum(1)).item() and ids.dtype == lab.dtype == att.dtype == torch.long

    ctx = context_rows(task, task.splits()[0][:40], templates="compact")
    cfg = LabConfig(hidden_size=16, intermediate_size=32, max_position_embeddings=128)

    def run(**kw):
        torch.manual_seed(0)
        model = build_model(tok, cfg)
        losses = sft(model, tok, rows, steps=4, batch_size=4, lr=1e-2, context_rows=ctx, context_steps=2, **kw)
        return losses, [p.detach().clone() for p in model.parameters()]

    (a, pa), (b, pb) = run(), run(pools=(tokenize_sft(tok, rows), tokenize_sft(tok, ctx)))
    assert a == b and all(torch.equal(x, y) for x, y in zip(pa, pb))
