"""PPOScratchTrainer on the tiny lab: config checks, one step's bookkeeping (KL control,
frozen reference, early stopping, metrics), distillation towards the teacher, LoRA, and resume."""

from __future__ import annotations

import math

import pytest
import torch
from test_metrics import documented
from test_resume import assert_same_rows, char_reward

from sdpo_kit.core.sampling import completion_logits, sample
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.losses import token_logprobs
from sdpo_kit.models import add_peft_lora, lora_kwargs
from sdpo_kit.ppo.config import PPOScratchConfig
from sdpo_kit.ppo.trainer import PPOScratchTrainer
from sdpo_kit.tasks import ArithmeticTask


@pytest.fixture(scope="module")
def lab():
    tok = build_tokenizer()
    task = ArithmeticTask(n_eval=16, seed=0)
    return tok, task, task.splits()


def make(lab, tmp_path=None, student_seed=0, lora=False, **kw):
    tok, task, (rows, heldout) = lab
    student = build_model(tok, seed=student_seed)
    if lora:
        student = add_peft_lora(student, lora_kwargs(4))
    teacher = build_model(tok, seed=99)
    cfg = dict(batch_size=8, mini_batch_size=4, ppo_epochs=2, max_steps=3, learning_rate=1e-3, max_completion_length=3,
               eval_every=0, kd_coef=0.5, seed=0, output_dir=str(tmp_path) if tmp_path else None)
    cfg.update(kw)
    return PPOScratchTrainer(student, tok, [char_reward], rows, PPOScratchConfig(**cfg), teacher=teacher)


def test_config_errors_say_what_would_work():
    with pytest.raises(ValueError, match=r"nearest valid batch_size: \[8, 12\].*\[1, 2, 5, 10\]"):
        PPOScratchConfig(batch_size=10, mini_batch_size=4)
    with pytest.raises(ValueError, match="needs a teacher_model"):
        PPOScratchConfig(teacher_model=None)
    with pytest.raises(ValueError, match="nothing to train"):
        PPOScratchConfig(kd_coef=0.0, ppo_coef=0.0)
    with pytest.raises(ValueError, match="scheduler_name"):
        PPOScratchConfig(scheduler_name="step")
    with pytest.raises(ValueError, match="kl_penalty"):
        PPOScratchConfig(kl_penalty="k3")
    assert PPOScratchConfig(batch_size=12, mini_batch_size=3).prompts_per_step == 12
    with pytest.raises(ValueError, match="one response per prompt"):
        PPOScratchConfig(batch_size=8, prompts_per_step=16)


def test_a_step_logs_documented_metrics_and_updates_the_kl_coefficient(lab):
    trainer = make(lab, target=0.01, horizon=100.0, init_kl_coef=0.3)
    rows = trainer.train()
    for r in rows:
        undocumented = [k for k in r if not documented(k)]
        assert not undocumented, undocumented
        assert all(math.isfinite(v) for v in r.values() if isinstance(v, float))
    # adaptive control: each step's coefficient is the previous one x (1 + clip(kl / target - 1, +-0.2) B / horizon)
    for prev, nxt in zip(rows, rows[1:]):
        err = min(max(prev["stats/kl"] / 0.01 - 1, -0.2), 0.2)
        assert nxt["stats/kl_coef"] == pytest.approx(prev["stats/kl_coef"] * (1 + err * 8 / 100.0))
    assert rows[0]["stats/kl_coef"] == 0.3 and rows[0]["stats/kl"] == pytest.approx(0.0, abs=1e-6), \
        "step 1 samples from the reference itself"
    assert rows[1]["stats/kl_coef"] < 0.3, "KL below its target: beta shrinks"
    assert rows[1]["stats/kl"] > 0.01 and rows[2]["stats/kl_coef"] > rows[1]["stats/kl_coef"], "above it: beta grows"


def test_the_reference_stays_the_start_while_the_student_moves(lab):
    tok, task, (rows, _) = lab
    trainer = make(lab)
    start = build_model(tok, seed=0)
    trainer.train()
    torch.manual_seed(0)
    ro = sample(trainer.model, tok, [r["prompt"] for r in rows[:4]], max_new_tokens=3)
    args = (ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
    torch.testing.assert_close(trainer.ref_logprobs(ro), token_logprobs(completion_logits(start, *args), ro.completion_ids))
    assert not torch.allclose(token_logprobs(completion_logits(trainer.model, *args), ro.completion_ids),
                              trainer.ref_logprobs(ro)), "the student trained"


def test_early_stopping_cuts_the_epochs_and_only_when_on(lab):
    stopped = make(lab, ppo_epochs=4, target_kl=1e-9, learning_rate=3e-2).train()
    assert all(r["stats/early_stopped"] == 1.0 and r["stats/ppo_epochs_run"] < 4 for r in stopped[1:])
    never = make(lab, ppo_epochs=4, target_kl=1e-9, learning_rate=3e-2, early_stopping=False).train()
    assert all(r["stats/early_stopped"] == 0.0 and r["stats/ppo_epochs_run"] == 4 for r in never)


def test_distillation_alone_pulls_the_student_towards_the_teacher(lab):
    tok, task, (rows, heldout) = lab
    trainer = make(lab, ppo_coef=0.0, kd_coef=1.0, max_steps=8, learning_rate=3e-3, kd_temperature=1.0)
    prompts = [r["prompt"] for r in heldout[:8]]

    def kl_to_teacher():
        torch.manual_seed(1)
        ro = sample(trainer.teacher, tok, prompts, max_new_tokens=3)
        args = (ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask)
        with torch.no_grad():
            t = torch.log_softmax(completion_logits(trainer.teacher, *args), -1)
            s = torch.log_softmax(completion_logits(trainer.model, *args), -1)
        kl = (t.exp() * (t - s)).sum(-1)
        return ((kl * ro.completion_mask).sum() / ro.completion_mask.sum()).item()

    before = kl_to_teacher()
    rows_ = trainer.train()
    assert kl_to_teacher() < 0.7 * before, "held-out KL(teacher || student) fell"
    assert rows_[-1]["loss/kd"] < rows_[0]["loss/kd"]
    assert all(r["loss/policy"] == r["loss/policy"] for r in rows_)   # still computed and logged at ppo_coef 0


def test_a_teacher_prompt_puts_the_teacher_s_own_context_before_the_same_response(lab):
    """With ``teacher_prompt`` the teacher's logits on a response are those of the teacher reading its own prompt
    (here a demonstration turn first) followed by the student's response tokens, row by row, unpadded: fp32,
    rtol=1e-5, atol=1e-6; without it they are the teacher's on the student's prompt (context distillation's
    teacher differs only in what it reads)."""
    tok, task, (rows, _) = lab
    demo = [{"role": "user", "content": "1+1+1="}, {"role": "assistant", "content": "3"}]
    trainer = make(lab, batch_size=4, mini_batch_size=4)
    prompted = PPOScratchTrainer(trainer.model, tok, [char_reward], rows, trainer.config, teacher=trainer.teacher,
                                        teacher_prompt=lambda p: demo + p)
    torch.manual_seed(0)
    batch = prompted.rollout(rows[:4])
    ro = batch["ro"]
    for i, row in enumerate(rows[:4]):
        n = int(ro.completion_mask[i].sum())
        for prompt, want in ((demo + row["prompt"], batch["teacher_logits"][i, :n]),
                             (row["prompt"], completion_logits(trainer.teacher, ro.prompt_ids[i:i + 1],
                                                               ro.prompt_mask[i:i + 1], ro.completion_ids[i:i + 1],
                                                               ro.completion_mask[i:i + 1])[0, :n])):
            ids = tok(tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True),
                      add_special_tokens=False, return_tensors="pt").input_ids
            full = torch.cat([ids, ro.completion_ids[i:i + 1, :n]], 1)                   # (1, P' + n) no padding
            with torch.no_grad():
                logits = trainer.teacher(full).logits[0, ids.size(1) - 1:-1]            # (n, V) next-token at each
            torch.testing.assert_close(want, logits, rtol=1e-5, atol=1e-6)
    torch.manual_seed(0)
    plain = trainer.rollout(rows[:4])                                                   # the same responses
    assert torch.equal(plain["ro"].completion_ids, ro.completion_ids)
    assert not torch.allclose(batch["teacher_logits"], plain["teacher_logits"]), "the demonstration changes the teacher"


def test_ppo_alone_needs_no_teacher_and_a_lora_student_trains_its_adapter(lab):
    tok, task, (rows, _) = lab
    student = add_peft_lora(build_model(tok, seed=0), lora_kwargs(4))
    frozen = {n: p.detach().clone() for n, p in student.named_parameters() if "lora_" not in n}
    cfg = PPOScratchConfig(batch_size=8, mini_batch_size=4, ppo_epochs=1, max_steps=2, learning_rate=1e-2,
                                  max_completion_length=3, eval_every=0, kd_coef=0.0, teacher_model=None)
    trainer = PPOScratchTrainer(student, tok, [char_reward], rows, cfg)
    assert trainer.ref_model is None, "a PEFT student's reference is itself without the adapter: no copy"
    rows_ = trainer.train()
    assert rows_[-1]["loss/kd"] == 0.0
    assert all(torch.equal(p, frozen[n]) for n, p in student.named_parameters() if n in frozen)
    with pytest.raises(ValueError, match="teacher"):
        PPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows,
                                 PPOScratchConfig(batch_size=8, mini_batch_size=4))


def test_resume_repeats_the_uninterrupted_run(lab, tmp_path):
    """Value head, KL coefficient and running score moments are all in the checkpoint."""
    full = make(lab, tmp_path / "full", max_steps=4).train()
    make(lab, tmp_path / "cut", max_steps=4, save_steps=2).train()
    resumed = make(lab, tmp_path / "again", max_steps=4).train(resume_from_checkpoint=tmp_path / "cut" / "checkpoint-2")
    assert_same_rows(full[2:], resumed[2:])
    assert full[2]["stats/kl_coef"] != full[0]["stats/kl_coef"], "the coefficient moved, so resuming it mattered"


def test_completions_jsonl_and_the_dashboard_follow_the_run(lab, tmp_path):
    """Four steps, log_completions_every=2: completions.jsonl holds the whole batch (one response per prompt) at
    steps 2 and 4, its mean reward the step's raw score before PPO's scaling (fp32: rel 1e-5, abs 1e-6); the
    dashboard's history is the trainer's and its table the last step's completions."""
    import pandas as pd

    from sdpo_kit.viz.dashboard import Dashboard

    tok, task, (rows, _) = lab
    dash = Dashboard(table_size=4)
    cfg = PPOScratchConfig(batch_size=8, mini_batch_size=4, ppo_epochs=1, max_steps=4, learning_rate=1e-3,
                                  max_completion_length=3, eval_every=0, kd_coef=0.5, seed=0, output_dir=str(tmp_path),
                                  log_completions_every=2)
    trainer = PPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, cfg,
                                       teacher=build_model(tok, seed=99), callbacks=[dash])
    history = dash.train(trainer)
    logged = pd.read_json(tmp_path / "completions.jsonl", lines=True, dtype=False)
    by_step = {h["step"]: h for h in history if "loss" in h}
    assert sorted(by_step) == [1, 2, 3, 4] and sorted(set(logged["step"])) == [2, 4]
    for step, batch in logged.groupby("step"):
        assert len(batch) == 8, step
        assert batch["reward"].mean() == pytest.approx(by_step[step]["reward/score_raw"], rel=1e-5, abs=1e-6)
    assert dash.plot.history == history
    assert dash.table_step == 4 and len(dash.table_rows) == 4
    assert {"prompt", "completion", "reward", "reward/char_reward"} <= set(dash.table_rows[0])


def test_every_variant_samples_the_same_first_batch_and_distils_only_where_asked(lab, tmp_path):
    """PPO alone, distillation alone and both, from the same student and seed: the same first batch of
    responses (completions.jsonl at step 1), and a distillation loss only where kd_coef > 0."""
    import pandas as pd

    tok, task, (rows, _) = lab
    variants = {"ppo": dict(kd_coef=0.0, teacher_model=None), "kd": dict(ppo_coef=0.0, kd_coef=1.0),
                "teacher_ppo": dict(kd_coef=0.5)}
    first = {}
    for name, kw in variants.items():
        cfg = PPOScratchConfig(**{**dict(batch_size=8, mini_batch_size=4, ppo_epochs=1, max_steps=2,
                                                learning_rate=1e-3, max_completion_length=3, eval_every=0, seed=3,
                                                output_dir=str(tmp_path / name), log_completions_every=1), **kw})
        teacher = build_model(tok, seed=99) if cfg.kd_coef > 0 else None
        history = PPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, cfg,
                                           teacher=teacher).train()
        assert (max(h["loss/kd"] for h in history if "loss" in h) > 0) == (cfg.kd_coef > 0), name
        logged = pd.read_json(tmp_path / name / "completions.jsonl", lines=True, dtype=False)
        first[name] = logged[logged["step"] == 1][["prompt", "completion"]].values.tolist()
    assert first["ppo"] == first["kd"] == first["teacher_ppo"]
