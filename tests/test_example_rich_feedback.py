"""CI runs ``examples/sdpo_rich_feedback.py``: its CPU path end to end on a small warm start (the
feedback example printed, SDPO trained, metrics written), its CUDA path's trainer config without a
model, and ``--device cuda`` on a machine without CUDA."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from sdpo_kit.core.trl_base import resolve_preset

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "sdpo_rich_feedback.py"


def load_example():
    spec = importlib.util.spec_from_file_location("sdpo_rich_feedback", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = load_example()


def test_cpu_path_shows_the_feedback_and_trains(tmp_path, capsys):
    """Two SDPO steps on the tiny-lab code task from a small warm start (test_code_lab_e2e.py's, so CI
    trains it once): the example printed a "Wrong Answer" feedback from the sandbox and a teacher
    prompt that contains it, every step and the before/after evals are in metrics.jsonl, and the
    run ends with the before -> after line."""
    out = tmp_path / "run"
    summary = example.main(["--device", "cpu", "--steps", "2", "--output-dir", str(out),
                            "--set", "model.lab.sft_steps=40", "--set", "model.lab.context_steps=20",
                            "--set", "task.n_eval=8", "--set", "trainer.prompts_per_step=4",
                            "--set", "trainer.num_generations=4", "--set", "trainer.eval_every=2"])
    printed = capsys.readouterr().out
    feedback = printed.split("feedback (the code reward's, LiveCodeBench's form):\n", 1)[1].split("\nteacher prompt", 1)[0]
    teacher = printed.split("teacher prompt (reprompt_template + feedback_template):\n", 1)[1].split("\n---", 1)[0]
    assert "Wrong Answer" in feedback and feedback.strip() in teacher
    assert "f(x)=" in teacher.split(feedback.strip())[0]  # the question comes first
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2]
    assert rows[0]["step"] == 0 and "eval/accuracy" in rows[0] and "eval/accuracy" in rows[-1]
    assert 0.0 <= summary["before"] <= 1.0 and 0.0 <= summary["after"] <= 1.0
    assert "lab_code held-out accuracy (greedy, all six tests): before" in printed


def test_show_feedback_example_returns_what_it_printed(capsys):
    """The near miss scores 0, its feedback names the failing call and never the answer."""
    from sdpo_kit.registry import load_config
    from sdpo_kit.tasks.code import CodeTask

    cfg = load_config(example.CPU_CONFIG, {"task.n_eval": 4})
    task = CodeTask(n_eval=4)
    texts = example.show_feedback_example(task, cfg.trainer)
    answer = task.splits()[1][0]["answer"]
    assert texts["score"] == 0.0 and texts["attempt"] != answer
    assert "Wrong Answer" in texts["feedback"] and answer not in texts["feedback"]
    assert texts["teacher_prompt"].startswith(texts["prompt"]) and texts["feedback"] in texts["teacher_prompt"]
    assert texts["feedback"] in capsys.readouterr().out


def test_gpu_training_args_are_the_t4_profile(tmp_path):
    """The CUDA path's trainer config, built without a model: the T4 preset (fp16, gradient
    checkpointing), the tests' feedback in the teacher prompt, 4 completions of 512 tokens, whole
    groups per generation batch in micro-batches of 2; ``--set trainer.*`` reaches it."""
    from sdpo_kit.grpo.trl import grpo_args
    from sdpo_kit.sdpo.trl import SDPOTRLArgs

    config = example.gpu_training_args(str(tmp_path), steps=2, overrides={"trainer.learning_rate": 1e-5})
    preset = resolve_preset(config.preset)
    assert preset["fp16"] and not preset["bf16"] and preset["gradient_checkpointing"]
    assert config.include_environment_feedback and config.num_generations == 4
    assert config.max_completion_length == 512 and config.max_steps == 2 and config.learning_rate == 1e-5
    knobs = {k: getattr(config, k) for k in ("prompts_per_step", "num_generations", "max_steps")}
    args = grpo_args(config.preset, tmp_path, args_class=SDPOTRLArgs, **knobs, **config.trl_args)
    assert args["fp16"] and args["gradient_checkpointing"] and args["per_device_train_batch_size"] == 2


def test_gpu_training_args_refuse_other_sections(tmp_path):
    """Only trainer.* overrides make sense on the CUDA path: anything else exits naming the key."""
    with pytest.raises(SystemExit, match="model.lab.sft_steps"):
        example.gpu_training_args(str(tmp_path), overrides={"model.lab.sft_steps": 3})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_device_cuda_without_cuda_exits_clearly():
    """``--device cuda`` with no GPU is a SystemExit with a message, not a traceback from deep inside."""
    with pytest.raises(SystemExit, match="no CUDA GPU") as err:
        example.main(["--device", "cuda"])
    assert isinstance(err.value.code, str) and "--device cpu" in err.value.code
