"""completions.jsonl: every N steps, on both backends, each sampled completion with its prompt, its
reward per function and in total, its feedback, and for SDPO the teacher prompt and whether the row
had a teacher; pandas loads it, and its rewards agree with the step's metrics row."""

from __future__ import annotations

import pandas as pd
import pytest

from sdpo_kit.core.completions import CompletionLog, as_text, completion_rows
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.trl import build_trl_grpo_trainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.rewards import exact_match_reward, feedback_reward
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loop import SDPOScratchTrainer
from sdpo_kit.sdpo.trl import build_trl_sdpo_trainer
from sdpo_kit.tasks import ArithmeticTask
from sdpo_kit.viz.dashboard import Dashboard

G, P = 4, 2
FP32 = {"rel": 1e-5, "abs": 1e-6}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def rows():
    return ArithmeticTask(n_eval=8, seed=0).splits()[0]


def char_reward(prompts, completions, **kwargs):
    """Varied in [0, 1), so some siblings pass SDPO's 0.5 threshold."""
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


def one_reward(prompts, completions, **kwargs):
    """1.0 for every completion: a monitor whose weight 0 must keep it out of the total."""
    return [1.0] * len(completions)


def load(out):
    return pd.read_json(out / "completions.jsonl", lines=True)


def check_against_metrics(df, history, funcs):
    """Each logged step holds P x G rows whose mean reward is the metrics row's reward/mean."""
    by_step = {r["step"]: r for r in history}
    for step, group in df.groupby("step"):
        assert len(group) == P * G, step
        assert group["reward"].mean() == pytest.approx(by_step[step]["reward/mean"], **FP32)
        for f in funcs:
            assert group[f"reward/{f}"].mean() == pytest.approx(by_step[step][f"reward/{f}"], **FP32)


def test_scratch_grpo_writes_every_n_steps(tok, rows, tmp_path):
    """5 steps, log_completions_every=2: steps 2 and 4, P x G rows each, prompt and completion as text,
    the total reward the sum of the functions', the means equal to metrics.jsonl's."""
    cfg = GRPOScratchConfig(max_steps=5, prompts_per_step=P, num_generations=G, max_completion_length=3,
                     output_dir=str(tmp_path), log_completions_every=2)
    history = GRPOScratchTrainer(build_model(tok, seed=0), tok, [exact_match_reward(), char_reward], rows, cfg).train()
    df = load(tmp_path)
    assert sorted(df["step"].unique()) == [2, 4]
    assert {"prompt", "completion", "reward", "reward/exact_match", "reward/char_reward", "feedback"} <= set(df.columns)
    assert df["prompt"].map(type).eq(str).all() and df["completion"].map(type).eq(str).all()
    assert (df["reward"] - df["reward/exact_match"] - df["reward/char_reward"]).abs().max() < 1e-6
    check_against_metrics(df, history, ["exact_match", "char_reward"])


def test_a_monitor_with_weight_zero_is_logged_not_trained_on(tok, rows, tmp_path):
    """reward_weights=[1, 0]: the total reward (the row's reward/mean, the file's reward) is the first
    function's alone; the monitor still has its column in the file, the row and the dashboard's table,
    and the file's means are the row's (notebook 03's monitors)."""
    dash = Dashboard(table_size=4)
    cfg = GRPOScratchConfig(max_steps=2, prompts_per_step=P, num_generations=G, max_completion_length=3,
                     output_dir=str(tmp_path), log_completions_every=1)
    history = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward, one_reward], rows, cfg,
                       callbacks=[dash], reward_weights=[1.0, 0.0]).train()
    df = load(tmp_path)
    assert sorted(df["step"].unique()) == [1, 2] and (df["reward/one_reward"] == 1.0).all()
    assert (df["reward"] - df["reward/char_reward"]).abs().max() < 1e-6, "the monitor's 1.0 is not in the total"
    check_against_metrics(df, history, ["char_reward", "one_reward"])
    assert dash.table_step == 2 and {"reward", "reward/char_reward", "reward/one_reward"} <= set(dash.table_rows[0])


def test_scratch_sdpo_has_the_teacher_columns(tok, rows, tmp_path):
    """SDPO's rows add teacher_prompt and has_teacher; the fraction with a teacher is the step's
    sdpo/teacher_coverage, and a row with a teacher shows the reprompt (the question inside it)."""
    cfg = SDPOScratchConfig(max_steps=2, prompts_per_step=P, num_generations=G, max_completion_length=4,
                         success_reward_threshold=0.5, output_dir=str(tmp_path), log_completions_every=1)
    history = SDPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, cfg).train()
    df = load(tmp_path)
    by_step = {r["step"]: r for r in history}
    for step, group in df.groupby("step"):
        assert group["has_teacher"].mean() == pytest.approx(by_step[step]["sdpo/teacher_coverage"], **FP32)
    taught = df[df["has_teacher"]]
    assert len(taught) and all(p.strip().splitlines()[0] in t for p, t in zip(taught["prompt"], taught["teacher_prompt"]))


def test_zero_writes_no_file_and_resume_cuts_it(tok, rows, tmp_path):
    """log_completions_every=0 writes nothing; a resumed run keeps the rows up to its checkpoint and
    writes its own after them (no step twice)."""
    kw = dict(max_steps=4, prompts_per_step=P, num_generations=G, max_completion_length=3, save_steps=2)
    GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows,
             GRPOScratchConfig(**kw, output_dir=str(tmp_path / "off"), log_completions_every=0)).train()
    assert not (tmp_path / "off" / "completions.jsonl").exists()
    out = tmp_path / "on"
    GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows,
             GRPOScratchConfig(**kw, output_dir=str(out), log_completions_every=1)).train()
    GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows,
             GRPOScratchConfig(**kw, output_dir=str(out), log_completions_every=1)).train(resume_from_checkpoint=out / "checkpoint-2")
    assert load(out)["step"].tolist() == sorted([1, 2, 3, 4] * (P * G))


def test_trl_grpo_writes_the_same_columns(tok, rows, tmp_path):
    """The TRL backend's file has the scratch loop's columns, and its rewards are the metrics row's."""
    trainer = build_trl_grpo_trainer(build_model(tok, seed=0), tok, [exact_match_reward(), char_reward], rows,
                                     preset="cpu", output_dir=tmp_path, verbose=False, max_steps=2,
                                     prompts_per_step=P, num_generations=G, max_completion_length=3,
                                     log_completions_every=1)
    trainer.train()
    df = load(tmp_path)
    assert sorted(df["step"].unique()) == [1, 2]
    assert {"prompt", "completion", "reward", "reward/exact_match", "reward/char_reward"} <= set(df.columns)
    check_against_metrics(df, trainer.history, ["exact_match", "char_reward"])


def test_trl_sdpo_has_teacher_and_feedback_columns(tok, rows, tmp_path):
    """SDPO on TRL: teacher_prompt / has_teacher as on the scratch loop (coverage equal to the
    logged one), and the checker's feedback texts in the feedback column."""
    trainer = build_trl_sdpo_trainer(build_model(tok, seed=0), tok, [feedback_reward()], rows, preset="cpu",
                                     output_dir=tmp_path, verbose=False, max_steps=1, prompts_per_step=P,
                                     num_generations=G, max_completion_length=3, include_environment_feedback=True,
                                     log_completions_every=1)
    trainer.train()
    df = load(tmp_path)
    assert len(df) == P * G and {"teacher_prompt", "has_teacher", "feedback"} <= set(df.columns)
    assert df["feedback"].notna().any()
    row = [r for r in trainer.history if r["step"] == 1][0]
    assert df["has_teacher"].mean() == pytest.approx(row["sdpo/teacher_coverage"], **FP32)


def test_rows_and_text():
    """Chat messages become text; columns of unequal length are refused; NaN becomes null."""
    assert as_text([{"role": "assistant", "content": "42"}]) == "42"
    assert as_text([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]) == "system: s\nuser: q"
    assert completion_rows(3, {"completion": ["a"], "reward": [float("nan")]}) == [
        {"step": 3, "completion": "a", "reward": None}]
    with pytest.raises(ValueError, match="unequal"):
        completion_rows(1, {"completion": ["a", "b"], "reward": [1.0]})
    log = CompletionLog(None, 0)
    assert not log.wanted(1)
    log.add(1, completion=["x"])
    assert log.flush(1) == []  # nobody wanted step 1: nothing was kept
