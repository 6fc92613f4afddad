"""GGUF export through llama.cpp's own converter (sdpo_kit/deploy/gguf.py): the file loads back with
transformers' GGUF loader with the same vocabulary id for id, the same greedy answers and logits
within a stated tolerance per quantisation. Needs the converter (fetched by `make test-export`, which
.ci/run runs); without it these tests skip and say so."""

from __future__ import annotations

import pytest
from test_export import PROMPTS, leftovers, runs  # noqa: F401  (runs: the module's trained runs, a fixture)

from sdpo_kit import cli
from sdpo_kit.deploy.export import ExportError, export
from sdpo_kit.deploy.gguf import (
    ConverterUnavailable,
    converter_dir,
    gguf_round_trip,
    gguf_vocabulary,
    missing_converter_packages,
)

try:
    converter_dir(fetch=False)
    HAVE_CONVERTER = True
except ConverterUnavailable:
    HAVE_CONVERTER = False
needs_converter = pytest.mark.skipif(not HAVE_CONVERTER, reason="llama.cpp's converter is not fetched: make test-export")
TOLERANCE = {"f32": 1e-5, "f16": 0.01, "q8_0": 0.1}   # max |logit difference| on the tiny lab


@needs_converter
@pytest.mark.parametrize("quant", ["f32", "f16", "q8_0"])
def test_gguf_round_trip(runs, tmp_path, quant):  # noqa: F811
    pytest.importorskip("gguf")
    for run in ("full", "lora"):
        out = export(runs / run, "gguf", tmp_path / f"{run}-{quant}", quant=quant)
        (file,) = out.glob("*.gguf")
        assert file.name == f"model-{quant}.gguf"
        rt = gguf_round_trip(runs / run, file, PROMPTS)
        assert rt["vocab_equal"] and rt["greedy_equal"] and rt["max_logit_diff"] < TOLERANCE[quant], (run, quant, rt)
    assert not leftovers(tmp_path)


@needs_converter
def test_the_tiny_vocabulary_is_written_character_for_character(runs, tmp_path):  # noqa: F811
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    out = export(runs / "full", "gguf", tmp_path / "g", quant="f32")
    vocab = gguf_vocabulary(next(out.glob("*.gguf")))
    tok = AutoTokenizer.from_pretrained(runs / "full" / "model")
    assert vocab[tok.convert_tokens_to_ids("+")] == "+" and vocab[tok.eos_token_id] == tok.eos_token
    assert " " not in vocab or vocab[tok.convert_tokens_to_ids(" ")] == " "


def test_no_converter_and_bad_quantisation_are_clear_errors(runs, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SDPO_KIT_LLAMA_CPP", str(tmp_path))
    with pytest.raises(ExportError, match="SDPO_KIT_LLAMA_CPP"):
        export(runs / "full", "gguf", tmp_path / "g")
    with pytest.raises(ExportError, match="quantisation"):
        export(runs / "full", "gguf", tmp_path / "g", quant="q2_k")
    assert not (tmp_path / "g").exists() and not leftovers(tmp_path)
    assert cli.main(["export", str(runs / "full"), "--format", "gguf", "--quant", "q4"]) == 2


def byte_level_bpe(folder, byte_fallback=False):
    """A two-merge byte-level BPE tokenizer.json in ``folder`` (the kind SmolLM2 and Qwen2 have)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2}, merges=[("a", "b")], byte_fallback=byte_fallback))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_what_the_converter_needs_is_named_from_the_tokenizer(runs, tmp_path, monkeypatch):  # noqa: F811
    """sentencepiece (CONVERTER_PACKAGES) is needed for every model but the tiny lab's vocabulary:
    missing_converter_packages names a missing one from the tokenizer alone (export asks it before a
    model loads; tests/real/test_real_export.py checks the message on the real model)."""
    from sdpo_kit.deploy import gguf

    assert missing_converter_packages(runs / "full" / "model") == []
    bpe = byte_level_bpe(tmp_path / "bpe")
    monkeypatch.setattr(gguf, "CONVERTER_PACKAGES", ("json", "no_such_package_here"))
    assert missing_converter_packages(bpe) == ["no_such_package_here"]
    assert missing_converter_packages(runs / "full" / "model") == []
