"""Checkpoints of the scratch trainers: everything a run needs to continue as if never cut off.

``output_dir/checkpoint-N/`` holds

    model.safetensors + config.json    the policy (``save_pretrained``), or for a PEFT / LoRA
      or adapter_model.safetensors     policy its adapter only; with the tokenizer, so the
                                       folder also loads as a model
    optimizer.pt, scheduler.pt         their ``state_dict()`` (loaded with ``weights_only=True``)
    trainer_state.json                 the step N, the metric rows so far, the row sampler's
                                       position, every random generator's state (Python, NumPy,
                                       torch CPU and CUDA) and the trainer's own extra state

so ``train(resume_from_checkpoint=...)`` continues at step N + 1 with the same samples, the
same rewards and the same losses as the run that was not interrupted (tested).

What it does not hold: a frozen reference model or scorer. Those are copies of the *starting*
policy, so a resumed run rebuilds them from the starting policy it is given, exactly as the
first run did (load the starting model, build the trainer, then resume).
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import torch

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
STATE_FILE = "trainer_state.json"


# ---------------------------------------------------------------------------------------
# random generators
# ---------------------------------------------------------------------------------------
def rng_state() -> dict:
    """Every generator a step draws from, as JSON-friendly lists."""
    state = {"python": _to_lists(random.getstate()), "torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    try:
        import numpy as np

        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        state["numpy"] = [kind, keys.tolist(), pos, has_gauss, gauss]
    except ImportError:  # pragma: no cover
        pass
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(_to_tuples(state["python"]))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])
    if "numpy" in state:
        import numpy as np

        kind, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))


def _to_lists(x):
    return [_to_lists(v) for v in x] if isinstance(x, (tuple, list)) else x


def _to_tuples(x):
    return tuple(_to_tuples(v) for v in x) if isinstance(x, list) else x


# ---------------------------------------------------------------------------------------
# model weights
# ---------------------------------------------------------------------------------------
def is_peft(model) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def save_model(model, path: Path, tokenizer=None) -> None:
    """``save_pretrained`` in safetensors: the full weights, or a PEFT model's adapter only."""
    from transformers.utils import logging as hf_logging

    path.mkdir(parents=True, exist_ok=True)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar in a run's output
    try:
        model.save_pretrained(path, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def load_model_weights(model, path: Path) -> None:
    """Load weights saved by ``save_model`` into ``model`` in place (same architecture)."""
    from safetensors.torch import load_file

    device = next(model.parameters()).device
    if is_peft(model):
        from peft import set_peft_model_state_dict

        adapter = path / "adapter_model.safetensors"
        if not adapter.exists():
            raise FileNotFoundError(f"{path} holds no adapter_model.safetensors for this PEFT model")
        result = set_peft_model_state_dict(model, load_file(adapter, device=str(device)))
        if getattr(result, "unexpected_keys", None):
            raise ValueError(f"{adapter} does not match the model: unexpected keys {result.unexpected_keys[:5]}")
        return
    files = sorted(path.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path} holds no model*.safetensors")
    for f in files:  # one file, or the shards of a large model
        unexpected = model.load_state_dict(load_file(f, device=str(device)), strict=False).unexpected_keys
        if unexpected:
            raise ValueError(f"{f} does not match the model: unexpected keys {unexpected[:5]}")


# ---------------------------------------------------------------------------------------
# whole checkpoints
# ---------------------------------------------------------------------------------------
def save_checkpoint(output_dir, step: int, *, model, optimizer, scheduler, state: dict, tokenizer=None,
                    total_limit: int | None = None, write_extra=None) -> Path:
    """Write ``output_dir/checkpoint-<step>/`` atomically (a half-written folder never looks done).

    ``state``: JSON-friendly trainer state (history, sampler, extra); the step and the random
    generators are added here. ``total_limit`` keeps only that many newest checkpoints;
    ``write_extra(folder)`` adds a trainer's own files (an EMA teacher's weights) before publishing."""
    output_dir = Path(output_dir)
    final = output_dir / f"checkpoint-{step}"
    tmp = output_dir / f".checkpoint-{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp, tokenizer)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    (tmp / STATE_FILE).write_text(json.dumps({**state, "step": step, "rng": rng_state()}))
    if write_extra is not None:
        write_extra(tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.replace(final)
    if total_limit:
        for old in list_checkpoints(output_dir)[:-total_limit]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(output_dir) -> list[Path]:
    """``checkpoint-N`` folders under ``output_dir``, oldest first."""
    found = [p for p in Path(output_dir).glob("checkpoint-*") if p.is_dir() and CHECKPOINT_RE.match(p.name)]
    return sorted(found, key=lambda p: int(CHECKPOINT_RE.match(p.name).group(1)))


def read_state(path) -> dict:
    """The trainer state of the checkpoint at ``path`` (step, config, history, ...), touching
    nothing: a trainer checks it before it loads any weights."""
    path = Path(path)
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(f"{path} is not an sdpo_kit checkpoint (no {STATE_FILE}); "
                                f"pass a folder like OUTPUT_DIR/checkpoint-N")
    return json.loads((path / STATE_FILE).read_text())


def load_checkpoint(path, *, model, optimizer, scheduler) -> dict:
    """Restore model, optimizer and scheduler from ``path``; returns the trainer state (with
    ``step``). Random generators are not touched here: call ``set_rng_state(state["rng"])``
    once everything that draws at start-up has run."""
    path = Path(path)
    state = read_state(path)
    load_model_weights(model, path)
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    return state
