"""Export a trained run: LoRA adapter and merged model, round trips checked, bad input refused
with nothing half-written (sdpo_kit/deploy/export.py, ``sdpo-kit export``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdpo_kit import cli
from sdpo_kit.deploy.export import ExportError, export, round_trip

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PROMPTS = [[{"role": "user", "content": q}] for q in ("1+2+3=", "9+9+9=", "4+0+7=", "5+5+1=")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A full-model run and a LoRA run of configs/demo.yaml, 2 steps each."""
    root = tmp_path_factory.mktemp("runs")
    for name, extra in (("full", []), ("lora", ["--set", "model.lora=4"])):
        assert cli.main(["train", str(CONFIGS / "demo.yaml"), "--max-steps", "2", "--output-dir", str(root / name),
                         "--set", "trainer.eval_every=0", *extra]) == 0
    return root


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_merged_exports_load_back_with_the_same_greedy_answers(runs, tmp_path):
    for run in ("full", "lora"):
        out = export(runs / run, "merged", tmp_path / f"{run}-fp32", dtype="fp32")
        rt = round_trip(runs / run, out, PROMPTS)
        assert rt["dtype"] == "float32" and rt["max_logit_diff"] < 1e-4 and rt["greedy_equal"], (run, rt)
        half = round_trip(runs / run, export(runs / run, "merged", tmp_path / f"{run}-fp16", dtype="fp16"), PROMPTS)
        assert half["dtype"] == "float16" and half["max_logit_diff"] < 0.05 and half["greedy_equal"], (run, half)
    assert not leftovers(tmp_path)


def test_a_lora_export_is_the_adapter_and_a_full_run_has_none(runs, tmp_path):
    out = export(runs / "lora", "lora", tmp_path / "adapter")
    assert (out / "adapter_model.safetensors").exists() and (out / "adapter_config.json").exists()
    rt = round_trip(runs / "lora", out, PROMPTS)
    assert rt["max_logit_diff"] < 1e-5 and rt["greedy_equal"]
    with pytest.raises(ExportError, match="full model.*--format merged"):
        export(runs / "full", "lora", tmp_path / "nope")
    assert not (tmp_path / "nope").exists() and not leftovers(tmp_path)


def test_bad_input_is_refused_and_nothing_is_left_behind(runs, tmp_path):
    with pytest.raises(ExportError, match="no such run"):
        export(tmp_path / "missing", "merged")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ExportError, match="no trained model"):
        export(tmp_path / "empty", "merged")
    with pytest.raises(ExportError, match="unknown format"):
        export(runs / "full", "onnx")
    with pytest.raises(ExportError, match="unknown dtype"):
        export(runs / "full", "merged", dtype="int3")
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ExportError, match="CUDA"):
            export(runs / "full", "merged_4bit", tmp_path / "q4")
    out = export(runs / "full", "merged", tmp_path / "once", dtype="fp32")
    with pytest.raises(ExportError, match="exists"):
        export(runs / "full", "merged", out, dtype="fp32")
    assert export(runs / "full", "merged", out, dtype="bf16", overwrite=True) == out
    assert not leftovers(tmp_path)


def test_the_export_command(runs, tmp_path, capsys):
    assert cli.main(["export", str(runs / "full"), "--format", "merged", "--dtype", "fp32",
                     "--output-dir", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m" / "config.json").exists()
    assert cli.main(["export", str(runs / "full"), "--format", "lora"]) == 2
    assert "merged" in capsys.readouterr().err
