"""GGUF export through llama.cpp's own converter, and its round trip.

The converter (``convert_hf_to_gguf.py``, its ``conversion`` package and the vendored ``gguf-py``)
ships inside the llama-cpp-python source distribution on PyPI. ``converter_dir()`` uses
``$SDPO_KIT_LLAMA_CPP`` when set (a llama.cpp checkout), else downloads that sdist once with pip
(``LLAMA_CPP_PYTHON``, no build) and keeps only those files under the cache
(``lab.cache_dir()/llama.cpp-<version>``). The conversion runs in a subprocess
(``gguf_convert.py``; it also maps the tiny lab's character vocabulary explicitly).

What the converter imports: torch, numpy, transformers, pyyaml and tqdm (sdpo_kit's own
dependencies), and ``sentencepiece`` (``CONVERTER_PACKAGES``): the Llama and Qwen2 converters'
``set_vocab`` try a sentencepiece vocabulary first and import the package before they look for
``tokenizer.model``, so a model with a byte-level BPE ``tokenizer.json`` (SmolLM2, Qwen2) needs it
too; the tiny lab's vocabulary does not. ``missing_converter_packages`` says what is missing before
a model is loaded.

``gguf_round_trip`` loads the file back with transformers' GGUF loader (needs the ``gguf``
package) and checks it against the run's model: the vocabulary id for id, next-token logits and
greedy answers. On Colab, Unsloth's ``save_pretrained_gguf`` is the other route (not used here).
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


class ConverterUnavailable(RuntimeError):
    """llama.cpp's converter could not be found or fetched."""


def _has_converter(root: Path) -> bool:
    return all((root / name).exists() for name in CONVERTER_FILES)


def converter_dir(fetch: bool = True) -> Path:
    """The folder holding llama.cpp's converter (see the module docstring)."""
    from sdpo_kit.lab.model import cache_dir

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


def gguf_vocabulary(path) -> list[str]:
    """The GGUF file's token list, decoded back from GPT-2's byte-to-unicode form where it uses it."""
    from gguf import GGUFReader

    from sdpo_kit.deploy.gguf_convert import bytes_to_unicode

    reader = GGUFReader(str(path))
    field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    decode = {c: b for b, c in bytes_to_unicode().items()}
    model = bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode()
    if model != "gpt2":
        return tokens
    out = []
    for t in tokens:
        try:
            out.append(bytes(decode[c] for c in t).decode("utf-8"))
        except (KeyError, UnicodeDecodeError):
            out.append(t)  # a special token, stored as is
    return out


@torch.no_grad()
def gguf_round_trip(run_dir, gguf_file, prompts, *, max_new_tokens: int = 8) -> dict:
    """The GGUF file against the run's model (fp32): vocabulary equal id for id, the largest
    next-token logit difference on ``prompts``, and whether greedy answers agree."""
    import importlib.util

    from transformers import AutoModelForCausalLM

    from sdpo_kit.deploy.run_model import compare_models, load_run_model

    if importlib.util.find_spec("gguf") is None:
        raise RuntimeError("loading a GGUF file back needs the gguf package: pip install gguf")
    ref, tok = load_run_model(run_dir, dtype=torch.float32)
    gguf_file = Path(gguf_file)
    got = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name,
                                               dtype=torch.float32).eval()   # dequantised to fp32
    vocab = gguf_vocabulary(gguf_file)
    ours = {i: t for t, i in tok.get_vocab().items()}
    return {"vocab_equal": [ours.get(i) for i in range(len(vocab))] == vocab, "bytes": gguf_file.stat().st_size,
            **compare_models(ref, got, tok, prompts, max_new_tokens)}
