"""GGUF export through llama.cpp's own converter (sdpo_kit/deploy/gguf.py): the file loads back with
transformers' GGUF loader with the same vocabulary id for id, the tokenizer metadata the run's
tokenizer stands for (a wrong one is caught), the same greedy answers through the file's own
tokenizer and logits within a stated tolerance per quantisation. Needs the converter (fetched by
`make test-export`, which .ci/run runs); without it these tests skip and say so. The real model's
GGUF export (sentencepiece, gpt2 / smollm) is tests/real/test_real_export.py's."""

from __future__ import annotations

import pytest
from test_export import PROMPTS, leftovers, runs  # noqa: F401  (runs: the module's trained runs, a fixture)

from sdpo_kit import cli
from sdpo_kit.deploy.export import ExportError, export
from sdpo_kit.deploy.gguf import (
    ConverterUnavailable,
    compare_tokenizer_metadata,
    converter_dir,
    gguf_round_trip,
    gguf_vocabulary,
    missing_converter_packages,
    tokenizer_model_kind,
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
        # transformers cannot read a vocabulary without merges: the file's own tokens are read instead
        assert rt["tokenizer_equal"] and rt["tokenizer_reader"] == "rebuilt" and rt["prompt_ids_equal"], rt
        assert rt["tokenizer_metadata"]["tokenizer.ggml.model"]["file"] == "gpt2"
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


@needs_converter
def test_the_round_trip_reads_the_file_once_for_its_own_checks(runs, tmp_path, monkeypatch):  # noqa: F811
    """``gguf_contents``: the metadata and the token lists as gguf's reader holds them, from one read; the round
    trip reads the file once for its own checks (each read parses every field: seconds for a real vocabulary)."""
    pytest.importorskip("gguf")
    from gguf import GGUFReader

    import sdpo_kit.lab.real_model as real_model

    file = next(export(runs / "full", "gguf", tmp_path / "g", quant="f32").glob("*.gguf"))
    meta, lists = real_model.gguf_contents(file)
    fields = GGUFReader(str(file)).fields
    assert meta == {k: f.contents() for k, f in fields.items() if k not in real_model.LISTS} == \
        real_model.gguf_metadata(file)
    assert lists["tokens"] == fields["tokenizer.ggml.tokens"].contents() and "tokenizer.ggml.tokens" not in meta
    reads, read = [], real_model.gguf_contents
    monkeypatch.setattr(real_model, "gguf_contents", lambda *a, **k: reads.append(a) or read(*a, **k))
    assert gguf_round_trip(runs / "full", file, PROMPTS)["vocab_equal"] and len(reads) == 1


def test_no_converter_and_bad_quantisation_are_clear_errors(runs, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SDPO_KIT_LLAMA_CPP", str(tmp_path))
    with pytest.raises(ExportError, match="SDPO_KIT_LLAMA_CPP"):
        export(runs / "full", "gguf", tmp_path / "g")
    with pytest.raises(ExportError, match="quantisation"):
        export(runs / "full", "gguf", tmp_path / "g", quant="q2_k")
    assert not (tmp_path / "g").exists() and not leftovers(tmp_path)
    assert cli.main(["export", str(runs / "full"), "--format", "gguf", "--quant", "q4"]) == 2


@needs_converter
def test_a_wrong_tokenizer_in_the_file_is_caught(runs, tmp_path):  # noqa: F811
    """The round trip reads the file's tokenizer metadata back: an eos id changed in the file (in place,
    as gguf's gguf_set_metadata does) is reported, by name, and the round trip does not pass."""
    pytest.importorskip("gguf")
    from gguf import GGUFReader

    file = next(export(runs / "full", "gguf", tmp_path / "g", quant="f32").glob("*.gguf"))
    assert gguf_round_trip(runs / "full", file, PROMPTS)["tokenizer_equal"]
    field = GGUFReader(str(file), "r+").fields["tokenizer.ggml.eos_token_id"]
    field.parts[field.data[0]][0] = 1   # the tiny lab's unk
    rt = gguf_round_trip(runs / "full", file, PROMPTS)
    assert not rt["tokenizer_equal"] and rt["tokenizer_mismatch"] == ["tokenizer.ggml.eos_token_id"], rt
    assert rt["tokenizer_metadata"]["tokenizer.ggml.eos_token_id"] == {"file": 1, "expected": 3}


def test_tokenizer_metadata_is_compared_key_by_key():
    """Each key with an expectation must agree; None expects nothing (a pre-tokenizer with no source GGUF)."""
    meta = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default", "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.padding_token_id": 2}
    want = {**meta, "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": None}
    got = compare_tokenizer_metadata(meta, want)
    assert not got["tokenizer_equal"] and got["tokenizer_mismatch"] == ["tokenizer.ggml.model"]
    assert compare_tokenizer_metadata({**meta, "tokenizer.ggml.model": "gpt2"}, want)["tokenizer_equal"]
    assert not compare_tokenizer_metadata({**meta, "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.eos_token_id": 1},
                                          want)["tokenizer_equal"]


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
    import json

    from sdpo_kit.deploy import gguf

    assert missing_converter_packages(runs / "full" / "model") == []
    bpe = byte_level_bpe(tmp_path / "bpe")
    monkeypatch.setattr(gguf, "CONVERTER_PACKAGES", ("json", "no_such_package_here"))
    assert missing_converter_packages(bpe) == ["no_such_package_here"]
    assert missing_converter_packages(runs / "full" / "model") == []
    assert tokenizer_model_kind(json.loads((bpe / "tokenizer.json").read_text())) == "gpt2"
    spm_like = byte_level_bpe(tmp_path / "spm", byte_fallback=True)
    assert tokenizer_model_kind(json.loads((spm_like / "tokenizer.json").read_text())) == "llama"
