"""SDPO reads a dataset's feedback column whenever the config names one, on both backends.

A file of questions whose answers no completion can hit (so no sibling succeeds), each with a feedback text;
``task.feedback_field`` names the column and the reward is ``feedback``. One training step: every teacher prompt
holds its row's feedback (``completions.jsonl``'s ``teacher_prompt``), every row has a teacher, and the
distillation loss is not zero. ``include_environment_feedback`` was left unset: naming the column turns it on.
A config that would leave the column unused (another reward, or ``include_environment_feedback: false``) is refused
when it is loaded, naming the key to set.
"""

from __future__ import annotations

import json

import pytest

from sdpo_kit import load_config, train
from sdpo_kit.core.config import ConfigError

ROWS = [{"question": f"Spell {w}.", "answer": f"qz{w}qz", "hint": f"HINT-{w}: wrap it in qz"}
        for w in ("ab", "cd", "ef", "gh", "ij", "kl", "mn", "op", "rs", "tu")]


def config(tmp_path, **trainer) -> dict:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return {"algorithm": "sdpo", "task": {"name": "dataset", "path": str(path), "feedback_field": "hint", "n_eval": 2,
                                          "chat": False},
            "reward": [{"type": "feedback"}], "output_dir": str(tmp_path / "run"),
            "trainer": {"max_steps": 1, "prompts_per_step": 2, "num_generations": 2, "max_completion_length": 3,
                        "eval_every": 0, "log_completions_every": 1, **trainer}}


@pytest.mark.parametrize("backend", ["scratch", "trl"])
def test_the_teacher_reads_each_rows_feedback_when_no_sibling_succeeds(tmp_path, backend):
    cfg = load_config({**config(tmp_path), "backend": backend})
    assert cfg.trainer.include_environment_feedback is True     # unset, and the task names a feedback column
    summary = train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "run" / "completions.jsonl").read_text().splitlines()]
    assert rows and all(r["reward"] == 0.0 for r in rows), "no completion is right: no sibling can teach"
    by_answer = {r["answer"]: r["hint"] for r in ROWS}
    for r in rows:
        assert by_answer[r["answer"]] in r["teacher_prompt"], (r["answer"], r["teacher_prompt"])
    (step,) = [h for h in summary["history"] if "loss" in h]
    assert step["sdpo/feedback_frac"] == 1.0 and step["sdpo/teacher_coverage"] == 1.0, step
    assert abs(step["sdpo/distill_loss"]) > 0 and abs(step["loss"]) > 0, step


def test_a_config_that_would_leave_the_column_unused_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"trainer.include_environment_feedback is false.*set "
                                          r"trainer.include_environment_feedback: true"):
        load_config(config(tmp_path, include_environment_feedback=False))
    with pytest.raises(ConfigError, match=r"no reward carries it to SDPO's teacher: add the feedback reward"):
        load_config({**config(tmp_path), "reward": [{"type": "exact_match"}]})
    plain = config(tmp_path)
    plain["task"] = {k: v for k, v in plain["task"].items() if k != "feedback_field"}
    assert load_config(plain).trainer.include_environment_feedback is False   # no column: off, as TRL's default
