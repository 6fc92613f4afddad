"""Run llama.cpp's own HF -> GGUF converter on one model folder (a subprocess of ``deploy.gguf``).

    python gguf_convert.py CONVERTER_DIR MODEL_DIR OUT_FILE f32|f16|q8_0

Run as its own process so the converter's vendored ``gguf-py`` (newer than the ``gguf`` package a
user may have installed) is the one imported. The converter's stock vocabulary code recognises
sentencepiece and known BPE pre-tokenizers; the tiny lab's character-level ``WordLevel``
tokenizer is neither, so for it the vocabulary is written explicitly: tokenizer model "gpt2"
with no merges (every character its own token), each character through GPT-2's byte-to-unicode
map, special tokens as CONTROL. Other models take the converter's own path unchanged (for Llama and
Qwen2 models it imports ``sentencepiece`` first, whatever the tokenizer: ``deploy.gguf``). A module
the converter cannot import ends the script with one line on stderr and status ``MISSING_MODULE``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MISSING_MODULE = 3   # the exit status when the converter could not import a module it needs


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (what a "gpt2" GGUF vocabulary stores)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def is_char_spec(spec: dict) -> bool:
    """A ``tokenizer.json`` (as a dict) of the tiny lab's kind: a WordLevel model that splits every character."""
    pre = spec.get("pre_tokenizer") or {}
    return spec.get("model", {}).get("type") == "WordLevel" and pre.get("pattern", {}).get("Regex") == "[\\s\\S]"


def is_char_vocab(model_dir: Path) -> bool:
    """The tiny lab's tokenizer in ``model_dir`` (``is_char_spec`` of its tokenizer.json)."""
    path = Path(model_dir) / "tokenizer.json"
    return path.exists() and is_char_spec(json.loads(path.read_text()))


def main(converter: str, model_dir: str, out_file: str, quant: str) -> None:
    root = Path(converter)
    sys.path[:0] = [str(root), str(root / "gguf-py")]
    import gguf
    import torch
    from conversion import ModelBase, get_model_class

    hparams = ModelBase.load_hparams(Path(model_dir), False)
    base = get_model_class(hparams["architectures"][0])
    cls = base
    if is_char_vocab(Path(model_dir)):
        from transformers import AutoTokenizer

        class CharVocab(base):
            model_arch = base.model_arch

            def set_vocab(self):
                tok = AutoTokenizer.from_pretrained(self.dir_model)
                by_id = {i: t for t, i in tok.get_vocab().items()}
                special, enc = set(tok.all_special_tokens), bytes_to_unicode()
                tokens, types = [], []
                for i in range(self.hparams["vocab_size"]):
                    t = by_id.get(i, f"[PAD{i}]")
                    if t in special or i not in by_id:
                        tokens.append(t)
                        types.append(gguf.TokenType.CONTROL)
                    else:
                        tokens.append("".join(enc[b] for b in t.encode("utf-8")))
                        types.append(gguf.TokenType.NORMAL)
                self.gguf_writer.add_tokenizer_model("gpt2")
                self.gguf_writer.add_tokenizer_pre("default")
                self.gguf_writer.add_token_list(tokens)
                self.gguf_writer.add_token_types(types)
                self.gguf_writer.add_token_merges([])
                gguf.SpecialVocab(self.dir_model, load_merges=False).add_to_gguf(self.gguf_writer)

        cls = CharVocab
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[quant]
    with torch.inference_mode():
        cls(Path(model_dir), ftype, Path(out_file), eager=True).write()


if __name__ == "__main__":
    try:
        main(*sys.argv[1:5])
    except ModuleNotFoundError as e:   # one line for deploy.gguf.convert to pass on (MISSING_MODULE)
        print(f"llama.cpp's converter imports the module {e.name!r} for this model and it is not installed: "
              f"pip install {e.name.split('.')[0]}", file=sys.stderr)
        sys.exit(MISSING_MODULE)
