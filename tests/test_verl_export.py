"""The verl bridge without verl: the exported parquet follows verl's RL data schema row for row,
the generated reward module scores what the sdpo_kit reward scores (float, or score + feedback),
our settings land on verl's keys, and ``sdpo-kit export-verl`` writes a run folder or nothing.
The same exports checked against real verl: tests/verl_engine/ (make test-verl)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from sdpo_kit.cli import main
from sdpo_kit.core.verl_keys import VerlPaths
from sdpo_kit.deploy.verl import COLUMNS, export_dataset, export_verl, verl_rows, write_reward_module
from sdpo_kit.deploy.verl_config import VerlExportError, overrides, verl_settings
from sdpo_kit.grpo.verl import LOSS_AGG_MODE
from sdpo_kit.registry import config_from_dict
from sdpo_kit.rewards import load_code_problems
from sdpo_kit.tasks import ArithmeticTask


def load_module(path):
    spec = importlib.util.spec_from_file_location("verl_reward_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parquet_rows_follow_verls_schema(tmp_path):
    task = ArithmeticTask(n_eval=20, seed=0)
    train, heldout = task.splits()
    paths = export_dataset(task, tmp_path)
    for split, rows in (("train", train), ("val", heldout)):
        df = pd.read_parquet(paths[split])
        assert tuple(df.columns) == COLUMNS and len(df) == len(rows)
        first = df.iloc[0]
        assert list(first["prompt"]) == rows[0]["prompt"]
        assert first["reward_model"] == {"style": "rule", "ground_truth": rows[0]["answer"]}
        assert first["extra_info"]["split"] == split and first["extra_info"]["index"] == 0
        assert json.loads(first["extra_info"]["prompt"]) == rows[0]["prompt"]
        assert (df["data_source"] == "sdpo_kit/arithmetic").all()
    with pytest.raises(ValueError, match="ground_truth"):
        verl_rows([{"prompt": "1+1="}], data_source="x", split="train")
    assert verl_rows([{"prompt": "1+1=", "answer": 2}], data_source="x", split="train")[0]["prompt"] == [
        {"role": "user", "content": "1+1="}]


def test_the_reward_module_scores_as_sdpo_kit(tmp_path):
    exact = load_module(write_reward_module(tmp_path / "a", "exact_match"))
    assert exact.compute_score("sdpo_kit/arithmetic", "12", "12") == 1.0
    assert exact.compute_score("sdpo_kit/arithmetic", " 12.", "12", extra_info={"prompt": "[]"}) == 1.0
    assert exact.compute_score("sdpo_kit/arithmetic", "13", "12") == 0.0
    fb = load_module(write_reward_module(tmp_path / "b", {"type": "feedback"}))
    out = fb.compute_score("sdpo_kit/arithmetic", "15", "12")
    assert out["score"] == 0.0 and "too large" in out["feedback"]
    # right: no feedback text, but the same keys (verl's reward loop builds its batch from the first row's keys)
    assert fb.compute_score("sdpo_kit/arithmetic", "12", "12") == {"score": 1.0, "feedback": ""}
    env = load_module(write_reward_module(tmp_path / "g", {"type": "environment"}))   # the Environment protocol
    assert env.compute_score("s", "15", "12") == out and env.compute_score("s", "12", "12")["score"] == 1.0


@pytest.mark.skipif(os.name != "posix", reason="the sandbox needs a POSIX system")
def test_the_code_reward_module_takes_the_tests_as_ground_truth(tmp_path):
    """Code rows go out with their tests as verl's ground truth (JSON text, ability "code"); the
    module runs them in the sandbox: a reference scores 1 with empty feedback, a wrong program 0
    with the Wrong Answer (or, with no function to call, the Runtime Error) text, no code block 0
    with the format message, in both test forms."""
    refs = json.loads((Path(__file__).with_name("data") / "code_problem_references.json").read_text())
    rows = [r for r in load_code_problems() if r["problem_id"] in ("sum_two", "two_sum")]
    out = verl_rows(rows, data_source="sdpo_kit/code", split="train", ability="code", answer_field="tests")
    assert [o["reward_model"]["ground_truth"] for o in out] == [r["tests"] for r in rows]
    code = load_module(write_reward_module(tmp_path / "code", {"type": "code", "timeout_s": 5.0}))
    for row, o in zip(rows, out):
        truth = o["reward_model"]["ground_truth"]
        assert code.compute_score("sdpo_kit/code", f"```python\n{refs[row['problem_id']]}```", truth,
                                  extra_info=o["extra_info"]) == {"score": 1.0, "feedback": ""}
        wrong = code.compute_score("sdpo_kit/code", "```python\nprint(0)\n```", truth)
        header = "Runtime Error\nNameError" if row["form"] == "call" else "Test Case"  # print(0) defines no function
        assert wrong["score"] == 0.0 and wrong["feedback"].startswith(header), wrong
        assert code.compute_score("sdpo_kit/code", "print(0)", truth)["feedback"].startswith("Incorrect Format")


def test_several_rewards_are_weighted_and_summed_and_bad_ones_refused(tmp_path):
    both = load_module(write_reward_module(tmp_path / "c", [{"type": "tag_format", "weight": 0.5},
                                                            {"type": "tagged_exact_match"}]))
    assert both.compute_score("s", "<answer>12</answer>", "12") == 1.5
    assert both.compute_score("s", "<answer>13</answer>", "12") == 0.5
    assert both.compute_score("s", "12", "12") == 0.0
    with pytest.raises(VerlExportError, match="unknown option"):
        write_reward_module(tmp_path / "f", [{"type": "exact_match", "tagd": True}])
    with pytest.raises(VerlExportError, match="scored by the policy"):
        write_reward_module(tmp_path / "d", "inverse_loss")
    with pytest.raises(VerlExportError, match="unknown reward type"):
        write_reward_module(tmp_path / "e", "no_such_reward")
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


PATHS = VerlPaths(train_files="/d/train.parquet", val_files="/d/val.parquet", reward_module="/d/reward.py",
                  model="/d/model", teacher_model="/d/teacher")


@pytest.mark.parametrize("loss_type, mode", sorted(LOSS_AGG_MODE.items()))
def test_grpo_settings_say_ours_in_verls_keys(loss_type, mode):
    cfg = config_from_dict({"algorithm": "grpo", "trainer": {
        "num_generations": 6, "prompts_per_step": 12, "num_iterations": 2, "epsilon": 0.2, "epsilon_high": 0.28,
        "beta": 0.04, "loss_type": loss_type, "max_completion_length": 7, "learning_rate": 2e-4, "top_k": 0,
        "scale_rewards": "none", "max_steps": 30, "eval_every": 0}})
    s = verl_settings(cfg, PATHS, n_gpus_per_node=4, max_prompt_length=64)
    v, a = s.values, "actor_rollout_ref.actor."
    assert v["algorithm.adv_estimator"] == "grpo" and v["actor_rollout_ref.rollout.n"] == 6
    assert v["data.train_batch_size"] == v[a + "ppo_mini_batch_size"] == 12 and v[a + "ppo_epochs"] == 2
    assert (v[a + "clip_ratio_low"], v[a + "clip_ratio_high"]) == (0.2, 0.28)
    assert v[a + "loss_agg_mode"] == mode
    assert v.get(a + "loss_scale_factor") == (7 if loss_type == "dr_grpo" else None)
    assert v[a + "use_kl_loss"] is True and v[a + "kl_loss_coef"] == 0.04 and v[a + "kl_loss_type"] == "low_var_kl"
    assert v["algorithm.norm_adv_by_std_in_grpo"] is False and v["actor_rollout_ref.rollout.top_k"] == -1
    assert v["data.max_response_length"] == 7 and v["data.max_prompt_length"] == 64
    assert v[a + "optim.lr"] == 2e-4 and v["trainer.total_training_steps"] == 30
    assert v["trainer.test_freq"] == 30          # eval_every 0: at the start and the end, as ours
    assert v[a + "optim.clip_grad"] == 1.0 and v[a + "optim.weight_decay"] == 0.0 and v[a + "clip_ratio_c"] >= 1e9
    assert v["trainer.n_gpus_per_node"] == 4 and "actor_rollout_ref.model.lora_rank" not in v
    assert len(s.unmapped) == 1 and "bias-corrected" in s.unmapped[0]    # beta > 0: ours weighs k3 by the ratio


def test_ppo_settings_map_gae_kl_control_and_the_teacher_and_name_what_does_not_map():
    cfg = config_from_dict({"algorithm": "ppo", "trainer": {
        "gamma": 0.99, "lam": 0.9, "batch_size": 32, "mini_batch_size": 8, "ppo_epochs": 3, "cliprange": 0.15,
        "cliprange_value": 0.3, "init_kl_coef": 0.1, "adap_kl_ctrl": True, "target": 5.0, "horizon": 500,
        "kd_coef": 0.25, "scheduler_name": "cosine", "scheduler_kwargs": {"warmup_steps": 3},
        "gradient_accumulation_steps": 2, "max_completion_length": 4, "teacher_lab": {"sft_steps": 10}}})
    s = verl_settings(cfg, PATHS)
    v = s.values
    assert (v["algorithm.adv_estimator"], v["algorithm.gamma"], v["algorithm.lam"]) == ("gae", 0.99, 0.9)
    assert v["critic.enable"] is True and v["critic.model.path"] == "/d/model" and v["critic.cliprange_value"] == 0.3
    assert v["data.train_batch_size"] == 32 and v["actor_rollout_ref.actor.ppo_mini_batch_size"] == 16   # 8 x 2 accum
    assert v["actor_rollout_ref.actor.shuffle"] is True
    assert v["actor_rollout_ref.rollout.n"] == 1 and v["actor_rollout_ref.actor.clip_ratio"] == 0.15
    assert v["algorithm.use_kl_in_reward"] is True and v["actor_rollout_ref.actor.use_kl_loss"] is False
    assert (v["algorithm.kl_ctrl.type"], v["algorithm.kl_ctrl.kl_coef"], v["algorithm.kl_ctrl.target_kl"],
            v["algorithm.kl_ctrl.horizon"]) == ("adaptive", 0.1, 5.0 / 4, 500)   # summed KL -> per-token mean
    for role in ("actor_rollout_ref.actor", "critic"):
        assert v[f"{role}.optim.lr_scheduler_type"] == "cosine" and v[f"{role}.optim.lr_warmup_steps"] == 3
    assert v["distillation.enabled"] is True and v["distillation.distillation_loss.distillation_loss_coef"] == 0.25
    assert v["distillation.teacher_models.teacher_model.model_path"] == "/d/teacher"
    assert v["distillation.distillation_loss.use_policy_gradient"] is False    # a loss term, as ours
    said = " ".join(s.unmapped)
    for key in ("early_stopping", "use_score_scaling", "vf_coef", "kd_temperature", "trainer.target"):
        assert key in said
    fixed = verl_settings(config_from_dict({"algorithm": "ppo", "trainer": {"adap_kl_ctrl": False, "kd_coef": 0,
                                                                            "teacher_model": None}}), PATHS)
    assert fixed.values["algorithm.kl_ctrl.type"] == "fixed" and "distillation.enabled" not in fixed.values


def test_lora_settings_follow_load_policys_defaults():
    hub = verl_settings(config_from_dict({"model": {"name": "Qwen/Qwen2.5-0.5B-Instruct"}}), PATHS).values
    assert (hub["actor_rollout_ref.model.lora_rank"], hub["actor_rollout_ref.model.lora_alpha"]) == (16, 16)
    assert "q_proj" in hub["actor_rollout_ref.model.target_modules"]
    lab = verl_settings(config_from_dict({"model": {"lora": {"r": 4, "target_modules": ["q_proj"]}}}), PATHS).values
    assert (lab["actor_rollout_ref.model.lora_rank"], lab["actor_rollout_ref.model.lora_alpha"]) == (4, 16)
    assert lab["actor_rollout_ref.model.target_modules"] == ["q_proj"]


def test_algorithms_verl_has_no_loss_for_are_refused():
    for algorithm in ("sdpo", "vapor"):
        cfg = config_from_dict({"algorithm": algorithm, "backend": "scratch"})
        with pytest.raises(VerlExportError, match="no loss in verl"):
            verl_settings(cfg, PATHS)


def test_hydra_values_read_back_as_written():
    assert overrides({"a.b": True, "c": None, "d": [1, "x"], "e": 1e-4, "f": "$D/x.parquet", "g": "a b"}) == [
        "a.b=true", "c=null", "d=[1,x]", "e=0.0001", 'f="$D/x.parquet"', "g='a b'"]


def test_export_verl_cli_writes_a_runnable_folder_and_fails_cleanly(tmp_path, capsys):
    out = tmp_path / "verl"
    assert main(["export-verl", "configs/demo.yaml", "--out", str(out), "--no-check"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "model", "reward.py", "run_verl.sh", "train.parquet", "val.parquet", "verl_settings.json"]
    script = (out / "run_verl.sh").read_text()
    assert "python -m verl.trainer.main_ppo" in script and 'data.train_files="$D/train.parquet"' in script
    assert "lr_scheduler_type=linear" in script  # what did not map is said in the script's header
    settings = json.loads((out / "verl_settings.json").read_text())
    prompts = pd.read_parquet(out / "train.parquet")["prompt"]
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out / "model")
    longest = max(len(tok.apply_chat_template(list(p), add_generation_prompt=True, tokenize=True)["input_ids"])
                  for p in prompts)
    assert settings["values"]["data.max_prompt_length"] == longest          # measured, not guessed
    assert "data.filter_overlong_prompts" not in settings["values"]
    assert "not checked against verl" in capsys.readouterr().out
    # a second export into the same folder refuses; an algorithm verl cannot run leaves nothing behind
    assert main(["export-verl", "configs/demo.yaml", "--out", str(out), "--no-check"]) == 2
    assert main(["export-verl", "configs/sdpo.yaml", "--out", str(tmp_path / "sdpo"), "--no-check"]) == 2
    # default.yaml's reward is scored by the policy: refused after the parquet was written, none of it kept
    assert main(["export-verl", "configs/default.yaml", "--out", str(tmp_path / "inv"), "--no-check"]) == 2
    assert not (tmp_path / "sdpo").exists() and [p.name for p in tmp_path.iterdir()] == ["verl"]
    err = capsys.readouterr().err
    assert "no loss in verl" in err and "scored by the policy" in err


def test_a_hub_model_whose_tokenizer_is_not_at_hand_gets_a_guessed_length_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = config_from_dict({"model": {"name": "nobody/not-cached-anywhere"}, "trainer": {"max_steps": 3}})
    out = export_verl(cfg, tmp_path / "hub", check=False)
    v = out["values"]
    assert v["actor_rollout_ref.model.path"] == "nobody/not-cached-anywhere" and "model" not in out["files"]
    assert v["data.max_prompt_length"] == 512 and v["data.filter_overlong_prompts"] is True
    assert any("is a guess" in u for u in out["unmapped"])
    assert v["actor_rollout_ref.model.lora_rank"] == 16          # a hub model trains LoRA by default
