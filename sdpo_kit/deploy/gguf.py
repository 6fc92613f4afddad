"""GGUF export through llama.cpp's own converter, and its round trip.

The converter (``convert_hf_to_gguf.py``, its ``conversion`` package and the vendored ``gguf-py``)
ships inside the llama-cpp-python source distribution on PyPI. ``converter_dir()`` uses
``$SDPO_KIT_LLAMA_CPP`` when set (a llama.cpp checkout), else downloads that sdist once with pip
(``LLAMA_CPP_PYTHON``, no build) and keeps only those files under the cache
(``core.cache.cache_dir()/llama.cpp-<version>``). The conversion runs in a subprocess
(``gguf_convert.py``; it also maps the tiny lab's character vocabulary explicitly).

What the converter imports: torch, numpy, transformers, pyyaml and tqdm (sdpo_kit's own
dependencies), and ``sentencepiece`` (``CONVERTER_PACKAGES``): the Llama and Qwen2 converters'
``set_vocab`` try a sentencepiece vocabulary first and import the package before they look for
``tokenizer.model``, so a model with a byte-level BPE ``tokenizer.json`` (SmolLM2, Qwen2) needs it
too; the tiny lab's vocabulary does not. ``missing_converter_packages`` says what is missing before
a model is loaded.

``gguf_round_trip`` loads the file back with transformers' GGUF loader (needs the ``gguf``
package) and checks it against the run's model: the vocabulary id for id, the tokenizer metadata
(``tokenizer.ggml.model`` and ``.pre`` as in the GGUF the run's base came from, bos / eos / pad as the
run's tokenizer), next-token logits, and greedy answers generated and decoded through the GGUF's
own tokenizer (``gguf_tokenizer``). On Colab, Unsloth's ``save_pretrained_gguf`` is the other route
(not used here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

LLAMA_CPP_PYTHON = "0.3.36"
QUANTS = ("f32", "f16", "q8_0")
CONVERTER_FILES = ("convert_hf_to_gguf.py", "conversion", "gguf-py")
# imported by the converter for every model but the tiny lab, and not a dependency of sdpo_kit (see the docstring)
CONVERTER_PACKAGES = ("sentencepiece",)
TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                  "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id")


class ConverterUnavailable(RuntimeError):
    """llama.cpp's converter could not be found or fetched."""


def _has_converter(root: Path) -> bool:
    return all((root / name).exists() for name in CONVERTER_FILES)


def converter_dir(fetch: bool = True) -> Path:
    """The folder holding llama.cpp's converter (see the module docstring)."""
    from sdpo_kit.core.cache import cache_dir

    env = os.environ.get("SDPO_KIT_LLAMA_CPP")
    if env:
        if not _has_converter(Path(env)):
            raise ConverterUnavailable(f"$SDPO_KIT_LLAMA_CPP={env} holds no {', '.join(CONVERTER_FILES)}")
        return Path(env)
    root = cache_dir() / f"llama.cpp-{LLAMA_CPP_PYTHON}"
    if _has_converter(root):
        return root
    if not fetch:
        raise ConverterUnavailable(f"no llama.cpp converter at {root} (run `make test-export` or set $SDPO_KIT_LLAMA_CPP)")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
               f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        sdists = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        if proc.returncode or not sdists:
            raise ConverterUnavailable(f"could not download llama-cpp-python=={LLAMA_CPP_PYTHON} for its GGUF converter "
                                       f"({proc.stderr.strip()[-300:]}); set $SDPO_KIT_LLAMA_CPP to a llama.cpp checkout")
        prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
        staging = Path(tmp) / "llama.cpp"
        with tarfile.open(sdists[0]) as tar:
            for member in tar.getmembers():
                rel = member.name[len(prefix):] if member.name.startswith(prefix) else None
                if rel and rel.split("/")[0] in CONVERTER_FILES and (member.isfile() or member.isdir()):
                    member.name = rel
                    tar.extract(member, staging, filter="data")
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.replace(root)
        except OSError:  # another process won the race
            shutil.rmtree(staging, ignore_errors=True)
    return root


def missing_converter_packages(model_dir) -> list[str]:
    """The packages of ``CONVERTER_PACKAGES`` the converter will import for the model whose tokenizer
    is in ``model_dir`` and cannot: none for the tiny lab's vocabulary (written by ``gguf_convert``)."""
    import importlib.util

    from sdpo_kit.deploy.gguf_convert import is_char_vocab

    if is_char_vocab(Path(model_dir)):
        return []
    return [p for p in CONVERTER_PACKAGES if importlib.util.find_spec(p) is None]


def convert(model_dir, out_file, quant: str = "f16") -> Path:
    """Convert a merged HF model folder to one GGUF file with llama.cpp's converter."""
    from sdpo_kit.deploy.gguf_convert import MISSING_MODULE

    if quant not in QUANTS:
        raise ValueError(f"unknown GGUF quantisation {quant!r}; one of {QUANTS}")
    script = Path(__file__).with_name("gguf_convert.py")
    proc = subprocess.run([sys.executable, str(script), str(converter_dir()), str(model_dir), str(out_file), quant],
                          capture_output=True, text=True)
    if proc.returncode == MISSING_MODULE:
        raise ConverterUnavailable(proc.stderr.strip().splitlines()[-1])
    if proc.returncode or not Path(out_file).exists():
        raise RuntimeError(f"llama.cpp's converter failed on {model_dir}:\n{proc.stderr.strip()[-2000:]}")
    return Path(out_file)


def gguf_vocabulary(path, *, raw: bool = False, contents: tuple[dict, dict] | None = None) -> list[str]:
    """The GGUF file's token list, decoded back from GPT-2's byte-to-unicode form where it uses it
    (``raw``: as stored, the form a byte-level BPE's own vocabulary has). ``contents``: the file's
    ``lab.real_model.gguf_contents``, read here when not given."""
    from sdpo_kit.deploy.gguf_convert import bytes_to_unicode
    from sdpo_kit.lab.real_model import gguf_contents

    meta, lists = gguf_contents(path) if contents is None else contents
    tokens = list(lists["tokens"])
    decode = {c: b for b, c in bytes_to_unicode().items()}
    model = meta.get("tokenizer.ggml.model")
    if raw or model != "gpt2":
        return tokens
    out = []
    for t in tokens:
        try:
            out.append(bytes(decode[c] for c in t).decode("utf-8"))
        except (KeyError, UnicodeDecodeError):
            out.append(t)  # a special token, stored as is
    return out


def tokenizer_model_kind(spec: dict) -> str | None:
    """The ``tokenizer.ggml.model`` a ``tokenizer.json`` (as a dict) stands for: ``gpt2`` for a byte-level
    BPE or the tiny lab's characters, ``llama`` for a BPE with byte fallback or a Unigram model
    (sentencepiece's kinds); None for anything else."""
    import json

    from sdpo_kit.deploy.gguf_convert import is_char_spec

    model = spec.get("model") or {}
    if is_char_spec(spec):
        return "gpt2"
    if model.get("type") == "Unigram" or (model.get("type") == "BPE" and model.get("byte_fallback")):
        return "llama"
    if model.get("type") == "BPE" and '"ByteLevel"' in json.dumps(spec.get("pre_tokenizer")):
        return "gpt2"
    return None


def expected_tokenizer_metadata(run_dir, tok) -> dict:
    """What the GGUF of this run should say in ``TOKENIZER_KEYS`` (None: nothing to compare with).

    ``model`` and ``pre``: as in the GGUF file the run's base was converted from (``lab.real_model``
    records them in the folder's ``sdpo_kit_source.json``), else the kind of the run's tokenizer
    (``tokenizer_model_kind``) and no ``pre`` (llama.cpp names it from a hash of the tokenizer's
    output, which only the original model could confirm). bos, eos and pad: the run tokenizer's ids."""
    import json

    from sdpo_kit.deploy.run_model import run_source
    from sdpo_kit.models import local_name

    model, _ = run_source(run_dir)
    source = Path(local_name(model.name)) / "sdpo_kit_source.json" if model.name != "tiny-lab" else None
    spec = json.loads(tok.backend_tokenizer.to_str()) if hasattr(tok, "backend_tokenizer") else {}
    if source is not None and source.exists():
        meta = json.loads(source.read_text())
        kind, pre = meta.get("tokenizer.ggml.model"), meta.get("tokenizer.ggml.pre")
    else:
        kind, pre = tokenizer_model_kind(spec), None
    ids = [getattr(tok, f"{n}_token_id", None) for n in ("bos", "eos", "pad")]
    return dict(zip(TOKENIZER_KEYS, [kind, pre, *ids]))


def compare_tokenizer_metadata(meta: dict, expected: dict) -> dict:
    """``{key: {"file": ..., "expected": ...}}`` for ``TOKENIZER_KEYS``, ``tokenizer_equal`` (every key
    with an expectation agrees) and ``tokenizer_mismatch`` (the keys that do not)."""
    table = {k: {"file": meta.get(k), "expected": expected.get(k)} for k in TOKENIZER_KEYS}
    bad = [k for k, v in table.items() if v["expected"] is not None and v["file"] != v["expected"]]
    return {"tokenizer_metadata": table, "tokenizer_equal": not bad, "tokenizer_mismatch": bad}


def gguf_tokenizer(gguf_file, meta: dict | None = None, lists: dict | None = None):
    """``(tokenizer, reader, notes)``: the GGUF's own tokenizer, read by transformers
    (``AutoTokenizer.from_pretrained(dir, gguf_file=...)``, ``reader="transformers"``) or, where
    transformers cannot read it (the tiny lab's vocabulary has no merges), rebuilt from the file's
    tokens, merges and pre-tokenizer (``lab.real_model.bpe_tokenizer_from_gguf``, ``"rebuilt"``).

    bos, eos and pad are then set to the tokens the file's ``tokenizer.ggml.*_token_id`` name (what
    llama.cpp uses); each one the reader had otherwise is a line of ``notes``. Measured on SmolLM2:
    transformers' reader gives eos ``<|im_start|>`` (id 1) and no pad where the file says 2 and 2."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from sdpo_kit.lab.real_model import bpe_tokenizer_from_gguf, gguf_contents
    from sdpo_kit.models import finish_tokenizer

    gguf_file = Path(gguf_file)
    if meta is None or lists is None:   # ``gguf_contents``: one read of the file for both
        meta, lists = gguf_contents(gguf_file)
    notes = []
    try:
        tok, reader = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name), "transformers"
    except (ValueError, KeyError) as e:
        rebuilt = bpe_tokenizer_from_gguf(gguf_file, meta, lists)
        if rebuilt is None:
            raise
        tok, reader = PreTrainedTokenizerFast(tokenizer_object=rebuilt, clean_up_tokenization_spaces=False), "rebuilt"
        tok.chat_template = meta.get("tokenizer.chat_template")
        notes.append(f"transformers cannot read this file's tokenizer ({str(e).splitlines()[0]}): rebuilt from its "
                     f"tokens, merges and pre-tokenizer {meta.get('tokenizer.ggml.pre')!r}")
    tokens = gguf_vocabulary(gguf_file, contents=(meta, lists))
    for name, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("pad", "padding_token_id")):
        i = meta.get(f"tokenizer.ggml.{key}")
        want = tokens[int(i)] if i is not None else None
        have = getattr(tok, f"{name}_token")
        if want is not None and have != want:
            if reader == "transformers":   # the rebuilt tokenizer starts with none: nothing to report
                notes.append(f"transformers reader: {name} {have!r} (id {getattr(tok, f'{name}_token_id')}), the file "
                             f"says {want!r} (id {int(i)}): set from the file")
            setattr(tok, f"{name}_token", want)
    return finish_tokenizer(tok), reader, notes


@torch.no_grad()
def gguf_round_trip(run_dir, gguf_file, prompts, *, max_new_tokens: int = 8) -> dict:
    """The GGUF file against the run's model (fp32).

    Returns ``vocab_equal`` (id for id), ``bytes``, the tokenizer metadata against
    ``expected_tokenizer_metadata`` (``compare_tokenizer_metadata``: ``tokenizer_equal``, ...),
    ``max_logit_diff`` (next-token logits on ``prompts`` encoded by the run's tokenizer, fed to both),
    and the greedy answers of the GGUF's model with its own tokenizer (``gguf_tokenizer``: the
    prompts rendered with the file's chat template, encoded, the answers decoded by it) against the
    run's: ``prompt_ids_equal``, ``greedy_ids_equal`` (completion ids up to eos), ``greedy_agree`` and
    ``greedy_equal`` (the texts). ``tokenizer_reader`` and ``notes`` say how the tokenizer was read and
    each difference measured in that reading (a loader's quirk is named, never hidden)."""
    import importlib.util

    from transformers import AutoModelForCausalLM

    from sdpo_kit.core.sampling import encode_prompts, sample
    from sdpo_kit.core.unsloth_patches import fit_to_unsloth
    from sdpo_kit.deploy.run_model import comparison_device, load_run_model
    from sdpo_kit.lab.real_model import gguf_contents

    if importlib.util.find_spec("gguf") is None:
        raise RuntimeError("loading a GGUF file back needs the gguf package: pip install gguf")
    ref, tok = load_run_model(run_dir, dtype=torch.float32)
    gguf_file = Path(gguf_file)
    meta, lists = gguf_contents(gguf_file)   # the one read of ours; transformers reads it for itself
    got = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name,
                                               dtype=torch.float32).eval()   # dequantised to fp32
    device = comparison_device()
    ref, got = ref.to(device), fit_to_unsloth(got.to(device))   # Unsloth's patched Llama, if loaded
    gtok, reader, notes = gguf_tokenizer(gguf_file, meta, lists)
    raw = gguf_vocabulary(gguf_file, raw=True, contents=(meta, lists))
    ours = {i: t for t, i in tok.get_vocab().items()}
    ours = [ours.get(i) for i in range(len(raw))]
    # a byte-level BPE's tokens are stored as they are; the tiny lab's characters through GPT-2's byte map
    vocab_equal = ours == raw or ours == gguf_vocabulary(gguf_file, contents=(meta, lists))
    out = {"vocab_equal": vocab_equal, "bytes": gguf_file.stat().st_size,
           **compare_tokenizer_metadata(meta, expected_tokenizer_metadata(run_dir, tok)), "tokenizer_reader": reader}

    enc = encode_prompts(tok, prompts, device)
    out["max_logit_diff"] = (ref(**enc).logits[:, -1] - got(**enc).logits[:, -1]).abs().max().item()
    same_prompt = [encode_prompts(tok, [p])["input_ids"].tolist() == encode_prompts(gtok, [p])["input_ids"].tolist()
                   for p in prompts]
    a = sample(ref, tok, prompts, max_new_tokens=max_new_tokens, do_sample=False)
    b = sample(got, gtok, prompts, max_new_tokens=max_new_tokens, do_sample=False)
    same_ids = [ia[ma.bool()].tolist() == ib[mb.bool()].tolist()
                for ia, ma, ib, mb in zip(a.completion_ids, a.completion_mask, b.completion_ids, b.completion_mask)]
    same_text = [x == y for x, y in zip(a.texts, b.texts)]
    if not all(same_prompt):
        pre = meta.get("tokenizer.ggml.pre")
        why = (f" (transformers' GGUF reader does not apply tokenizer.ggml.pre={pre!r}, which llama.cpp does)"
               if reader == "transformers" and pre not in (None, "default", "gpt2") else "")
        notes.append(f"{reader} reader: {len(prompts) - sum(same_prompt)} of {len(prompts)} prompts encode to other "
                     f"ids than with the run's tokenizer{why}")
    for x, y, ids_equal in zip(a.texts, b.texts, same_ids):
        if ids_equal and x != y:
            notes.append(f"{reader} reader decodes the run's answer ids to {y!r}, the run's tokenizer to {x!r}")
    agree = sum(same_text) / len(prompts)
    return {**out, "prompt_ids_equal": all(same_prompt), "greedy_ids_equal": all(same_ids), "greedy_agree": agree,
            "greedy_equal": agree == 1.0, "notes": notes}
