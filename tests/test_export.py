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


def copy_run(src: Path, dest: Path, **config_edits) -> Path:
    """A copy of run ``src`` whose config.yaml has the top-level keys in ``config_edits`` replaced."""
    import shutil

    import yaml

    shutil.copytree(src, dest)
    data = yaml.safe_load((dest / "config.yaml").read_text())
    data.update(config_edits)
    (dest / "config.yaml").write_text(yaml.safe_dump(data))
    return dest


def test_export_reads_only_the_keys_it_uses(runs, tmp_path):
    """A run whose task was registered in Python (unknown here) and whose trainer and reward sections
    this version cannot parse still exports: a full run loads from model/ itself. A tiny-lab LoRA run
    needs its task to rebuild the warm start, and the error says so."""
    odd = {"task": {"name": "registered_in_python", "level": 3}, "trainer": {"no_such_key": 1},
           "reward": [{"type": "registered_in_python"}]}
    full = copy_run(runs / "full", tmp_path / "full", **odd)
    rt = round_trip(full, export(full, "merged", tmp_path / "m", dtype="fp32"), PROMPTS)
    assert rt["max_logit_diff"] < 1e-4 and rt["greedy_equal"], rt
    lora = copy_run(runs / "lora", tmp_path / "lora", **odd)
    assert export(lora, "lora", tmp_path / "adapter").is_dir()   # a copy: no config needed
    with pytest.raises(ExportError, match="task 'registered_in_python' is not registered"):
        export(lora, "merged", tmp_path / "m2")
    assert not (tmp_path / "m2").exists() and not leftovers(tmp_path)


def bad_runs(runs, root: Path) -> dict:
    """Broken run folders, each with the words its error must contain."""
    import shutil

    cases = {}
    cases["missing"] = (root / "missing", "no such run directory")
    (root / "no-model").mkdir()
    shutil.copy(runs / "full" / "config.yaml", root / "no-model" / "config.yaml")
    cases["no-model"] = (root / "no-model", "holds no trained model")
    no_config = root / "no-config"
    shutil.copytree(runs / "full", no_config)
    (no_config / "config.yaml").unlink()
    cases["no-config"] = (no_config, "has no config.yaml")
    bad_yaml = copy_run(runs / "full", root / "bad-yaml")
    (bad_yaml / "config.yaml").write_text("model: [unclosed\n")
    cases["bad-yaml"] = (bad_yaml, "cannot be read as YAML")
    cases["no-model-section"] = (copy_run(runs / "full", root / "no-section", model=None), "no model section")
    cases["bad-name"] = (copy_run(runs / "full", root / "bad-name", model={"name": 3}), "model.name must be")
    cases["bad-trust"] = (copy_run(runs / "full", root / "bad-trust", model={"name": "tiny-lab",
                                                                           "trust_remote_code": "yes"}),
                          "trust_remote_code must be true or false")
    return cases


def test_bad_input_is_one_line_and_exit_status_2(runs, tmp_path, capsys):
    """Every bad input: ``sdpo-kit export`` prints one line naming the problem and returns 2 (no traceback)."""
    for name, (run, words) in bad_runs(runs, tmp_path).items():
        assert cli.main(["export", str(run), "--format", "merged", "--output-dir", str(tmp_path / "out")]) == 2, name
        err = capsys.readouterr().err.strip()
        assert err.startswith("sdpo-kit export: ") and words in err and "\n" not in err, (name, err)
    for args, words in ((["--format", "onnx"], "unknown format"), (["--dtype", "int3"], "unknown dtype"),
                        (["--format", "gguf", "--quant", "q2_k"], "quantisation")):
        assert cli.main(["export", str(runs / "full"), "--output-dir", str(tmp_path / "out"), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("sdpo-kit export: ") and words in err and "\n" not in err, (args, err)
    assert not (tmp_path / "out").exists()


def test_a_gpu_export_loads_in_the_dtype_it_writes(runs, tmp_path, monkeypatch):
    """On CUDA a model loads in the card's 16 bits by default; a merged fp32 export of a full run must not go
    through them (the first GPU run, on an H200, exported fp32 files that differed from the run by 4e-2)."""
    import torch

    import sdpo_kit.deploy.export as ex

    seen = []
    real = ex.load_run_model
    monkeypatch.setattr(ex, "load_run_model", lambda run_dir, dtype=None: seen.append(dtype) or real(run_dir, dtype))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for dtype in ("fp32", "fp16", "bf16"):
        export(runs / "full", "merged", tmp_path / dtype, dtype=dtype)
    assert seen == [torch.float32, torch.float16, torch.bfloat16]
