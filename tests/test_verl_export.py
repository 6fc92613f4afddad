"""The verl bridge without verl: the exported parquet follows verl's RL data schema row for row,
and the generated reward module scores what the sdpo_kit reward scores (float, or score + feedback)."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from sdpo_kit.integrations.verl import COLUMNS, export_dataset, verl_rows, write_reward_module
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
    assert fb.compute_score("sdpo_kit/arithmetic", "12", "12") == 1.0   # right: no feedback, a plain float
