"""Export a trained run in the formats people deploy: a LoRA adapter, or the merged model.

    sdpo-kit export RUN_DIR --format lora|merged|merged_4bit|gguf [--output-dir D] [--dtype fp16|bf16|fp32]
                                                                [--quant f32|f16|q8_0]

``RUN_DIR`` is what ``sdpo-kit train`` wrote (``deploy/run_model.py`` loads it back).

    lora         the adapter and its config, as saved (a run that trained the full model has none:
                 an error says so)
    merged       the base with the adapter folded in (``merge_and_unload``), or the full model,
                 cast to ``dtype`` and saved as safetensors with the tokenizer
    merged_4bit  the merged model quantised to 4 bits with bitsandbytes; needs a CUDA GPU and
                 bitsandbytes (a clear error otherwise)
    gguf         ``model-<quant>.gguf`` for llama.cpp, made by llama.cpp's own converter from the
                 merged fp32 model (``deploy.gguf``; ``quant`` f32, f16 or q8_0); every model but the
                 tiny lab needs ``sentencepiece`` there (a clear error otherwise)

The run's ``config.yaml`` is read only for what the export uses (``run_model.run_source``), and
bad input (no run, no config, no model, an unknown format, ...) is an ``ExportError`` with one line
that says why; ``sdpo-kit export`` prints it and exits with status 2.

Every export is written to a temporary folder next to the destination and moved into place only
when complete: a failure leaves nothing half-written. ``round_trip`` loads an export back and
compares its greedy completions and logits with the run's model.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from sdpo_kit.core.unsloth_patches import fit_to_unsloth
from sdpo_kit.deploy.run_model import (
    ExportError,
    base_model,
    compare_models,
    comparison_device,
    is_adapter,
    load_run_model,
    run_model_dir,
    run_source,
)

FORMATS = ("lora", "merged", "merged_4bit", "gguf")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _publish(tmp: Path, dest: Path, overwrite: bool) -> Path:
    if dest.exists():
        if not overwrite:
            raise ExportError(f"{dest} exists; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.replace(dest)
    return dest


def export(run_dir, fmt: str = "lora", output_dir=None, *, dtype: str = "fp16", quant: str = "f16",
           overwrite: bool = False) -> Path:
    """Write ``fmt`` of the run to ``output_dir`` (default ``RUN_DIR/export-<fmt>``); returns it."""
    from sdpo_kit.deploy.gguf import QUANTS

    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; one of {FORMATS}")
    if fmt == "gguf" and quant not in QUANTS:
        raise ExportError(f"unknown GGUF quantisation {quant!r}; one of {QUANTS}")
    if dtype not in DTYPES:
        raise ExportError(f"unknown dtype {dtype!r}; one of {tuple(DTYPES)}")
    model_dir = run_model_dir(run_dir)
    dest = Path(output_dir) if output_dir else Path(run_dir) / f"export-{fmt}"
    if fmt == "lora" and not is_adapter(model_dir):
        raise ExportError(f"{run_dir} trained the full model, not a LoRA adapter: export --format merged instead")
    if fmt != "lora":
        run_source(run_dir)   # the config keys the export uses, checked before anything loads
    if fmt == "merged_4bit":
        _check_4bit()
    if fmt == "gguf":
        from sdpo_kit.deploy.gguf import ConverterUnavailable, converter_dir, missing_converter_packages

        missing = missing_converter_packages(model_dir)
        if missing:
            raise ExportError(f"GGUF export of this model needs {', '.join(missing)}, which llama.cpp's converter "
                              f"imports (pip install {' '.join(missing)}; sdpo_kit's dev extra has it)")
        try:
            converter_dir()
        except ConverterUnavailable as e:
            raise ExportError(str(e)) from e
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        if fmt == "lora":
            for f in model_dir.iterdir():
                if f.is_file():
                    shutil.copy2(f, tmp / f.name)
        else:
            model, tok = load_run_model(run_dir, _load_dtype(fmt, dtype))
            if fmt == "gguf":
                from sdpo_kit.deploy.gguf import ConverterUnavailable, convert

                hf = tmp / "_hf"
                model.to(torch.float32).save_pretrained(hf, safe_serialization=True)
                tok.save_pretrained(hf)
                try:
                    convert(hf, tmp / f"model-{quant}.gguf", quant)
                except ConverterUnavailable as e:   # a module the converter imports is missing
                    raise ExportError(str(e)) from e
                except RuntimeError as e:   # the converter's own refusal: its last line (the log is e's cause)
                    raise ExportError(f"llama.cpp's converter failed on this model: {str(e).splitlines()[-1]}") from e
                shutil.rmtree(hf)
                return _publish(tmp, dest, overwrite)
            if fmt == "merged":
                model = model.to(DTYPES[dtype])
            else:
                model = _quantise_4bit(model, tmp)
            model.save_pretrained(tmp, safe_serialization=True)
            tok.save_pretrained(tmp)
        return _publish(tmp, dest, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load_dtype(fmt: str, dtype: str) -> torch.dtype | None:
    """The dtype the run's model loads in for an export: fp32 for GGUF (the converter reads fp32) and for a
    merged fp32 export; on a GPU a merged 16-bit export loads in that dtype (the default there is the card's
    16 bits: bf16 on an H100, whose rounding an fp16 file would inherit); else the default (fp32 on a CPU)."""
    if fmt == "gguf" or (fmt == "merged" and dtype == "fp32"):
        return torch.float32
    if fmt == "merged" and torch.cuda.is_available():
        return DTYPES[dtype]
    return None


def _check_4bit() -> None:
    import importlib.util

    if not torch.cuda.is_available():
        raise ExportError("merged_4bit needs a CUDA GPU (bitsandbytes quantises on the GPU); export --format merged "
                          "for 16-bit weights")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ExportError("merged_4bit needs bitsandbytes: pip install bitsandbytes")


def _quantise_4bit(model, tmp: Path):  # pragma: no cover - needs a GPU
    """Save the merged model in 16 bits, reload it quantised to 4 bits (NF4) on the GPU."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    staging = tmp / "_fp16"
    model.to(torch.float16).save_pretrained(staging, safe_serialization=True)
    q = AutoModelForCausalLM.from_pretrained(staging, device_map="cuda", quantization_config=BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float16))
    shutil.rmtree(staging)
    return q


@torch.no_grad()
def round_trip(run_dir, export_dir, prompts, *, max_new_tokens: int = 8) -> dict:
    """Load ``export_dir`` back (transformers; a LoRA export on the run's base) and compare it with
    the run's model in fp32 on ``prompts``, both on ``comparison_device()``: greedy completions equal, and
    the largest logit difference over the prompts' next-token logits."""
    from transformers import AutoModelForCausalLM

    ref, tok = load_run_model(run_dir, dtype=torch.float32)
    device = comparison_device()
    ref = ref.to(device, torch.float32)
    export_dir = Path(export_dir)
    if is_adapter(export_dir):
        from peft import PeftModel

        base, _ = base_model(run_dir, torch.float32)
        got = PeftModel.from_pretrained(base, export_dir).merge_and_unload().eval()
    else:
        got = AutoModelForCausalLM.from_pretrained(export_dir).eval()
    dtype = next(got.parameters()).dtype
    return {"dtype": str(dtype).replace("torch.", ""),
            **compare_models(ref, fit_to_unsloth(got.to(device, torch.float32)), tok, prompts, max_new_tokens)}
