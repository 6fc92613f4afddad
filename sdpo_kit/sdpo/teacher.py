"""SDPO's teacher: which weights read the reprompted context, and how they follow the student.

    teacher_model_kind
      live   the student itself (no copy): the teacher differs only by its context
      base   the starting policy, frozen: a copy, or for a LoRA policy the base model (adapters off)
      ema    teacher <- (1 - teacher_update_rate) * teacher + teacher_update_rate * student every
             teacher_sync_steps optimizer steps (the mu passes count): a copy, or for a pure-LoRA
             policy a second adapter "teacher" (TRL's PEFTAdapterEMACallback: zero-initialised,
             so it starts as the base model) instead of a copy of the whole model

``Teacher.model`` is the one extra model a scratch trainer holds (in the reference-model slot:
SDPO forces ``beta = 0``, so there is no third model), None when the teacher is the student itself,
its base or an adapter on it; ``Teacher.forward()`` is the context that routes a forward to the
teacher's weights, whichever way they are held; ``Teacher.weights()`` reads the weights the EMA
averages (the copy's, or the adapter's) by name; ``Teacher.optimizer_step()`` does the EMA.
``teacher_prompt_batch`` left-pads the teacher prompts it reads (TRL's left cut at ``max_reprompt_len``).
Same update rule as TRL's ``SyncTeacherModelCallback`` / ``PEFTAdapterEMACallback``. A model holds one
EMA adapter: a new ``Teacher`` on a model that already has one (an earlier trainer's, or a copy's)
starts it afresh.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Sequence

import torch

from sdpo_kit.core.sampling import encode_prompts

TEACHER_KINDS = ("live", "base", "ema")
ADAPTER = "teacher"


def is_pure_lora(model) -> bool:
    """A PEFT model whose active adapter is LoRA and whose trainable parameters are all LoRA's."""
    if not (hasattr(model, "peft_config") and hasattr(model, "active_adapter")):
        return False
    config = model.peft_config.get(model.active_adapter or "default")
    if config is None or str(config.peft_type).split(".")[-1] != "LORA":
        return False
    return all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)


@torch.no_grad()
def ema_update(target: torch.nn.Module, source: torch.nn.Module, rate: float) -> None:
    """target <- (1 - rate) * target + rate * source, parameter by parameter (TRL's sync rule)."""
    for t, s in zip(target.parameters(), source.parameters()):
        t.mul_(1.0 - rate).add_(s.detach().to(t.dtype), alpha=rate)


class Teacher:
    """The teacher of ``kind`` for ``student`` (module docstring)."""

    def __init__(self, student, kind: str = "ema", update_rate: float = 0.05, sync_steps: int = 1):
        if kind not in TEACHER_KINDS:
            raise ValueError(f"teacher_model_kind must be one of {TEACHER_KINDS}, got {kind!r}")
        if not 0.0 <= update_rate <= 1.0 or sync_steps < 1:
            raise ValueError(f"need 0 <= teacher_update_rate <= 1 and teacher_sync_steps >= 1, "
                             f"got {update_rate} and {sync_steps}")
        self.student, self.kind = student, kind
        self.update_rate, self.sync_steps = update_rate, sync_steps
        self.model = None            # a separate frozen copy, when there is one
        self.adapter = None          # the EMA adapter's name on the student, when there is one
        self._steps = 0
        peft = hasattr(student, "peft_config")
        if kind == "ema" and is_pure_lora(student):
            self._add_ema_adapter()
        elif kind == "ema" and peft:
            raise ValueError("teacher_model_kind='ema' with a PEFT model that is not pure LoRA: its EMA cannot be "
                             "kept as an adapter; use 'live' or 'base', or a plain model")
        elif kind == "ema" or (kind == "base" and not peft):
            self.model = copy.deepcopy(student).eval().requires_grad_(False)

    def _add_ema_adapter(self) -> None:
        from peft import get_peft_model_state_dict, set_peft_model_state_dict

        active = self.student.active_adapter
        if ADAPTER in self.student.peft_config:   # an earlier Teacher's on this model (or on the model it was copied from)
            self.student.delete_adapter(ADAPTER)
        self.student.add_adapter(ADAPTER, self.student.peft_config[active])
        zeros = {k: torch.zeros_like(v) for k, v in get_peft_model_state_dict(self.student, adapter_name=active).items()}
        set_peft_model_state_dict(self.student, zeros, adapter_name=ADAPTER)
        self.student.set_adapter(active)  # training continues on the student's adapter
        self.adapter, self._active = ADAPTER, active

    @contextlib.contextmanager
    def forward(self):
        """``with teacher.forward() as m: m(...)``: the module to call and, for PEFT, its adapter state."""
        if self.model is not None:
            yield self.model
        elif self.adapter is not None:
            self.student.set_adapter(self.adapter)
            try:
                yield self.student
            finally:
                self.student.set_adapter(self._active)
        elif self.kind == "base":  # a PEFT student without its adapters
            with self.student.disable_adapter():
                yield self.student
        else:  # live
            yield self.student

    @torch.no_grad()
    def weights(self, of: str = "teacher") -> dict[str, torch.Tensor]:
        """The weights the EMA averages, by name, detached copies: the teacher's (``of="teacher"``) or the
        student's under the same names (``of="student"``). A copy: every parameter of the copy and of the
        student; an EMA adapter: the LoRA weights of that adapter and of the student's own adapter. A
        teacher without weights of its own (live, or base on a LoRA policy) has none: ``{}``."""
        if of not in ("teacher", "student"):
            raise ValueError(f"of must be 'teacher' or 'student', got {of!r}")
        if self.model is not None:
            source = self.model if of == "teacher" else self.student
            return {n: p.detach().clone() for n, p in source.named_parameters()}
        if self.adapter is None:
            return {}
        from peft import get_peft_model_state_dict

        name = self.adapter if of == "teacher" else self._active
        return {n: v.detach().clone() for n, v in get_peft_model_state_dict(self.student, adapter_name=name).items()}

    @torch.no_grad()
    def optimizer_step(self) -> bool:
        """Call after every optimizer step; returns True when the EMA teacher was updated."""
        self._steps += 1
        if self.kind != "ema" or self._steps % self.sync_steps:
            return False
        if self.model is not None:
            ema_update(self.model, self.student, self.update_rate)
            return True
        from peft import get_peft_model_state_dict, set_peft_model_state_dict

        student = get_peft_model_state_dict(self.student, adapter_name=self._active)
        teacher = get_peft_model_state_dict(self.student, adapter_name=self.adapter)
        mixed = {k: (1 - self.update_rate) * teacher[k] + self.update_rate * v for k, v in student.items()}
        set_peft_model_state_dict(self.student, mixed, adapter_name=self.adapter)
        self.student.set_adapter(self._active)
        return True

    def state_dict(self) -> dict:
        """What a checkpoint needs to resume the EMA besides the weights (``save``): the step count."""
        return {"steps": self._steps}

    def load_state_dict(self, state: dict) -> None:
        self._steps = int(state.get("steps", self._steps))

    def save(self, folder) -> None:
        """The teacher's own weights, when it has any (a copy, or the EMA adapter), into ``folder``."""
        from pathlib import Path

        from safetensors.torch import save_file

        folder = Path(folder)
        if self.model is not None:
            from sdpo_kit.core.checkpoint import save_model

            save_model(self.model, folder)
        elif self.adapter is not None:
            from peft import get_peft_model_state_dict

            folder.mkdir(parents=True, exist_ok=True)
            state = get_peft_model_state_dict(self.student, adapter_name=self.adapter)
            save_file({k: v.contiguous() for k, v in state.items()}, folder / "adapter.safetensors")

    def load(self, folder) -> None:
        """Read back what ``save`` wrote (nothing to do for live / base teachers)."""
        from pathlib import Path

        from safetensors.torch import load_file

        folder = Path(folder)
        if self.model is not None:
            from sdpo_kit.core.checkpoint import load_model_weights

            load_model_weights(self.model, folder)
        elif self.adapter is not None:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.student, load_file(folder / "adapter.safetensors"), adapter_name=self.adapter)
            self.student.set_adapter(self._active)


def teacher_prompt_batch(tokenizer, teacher_prompts: Sequence, max_len: int, device=None):
    """Left-padded ids / mask of the teacher prompts, each cut from the left to ``max_len``
    tokens (TRL's cut: it loses the question first; ``SDPOFields.teacher_batch`` shortens the
    demonstration before this); returns (ids, mask, fraction of prompts that were cut)."""
    enc = encode_prompts(tokenizer, teacher_prompts)
    ids, mask = enc["input_ids"], enc["attention_mask"]                        # (B, L)
    cut = mask.sum(1) > max_len                                                # (B,)
    if cut.any():  # left padding: the last max_len positions hold every prompt's last tokens
        ids, mask = ids[:, -max_len:], mask[:, -max_len:]
        warnings.warn(f"SDPO: {int(cut.sum())} teacher prompt(s) longer than max_reprompt_len={max_len} tokens were "
                      f"cut from the left, losing the head of the question (sdpo/reprompt_truncated counts them)",
                      stacklevel=2)
    to = (lambda x: x.to(device)) if device is not None else (lambda x: x)
    return to(ids), to(mask), cut.float().mean().item()
