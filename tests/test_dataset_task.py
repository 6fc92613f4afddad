"""A learner's own data and reward from a config: the ``dataset`` task, ``answer_rule`` and ``python`` rewards
of their own, bad input named before training, and ``sdpo-kit eval``.

The runs use the tiny lab on a file of its own sums ("3+5+1=", answered on the first line), so they take
seconds; the real model's run of ``examples/own_task`` is measured in ``benchmarks/``.
"""

from __future__ import annotations

import json

import pytest
import yaml

from sdpo_kit.core.config import ConfigError
from sdpo_kit.registry import get_algorithm, load_config
from sdpo_kit.rewards import RewardError, compute_rewards, make_reward
from sdpo_kit.tasks import ArithmeticTask
from sdpo_kit.tasks.dataset import DatasetError, DatasetTask, check_dataset_run

# the tiny lab's own held-out sums (its warm start never trained on them), as a learner's file would hold them
SUMS = [{"question": q["prompt"][-1]["content"], "answer": q["answer"], "hint": f"The sum is {q['answer']}."}
        for q in ArithmeticTask(digits=1, terms=3, n_eval=200, seed=0).splits()[1][:60]]


def write(path, rows, fmt):
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "json":
        path.write_text(json.dumps({"data": rows}))
    elif fmt == "csv":
        import csv

        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    elif fmt == "disk":
        from datasets import Dataset

        Dataset.from_list(rows).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet", "disk"])
def test_every_format_gives_the_same_rows(tmp_path, fmt):
    """JSONL, JSON, CSV, Parquet and a save_to_disk folder: the same prompts, answers and extra columns, the
    same held-out rows for the same seed, train and held-out disjoint."""
    path = write(tmp_path / f"sums.{fmt if fmt != 'disk' else 'd'}", SUMS, fmt)
    task = DatasetTask(path=str(path), n_eval=10, answer_rule="first_line", seed=3)
    train, heldout = task.splits()
    assert len(train) == 50 and len(heldout) == 10
    assert not {r["question"] for r in train} & {r["question"] for r in heldout}
    reference = DatasetTask(path=str(write(tmp_path / "ref.jsonl", SUMS, "jsonl")), n_eval=10,
                            answer_rule="first_line", seed=3)
    assert heldout == reference.splits()[1]
    row = heldout[0]
    assert row["prompt"] == [{"role": "user", "content": row["question"]}] and row["hint"].startswith("The sum is")


def test_prompt_template_system_prompt_and_plain_text(tmp_path):
    path = write(tmp_path / "s.jsonl", SUMS, "jsonl")
    chat = DatasetTask(path=str(path), prompt_template="{question} Answer with the number only.",
                       system_prompt="Be brief.", n_eval=5)
    assert chat.splits()[0][0]["prompt"][0] == {"role": "system", "content": "Be brief."}
    assert chat.splits()[0][0]["prompt"][1]["content"].endswith("= Answer with the number only.")
    plain = DatasetTask(path=str(path), chat=False, system_prompt="Be brief.", n_eval=5)
    assert plain.splits()[0][0]["prompt"].startswith("Be brief.\n\n")


@pytest.mark.parametrize("content,fmt,message", [
    (None, "jsonl", "not found"),
    ("", "jsonl", "no rows"),
    ('{"question": "1+1=", "answer": "2"}\n{"question": "2+2=", "answer"\n', "jsonl", "line 2: not valid JSON"),
    ('{"question": "1+1=", "answer": "2"}\n[1, 2]\n', "jsonl", "line 2: a row must be a JSON object"),
    ('{"question": "1+1="}\n', "jsonl", "row 1: no field 'answer'"),
    ('{"prompt": "x", "question": "1+1=", "answer": "2"}\n', "jsonl", "a column is named 'prompt'"),
    ("question,answer\n1+1=,2\n2+2=,4,extra\n", "csv", "line 3"),
    ("x", "txt", "unknown format '.txt'"),
])
def test_bad_input_is_named_before_training(tmp_path, content, fmt, message):
    """A missing file, an empty one, a malformed line or row, a missing field, a clashing column and an unknown
    format each fail when the task is built, naming the file (and the line, row or field)."""
    path = tmp_path / f"data.{fmt}"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DatasetError, match=message) as err:
        DatasetTask(path=str(path), n_eval=1)
    assert "data." in str(err.value)


def test_too_few_rows_and_an_algorithm_that_cannot_use_the_file(tmp_path):
    path = write(tmp_path / "s.jsonl", SUMS[:6], "jsonl")
    with pytest.raises(DatasetError, match="holds out every one"):
        DatasetTask(path=str(path), n_eval=6)
    task = DatasetTask(path=str(path), n_eval=3)
    with pytest.raises(DatasetError, match="fewer than one step's prompts_per_step=4"):
        check_dataset_run(task, get_algorithm("grpo").dataset_refusal, 4)
    with pytest.raises(DatasetError, match="VAPOR trains on tagged answers"):
        check_dataset_run(task, get_algorithm("vapor").dataset_refusal, 1)
    check_dataset_run(task, get_algorithm("sdpo").dataset_refusal, 3)
    separate = DatasetTask(path=str(path), eval_path=str(write(tmp_path / "e.csv", SUMS[10:14], "csv")), n_eval=50)
    assert len(separate.splits()[0]) == 6 and len(separate.splits()[1]) == 4


def config(tmp_path, **over) -> dict:
    data = {"algorithm": "grpo", "backend": "scratch", "model": {"name": "tiny-lab"},
            "task": {"name": "dataset", "path": "sums.jsonl", "answer_rule": "first_line", "n_eval": 8},
            "reward": [{"type": "exact_match"}],
            "trainer": {"max_steps": 2, "prompts_per_step": 2, "num_generations": 4, "max_completion_length": 4,
                        "eval_every": 2, "learning_rate": 1e-4},
            "output_dir": str(tmp_path / "run")}
    for k, v in over.items():
        data[k] = v
    (tmp_path / "conf").mkdir(exist_ok=True)
    write(tmp_path / "conf" / "sums.jsonl", SUMS, "jsonl")
    path = tmp_path / "conf" / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


RULES = "import re\n\ndef digits(text):\n    m = re.search(r'\\d+', text)\n    return m.group() if m else None\n"
REWARDS = ("def exact(prompts, completions, answer, **kw):\n    return [float(c.strip() == a) for c, a in zip(completions, answer)]\n"
           "def no_kwargs(completions):\n    return [0.0] * len(completions)\n"
           "def short(prompts, completions, **kw):\n    return [1.0]\n"
           "def words(prompts, completions, **kw):\n    return ['good'] * len(completions)\n"
           "def one(prompts, completions, **kw):\n    return 1.0\n")


def test_an_answer_rule_and_a_reward_of_ones_own_next_to_the_config(tmp_path):
    """``answer_rule: "rules.py:digits"`` and ``{type: python, function: "my_rewards.py:exact"}`` load from the
    config's folder; the rule reads answers for evaluation and exact match; weights mix them with built-ins."""
    path = config(tmp_path, task={"name": "dataset", "path": "sums.jsonl", "answer_rule": "rules.py:digits", "n_eval": 8},
                  reward=[{"type": "python", "function": "my_rewards.py:exact"}, {"type": "exact_match", "weight": 0.5}])
    (path.parent / "rules.py").write_text(RULES)
    (path.parent / "my_rewards.py").write_text(REWARDS)
    cfg = load_config(path)
    from sdpo_kit import make_task

    task = make_task(**cfg.task)
    assert task.is_correct("it is 9 I think", "9") and not task.is_correct("none", "9")
    fns = make_reward([{k: v for k, v in r.items() if k != "weight"} for r in cfg.reward], task=task)
    total, per = compute_rewards(fns, ["q"] * 2, ["9", "it is 9"], {"answer": ["9", "9"]}, [1.0, 0.5])
    assert per.tolist() == [[1.0, 1.0], [0.0, 1.0]] and total.tolist() == [1.5, 0.5]


@pytest.mark.parametrize("function,message", [
    ("missing.py:exact", "no file 'missing.py'"), ("my_rewards.py:nope", "has no 'nope'"),
    ("my_rewards", "write it as 'file.py:name'"), ("no_such_package.mod:fn", "cannot import module"),
])
def test_a_reward_that_cannot_be_loaded_fails_before_training(tmp_path, function, message):
    path = config(tmp_path, reward=[{"type": "python", "function": function}])
    (path.parent / "my_rewards.py").write_text(REWARDS)
    cfg = load_config(path)
    from sdpo_kit.training import train

    with pytest.raises(ConfigError, match=message):
        train(cfg)


@pytest.mark.parametrize("name,message", [("no_kwargs", "give it a \\*\\*kwargs"), ("short", "returned 1 values for 2"),
                                          ("words", "returned a str for completion 0"),
                                          ("one", "returned a float; it must return a list")])
def test_a_reward_that_returns_the_wrong_thing_is_named_at_its_first_call(tmp_path, name, message):
    (tmp_path / "r.py").write_text(REWARDS)
    fn = make_reward({"type": "python", "function": f"r.py:{name}", "base_dir": str(tmp_path)})[0]
    with pytest.raises(RewardError, match=f"'{name}'.*{message}"):
        compute_rewards([fn], ["q", "q"], ["1", "2"], {"answer": ["1", "2"]})


@pytest.mark.parametrize("algorithm,backend", [("grpo", "scratch"), ("grpo", "trl"), ("sdpo", "scratch")])
def test_a_run_on_ones_own_file_and_eval_afterwards(tmp_path, algorithm, backend, capsys):
    """Two steps on the tiny lab from the file (SDPO with its feedback column as the checker's feedback), then
    ``sdpo-kit eval`` on the run prints the held-out accuracy the run ended on, and on the base model its start."""
    from sdpo_kit.cli import main

    reward = [{"type": "feedback"}] if algorithm == "sdpo" else [{"type": "exact_match"}]
    task = {"name": "dataset", "path": "sums.jsonl", "answer_rule": "first_line", "n_eval": 8,
            **({"feedback_field": "hint"} if algorithm == "sdpo" else {})}
    trainer = {"max_steps": 2, "prompts_per_step": 2, "num_generations": 4, "max_completion_length": 4, "eval_every": 2,
               "learning_rate": 1e-4, "log_completions_every": 1}
    if backend == "trl":
        trainer["preset"] = "cpu"
    path = config(tmp_path, algorithm=algorithm, backend=backend, task=task, reward=reward, trainer=trainer)
    assert main(["train", str(path)]) == 0
    out = capsys.readouterr().out
    after = float(out.split("held-out accuracy: before ")[1].split(" -> after ")[1].split(" ")[0])
    before = float(out.split("held-out accuracy: before ")[1].split(" ")[0])
    assert main(["eval", str(tmp_path / "run"), "--config", str(path)]) == 0
    line = capsys.readouterr().out
    assert f"held-out accuracy {after:.3f} on 8 questions (run" in line and "'first_line' rule" in line
    assert main(["eval", "tiny-lab", "--config", str(path)]) == 0
    assert f"held-out accuracy {before:.3f} on 8 questions (model tiny-lab" in capsys.readouterr().out
    if algorithm == "sdpo":
        logged = [json.loads(x) for x in (tmp_path / "run" / "completions.jsonl").read_text().splitlines()]
        assert any(r.get("feedback", "").startswith("The sum is") for r in logged if r["reward"] == 0.0)


def test_eval_says_what_is_wrong_with_its_target(tmp_path, capsys):
    from sdpo_kit.cli import main

    path = config(tmp_path)
    (tmp_path / "empty").mkdir()
    assert main(["eval", str(tmp_path / "empty"), "--config", str(path)]) == 2
    assert "neither a run" in capsys.readouterr().err
