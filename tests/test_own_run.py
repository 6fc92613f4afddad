"""A learner's own run end to end: their code tried before any model loads, a run folder that tells its state
(run_info.json, a kept checkpoint that --resume-from RUN_DIR extends), and an evaluation one can read
(eval.jsonl, --show). The runs use the tiny lab on a file of its sums (tests/test_dataset_task.py's)."""

from __future__ import annotations

import json
import re

import pytest
from test_dataset_task import config

from sdpo_kit.cli import main
from sdpo_kit.core.progress import Progress

BAD = ("def no_kwargs(completions):\n    return [0.0] * len(completions)\n"
       "def short(prompts, completions, **kw):\n    return [1.0]\n"
       "def words(prompts, completions, **kw):\n    return ['good'] * len(completions)\n"
       "def raises(prompts, completions, **kw):\n    return [1.0 / 0 for c in completions]\n"
       "CALLS = []\n"
       "def later(prompts, completions, **kw):\n"
       "    CALLS.append(1)\n"
       "    if len(CALLS) > 1:\n        raise KeyError('a column my reward expected')\n"
       "    return [0.0] * len(completions)\n")
RULES = ("def listed(text):\n    return [text]\n"
         "def raises(text):\n    return text.split()[5]\n")


@pytest.fixture
def no_model(monkeypatch):
    """A model that loads fails the test: the checks must come first."""
    import sdpo_kit.models

    def refuse(*a, **k):
        raise AssertionError("a model loaded before the learner's code was checked")

    monkeypatch.setattr(sdpo_kit.models, "load_policy", refuse)


@pytest.mark.parametrize("name,message", [
    ("no_kwargs", "give it a \\*\\*kwargs"), ("short", "returned 1 values for 4 completions"),
    ("words", "returned a str for completion 0"), ("raises", "raised ZeroDivisionError"),
])
def test_your_reward_is_called_before_the_model_loads(tmp_path, capsys, no_model, name, message):
    path = config(tmp_path, reward=[{"type": "python", "function": f"my_rewards.py:{name}"}])
    (path.parent / "my_rewards.py").write_text(BAD)
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"your reward {name} (" in err and "my_rewards.py:" in err and "before the model loads" in err
    assert re.search(message, err), err
    assert not (tmp_path / "run").exists(), "a config error creates no run folder"


@pytest.mark.parametrize("name,message", [("listed", "returned a list"), ("raises", "raised IndexError")])
def test_your_answer_rule_is_called_before_the_model_loads(tmp_path, capsys, no_model, name, message):
    path = config(tmp_path, task={"name": "dataset", "path": "sums.jsonl", "answer_rule": f"rules.py:{name}",
                                  "n_eval": 8})
    (path.parent / "rules.py").write_text(RULES)
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"your answer rule {name} (" in err and "rules.py:" in err, err
    assert message in err and not (tmp_path / "run").exists()


def test_a_fault_found_during_training_is_one_line_and_marks_the_run_failed(tmp_path, capsys):
    path = config(tmp_path, reward=[{"type": "python", "function": "my_rewards.py:later"}])
    (path.parent / "my_rewards.py").write_text(BAD)
    assert main(["train", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    tb = tmp_path / "run" / "traceback.txt"
    assert err.splitlines() == [err] and "reward function 'later' raised KeyError" in err and str(tb) in err
    info = json.loads((tmp_path / "run" / "run_info.json").read_text())
    assert info["status"] == "failed" and "KeyError" in info["error"] and info["traceback"] == str(tb)
    assert "Traceback" in tb.read_text() and info["ended"] is not None


def test_a_finished_run_says_so_keeps_a_checkpoint_and_extends(tmp_path, capsys):
    path = config(tmp_path, trainer={"max_steps": 2, "prompts_per_step": 2, "num_generations": 4,
                                     "max_completion_length": 4, "eval_every": 2, "learning_rate": 1e-4})
    assert main(["train", str(path)]) == 0
    run = tmp_path / "run"
    info = json.loads((run / "run_info.json").read_text())
    assert info["status"] == "finished" and info["command"] == f"sdpo-kit train {path}"
    assert info["config_path"] == str(path) and info["version"] and info["steps"] == 2 and info["ended"]
    assert (run / "checkpoint-2").is_dir(), "a finished run keeps its last checkpoint"
    assert main(["train", str(path), "--resume-from", str(run), "--max-steps", "4"]) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4], "one continuous metrics.jsonl"
    info = json.loads((run / "run_info.json").read_text())
    assert info["status"] == "finished" and info["steps"] == 4 and info["resumed_from"].endswith("checkpoint-2")
    assert (run / "checkpoint-4").is_dir()
    capsys.readouterr()

    assert main(["eval", str(run), "--show", "2"]) == 0            # the run's own config.yaml
    out = capsys.readouterr().out
    records = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    assert len(records) == 8 and all(set(r) == {"question", "reply", "parsed", "expected", "correct"}
                                     for r in records)
    accuracy = sum(r["correct"] for r in records) / 8
    assert f"held-out accuracy {accuracy:.3f} on 8 questions" in out and f"{rows[-1]['eval/accuracy']:.3f}" in out
    assert out.count("expected ") == 2 and "    Q: " in out and "    A: " in out
    assert f"{sum(not r['correct'] for r in records)} of 8 wrong" in out
    other = tmp_path / "elsewhere" / "e.jsonl"
    assert main(["eval", str(run), "--out", str(other)]) == 0 and len(other.read_text().splitlines()) == 8


def test_a_config_error_creates_no_folder(tmp_path, capsys):
    path = config(tmp_path, trainer={"max_steps": 0})
    assert main(["train", str(path)]) == 2
    assert not (tmp_path / "run").exists() and "max_steps" in capsys.readouterr().err


def test_progress_prints_plain_lines_off_a_terminal(capsys):
    bar = Progress(10, "eval", unit="question", every=4, terminal=False)
    for _ in range(5):
        bar.update(2)
    bar.close()
    assert capsys.readouterr().out.splitlines() == ["eval: 4/10 questions", "eval: 8/10 questions",
                                                    "eval: 10/10 questions"]


def test_train_shows_held_out_questions_before_and_after(tmp_path, capsys):
    path = config(tmp_path)
    assert main(["train", str(path), "--show", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 held-out questions, before and after training:" in out
    assert out.count("     before (") == 2 and out.count("     after  (") == 2
