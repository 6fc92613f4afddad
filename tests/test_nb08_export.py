"""The plumbing notebook 08 (scale out and export) relies on, on the tiny lab with the notebook's own smoke
profile: every profile holds the settings the notebook reads; a LoRA run's ``model/`` is the adapter, its
tensors named as the notebook's merge by hand reads them and matching the merged export's names; a run that
trained every weight has no adapter to export; the verl exports of the notebook's GRPO and PPO runs hold the
files, columns, script lines and keys the notebook prints. The math the notebook checks (the merge, the
precisions, q8_0's bound, the reward verl calls) stays in the notebook; the exports themselves are tested in
``test_export.py``, ``test_export_gguf.py`` and ``test_verl_export.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from safetensors.torch import load_file

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB, pick_profile
from sdpo_kit.course.profiles.nb08 import PROFILES
from sdpo_kit.deploy.export import ExportError, export
from sdpo_kit.deploy.verl import COLUMNS, export_verl, verl_available
from sdpo_kit.registry import config_from_dict
from sdpo_kit.training import train

NOTEBOOK_KEYS = {"lora", "task", "lr", "steps", "prompts", "group", "max_new_tokens", "lora_steps", "n_check",
                 "gguf_quants", "num_threads", "ppo_teacher", "fp16_max_logit_diff"}


def demo(P: dict, out: Path, steps: int = 2, lora=None) -> dict:
    """The notebook's ``DEMO`` dict (section 1), ``steps`` long."""
    return {"algorithm": "grpo", "backend": "scratch", "model": {"name": TINY_LAB, "lora": lora},
            "task": {**P["task"], "n_eval": 16}, "reward": [{"type": "exact_match"}],
            "trainer": {"max_steps": steps, "prompts_per_step": P["prompts"], "num_generations": P["group"],
                        "num_iterations": 2, "learning_rate": P["lr"], "lr_scheduler_type": "linear",
                        "temperature": 0.7, "max_completion_length": P["max_new_tokens"], "eval_every": 0, "seed": 0},
            "output_dir": str(out), "threads": 1}


@pytest.fixture(scope="module")
def P():
    return pick_profile(PROFILES, TINY_LAB, smoke=True, cuda=False, verbose=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, P):
    """The notebook's two runs, 2 steps each: every weight trained (``full``) and a rank-4 adapter (``lora``)."""
    root = tmp_path_factory.mktemp("nb08")
    train(config_from_dict(demo(P, root / "full")))
    train(config_from_dict(demo(P, root / "lora", lora=4)))
    return root


def test_every_profile_holds_the_settings_the_notebook_reads():
    """Each of the three profiles (and its smoke sizes, applied) has every key the notebook reads, and the smoke
    sizes only replace keys the profile has; the LoRA run is never longer than the main run."""
    assert {TINY_LAB, REAL_CPU_MODEL, T4_MODEL} <= set(PROFILES)
    for key, profile in PROFILES.items():
        assert NOTEBOOK_KEYS <= set(profile), (key, NOTEBOOK_KEYS - set(profile))
        assert set(profile.get("smoke", {})) <= NOTEBOOK_KEYS, key
        for smoke in (False, True):
            chosen = pick_profile(PROFILES, key, smoke=smoke, cuda=key == T4_MODEL, verbose=False)
            assert chosen["lora_steps"] <= chosen["steps"], (key, smoke)   # the adapter run is the short one
            assert set(chosen["gguf_quants"]) <= {"f32", "f16", "q8_0"}


def test_a_lora_runs_model_folder_is_the_adapter_named_as_the_merge_by_hand_reads_it(runs, tmp_path):
    """The LoRA run's ``model/`` holds ``adapter_model.safetensors`` (an A and a B per adapted layer, named
    ``base_model.model.<layer>.lora_A/B.weight``) and ``adapter_config.json`` (r, lora_alpha, target_modules);
    the merged export is one ``model.safetensors`` with ``<layer>.weight`` for every such layer; the adapter
    export is under a quarter of the merged one's size."""
    folder = runs / "lora" / "model"
    sd = load_file(folder / "adapter_model.safetensors")
    conf = json.loads((folder / "adapter_config.json").read_text())
    assert conf["r"] == 4 and conf["lora_alpha"] > 0 and conf["target_modules"]
    layers = [k.removeprefix("base_model.model.").removesuffix(".lora_A.weight") for k in sd if k.endswith("lora_A.weight")]
    assert layers and len(sd) == 2 * len(layers)
    for k in (k for k in sd if k.endswith("lora_A.weight")):
        A, B = sd[k], sd[k.replace("lora_A", "lora_B")]
        assert A.shape[0] == B.shape[1] == conf["r"]
    merged = export(runs / "lora", "merged", tmp_path / "merged", dtype="fp32")
    assert [p.name for p in merged.glob("*.safetensors")] == ["model.safetensors"]
    weights = load_file(merged / "model.safetensors")
    for layer in layers:
        A = sd[f"base_model.model.{layer}.lora_A.weight"]
        B = sd[f"base_model.model.{layer}.lora_B.weight"]
        assert weights[f"{layer}.weight"].shape == (B.shape[0], A.shape[1]), layer
    adapter = export(runs / "lora", "lora", tmp_path / "adapter")
    size = lambda d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file())   # noqa: E731
    assert {"adapter_model.safetensors", "adapter_config.json"} <= {p.name for p in adapter.iterdir()}
    assert size(adapter) < size(merged) / 4


def test_a_run_that_trained_every_weight_has_no_adapter_to_export(runs, tmp_path):
    """``export(full_run, "lora")`` is refused, pointing to the merged format, and writes nothing."""
    with pytest.raises(ExportError, match="merged"):
        export(runs / "full", "lora", tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_the_verl_export_of_the_notebooks_grpo_run(runs, tmp_path, P):
    """The GRPO export writes the files section 7 lists; the parquet has verl's columns with the prompt as chat
    messages and the answer as ground truth; ``run_verl.sh`` runs verl's ``main_ppo`` with G answers per prompt
    and GRPO's advantages; the linear schedule is the one setting named as not carried over; without verl
    importable, the export says it is unchecked."""
    cfg = config_from_dict(demo(P, runs / "full"))
    v = export_verl(cfg, tmp_path / "verl-grpo", config_name="DEMO")
    assert set(v["files"]) == {"model", "reward.py", "run_verl.sh", "train.parquet", "val.parquet", "verl_settings.json"}
    assert v["checked_with_verl"] == verl_available()
    row = pd.read_parquet(tmp_path / "verl-grpo" / "train.parquet").iloc[0]
    assert tuple(row.index) == COLUMNS
    assert row["prompt"].tolist()[0]["role"] == "user" and row["reward_model"]["ground_truth"]
    script = (tmp_path / "verl-grpo" / "run_verl.sh").read_text()
    assert "python -m verl.trainer.main_ppo" in script
    assert f"actor_rollout_ref.rollout.n={P['group']}" in script and "algorithm.adv_estimator=grpo" in script
    assert len(v["unmapped"]) == 1 and "linear" in v["unmapped"][0]


def test_the_verl_export_of_notebook_07s_ppo_run_holds_the_keys_the_notebook_prints(tmp_path, P):
    """The PPO export (section 8) maps GAE, the critic, the adaptive KL control and the teacher's distillation
    to the keys the notebook prints, and lists what it cannot express as sentences naming our setting."""
    cfg = config_from_dict({
        "algorithm": "ppo", "model": {"name": TINY_LAB}, "task": {**P["task"], "n_eval": 16},
        "reward": [{"type": "exact_match"}],
        "trainer": {"max_steps": 60, "batch_size": 64, "mini_batch_size": 16, "learning_rate": P["lr"],
                    "kd_coef": 0.5, "max_completion_length": P["max_new_tokens"], **P["ppo_teacher"]},
        "output_dir": str(tmp_path / "ppo")})
    pv = export_verl(cfg, tmp_path / "verl-ppo", config_name="notebook 07's PPO")
    values = pv["values"]
    assert values["algorithm.adv_estimator"] == "gae" and values["critic.enable"] is True
    assert values["algorithm.kl_ctrl.type"] == "adaptive" and values["distillation.enabled"] is True
    assert values["distillation.distillation_loss.loss_mode"] == "forward_kl_topk" and "algorithm.lam" in values
    assert pv["unmapped"] and all(isinstance(u, str) and u.startswith("trainer.") for u in pv["unmapped"])
    assert (tmp_path / "verl-ppo" / "teacher").is_dir()
