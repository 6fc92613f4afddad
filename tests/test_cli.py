"""Configs and the ``sdpo-kit train`` command (run in-process through ``cli.main``)."""

import json
from pathlib import Path

import pytest

from sdpo_kit import cli
from sdpo_kit.core.config import ConfigError
from sdpo_kit.registry import config_from_dict, load_config
from sdpo_kit.training import train

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
REQUIRED = {"step", "reward/mean", "reward/std", "loss"}


@pytest.mark.parametrize("name", ["default", "unsupervised", "supervised", "demo"])
def test_shipped_configs_load(name):
    """Every shipped YAML loads with no unknown key, each with its reward (default and unsupervised:
    inverse loss; supervised: coverage-weighted CE on the answer column; demo: exact match with the
    scratch backend)."""
    cfg = load_config(CONFIGS / f"{name}.yaml")
    assert cfg.model.name == "tiny-lab"
    want = {"default": "inverse_loss", "unsupervised": "inverse_loss", "supervised": "supervised",
            "demo": "exact_match"}[name]
    assert cfg.reward[0]["type"] == want
    if name == "supervised":
        assert cfg.reward[0]["answer_field"] == "answer"
    # the trainer section is the registered trainer's own config, on either backend
    from sdpo_kit.grpo.config import GRPOScratchConfig, GRPOTRLConfig

    assert (cfg.algorithm, cfg.backend) == ("grpo", "scratch") and type(cfg.trainer) is GRPOScratchConfig
    assert type(load_config(CONFIGS / f"{name}.yaml", {"backend": "trl"}).trainer) is GRPOTRLConfig
    assert cfg.trainer.output_dir == cfg.output_dir


@pytest.mark.parametrize(
    "data, named",
    [
        ({"trainer": {"learnig_rate": 1e-3}}, "learnig_rate"),
        ({"model": {"nmae": "tiny-lab"}}, "nmae"),
        ({"task": {"digit": 2}}, "digit"),
        ({"outptu_dir": "x"}, "outptu_dir"),
    ],
)
def test_unknown_key_is_an_error_naming_it(data, named):
    """A misspelt key anywhere is a ConfigError that names it, never a silent default."""
    with pytest.raises(ConfigError, match=named):
        config_from_dict(data)


def test_bad_values_and_yaml_numbers(tmp_path):
    """``3e-4`` (a string to YAML 1.1) becomes a float; an unknown backend or algorithm, a group
    of one, a bad loss type and a reward without a type are errors; dotted overrides reach
    nested keys."""
    p = tmp_path / "c.yaml"
    p.write_text("backend: scratch\ntrainer:\n  learning_rate: 3e-4\nreward: exact_match\n")
    cfg = load_config(p, {"trainer.max_steps": 7, "task.n_eval": 10})
    assert cfg.trainer.learning_rate == pytest.approx(3e-4) and isinstance(cfg.trainer.learning_rate, float)
    assert cfg.trainer.max_steps == 7 and cfg.task["n_eval"] == 10 and cfg.reward == [{"type": "exact_match"}]
    for bad, msg in [({"backend": "jax"}, "no trainer for algorithm='grpo', backend='jax'.*grpo/scratch"),
                     ({"algorithm": "ppo", "backend": "trl"}, "no trainer for algorithm='ppo', backend='trl'"),
                     ({"trainer": {"backend": "trl"}}, "top-level"),
                     ({"trainer": {"output_dir": "x"}}, "top-level output_dir"),
                     ({"trainer": {"num_generations": 1}}, "num_generations"),
                     ({"trainer": {"loss_type": "ppo"}}, "loss_type must be one of"),
                     ({"trainer": {"share_prompt": "sometimes"}}, "share_prompt"),
                     ({"task": {"name": "chess"}}, "task.name"),
                     ({"reward": {"answer_field": "answer"}}, "type"),
                     ({"threads": -1}, "threads"),
                     ({"trainer": {"learning_rate": "fast"}}, "learning_rate")]:
        with pytest.raises(ConfigError, match=msg):
            config_from_dict(bad)


def test_each_trainer_owns_its_keys():
    """The trainer section is checked against the registered trainer's dataclass: share_prompt
    is the scratch loop's, preset and trl_args the TRL backend's; each is unknown to the other."""
    assert config_from_dict({"trainer": {"share_prompt": False}}).trainer.share_prompt is False
    trl = config_from_dict({"backend": "trl", "trainer": {"preset": "cpu", "trl_args": {"top_k": 0}}}).trainer
    assert trl.preset == "cpu" and trl.trl_args == {"top_k": 0}
    with pytest.raises(ConfigError, match=r"unknown key\(s\) in section 'trainer \(grpo/scratch\)': \['preset'\]"):
        config_from_dict({"trainer": {"preset": "cpu"}})
    with pytest.raises(ConfigError, match=r"\['share_prompt'\]"):
        config_from_dict({"backend": "trl", "trainer": {"share_prompt": True}})
    with pytest.raises(ConfigError, match="preset"):
        config_from_dict({"backend": "trl", "trainer": {"preset": "tpu"}})


def test_dumped_config_reads_back_the_same(tmp_path):
    """config.yaml, written next to every run, loads back to the config that ran."""
    from sdpo_kit.core.config import dump_config

    for backend in ("scratch", "trl"):
        cfg = load_config(CONFIGS / "demo.yaml", {"backend": backend, "trainer.save_steps": 5})
        dump_config(cfg, tmp_path / "c.yaml")
        assert load_config(tmp_path / "c.yaml") == cfg


def test_cli_reports_config_errors(capsys, tmp_path):
    """A bad --set key makes main() return 2 with the key in the message (no traceback)."""
    rc = cli.main(["train", str(CONFIGS / "demo.yaml"), "--set", "trainer.max_stesp=3",
                   "--output-dir", str(tmp_path)])
    assert rc == 2 and "max_stesp" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["scratch", "trl"])
def test_train_demo_writes_metrics_model_and_plot(backend, tmp_path, capsys):
    """``sdpo-kit train configs/demo.yaml --max-steps 3`` with either backend writes
    metrics.jsonl (required keys every step, eval/accuracy at step 0 and at the end), the
    model (safetensors + tokenizer) and the reward-curve PNG, and prints before -> after."""
    out = tmp_path / backend
    rc = cli.main(["train", str(CONFIGS / "demo.yaml"), "--backend", backend, "--max-steps", "3",
                   "--output-dir", str(out), "--set", "task.n_eval=20", "--set", "trainer.prompts_per_step=4"])
    assert rc == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 0 and "eval/accuracy" in rows[0]
    train_rows = [r for r in rows if r["step"] > 0]
    assert [r["step"] for r in train_rows] == [1, 2, 3]
    for r in train_rows:
        assert REQUIRED <= set(r), REQUIRED - set(r)
    assert "eval/accuracy" in rows[-1] and rows[-1]["step"] == 3
    assert (out / "model" / "model.safetensors").exists()
    assert (out / "model" / "tokenizer_config.json").exists()
    png = out / "reward_curve.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert load_config(out / "config.yaml").backend == backend
    printed = capsys.readouterr().out
    assert "held-out accuracy: before" in printed and "->" in printed and "s/step" in printed


def test_train_with_lora_saves_only_the_adapter(tmp_path):
    """With ``model.lora`` set, the run saves the LoRA adapter (adapter_model.safetensors) and
    the tokenizer, not a full copy of the weights."""
    out = tmp_path / "lora"
    rc = cli.main(["train", str(CONFIGS / "demo.yaml"), "--max-steps", "2", "--output-dir", str(out),
                   "--set", "model.lora={r: 4}", "--set", "task.n_eval=10",
                   "--set", "trainer.prompts_per_step=2"])
    assert rc == 0
    files = {p.name for p in (out / "model").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json"} <= files
    assert "model.safetensors" not in files


def test_default_config_scores_with_the_policy_itself(tmp_path, monkeypatch):
    """configs/default.yaml runs the unsupervised inverse loss: make_reward gets the
    policy being trained as the scorer, and the logged reward is a mean log-prob (<= 0)."""
    from sdpo_kit import rewards

    seen = {}
    real = rewards.make_reward

    def spy(config, model=None, tokenizer=None, task=None):
        seen["funcs"] = real(config, model=model, tokenizer=tokenizer, task=task)
        return seen["funcs"]

    monkeypatch.setattr(rewards, "make_reward", spy)
    cfg = load_config(CONFIGS / "default.yaml", {"trainer.max_steps": 2, "trainer.prompts_per_step": 2,
                                                  "task.n_eval": 10, "output_dir": str(tmp_path)})
    summary = train(cfg)
    assert seen["funcs"][0].scorer_model is summary["model"]
    steps = [r for r in summary["history"] if r["step"] > 0]
    assert len(steps) == 2 and all(r["reward/inverse_loss"] <= 0.0 for r in steps)


def test_a_second_run_into_the_same_output_dir_replaces_the_model_folder(tmp_path):
    """A run that trains LoRA, then one that trains in full, into the same output_dir: model/ holds the
    full model only (a stale adapter beside it would be loaded back instead of the model)."""
    base = {"task": {"name": "arithmetic", "n_eval": 10}, "output_dir": str(tmp_path),
            "trainer": {"max_steps": 1, "prompts_per_step": 2, "num_generations": 2, "max_completion_length": 4,
                        "eval_every": 0}}
    train(config_from_dict({**base, "model": {"name": "tiny-lab", "lora": 4}}))
    assert (tmp_path / "model" / "adapter_config.json").exists()
    train(config_from_dict({**base, "model": {"name": "tiny-lab"}}))
    names = {p.name for p in (tmp_path / "model").iterdir()}
    assert "adapter_config.json" not in names and "model.safetensors" in names, names


def test_omp_num_threads_caps_the_configs_threads(monkeypatch):
    """Two processes sharing 2 cores with OMP_NUM_THREADS=1 must not each take the config's 2 threads."""
    import torch

    from sdpo_kit.training import set_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert set_threads(2, "smollm2-135m") == 1 and torch.get_num_threads() == 1
        assert set_threads(0, "smollm2-135m") == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "8")
        assert set_threads(2, "smollm2-135m") == 2
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert set_threads(2, "smollm2-135m") == 2 and set_threads(0, "tiny-lab") == 1
    finally:
        torch.set_num_threads(before)
