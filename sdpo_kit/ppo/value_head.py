"""A causal LM with a scalar value head: PPO's policy and critic on one shared trunk.

As classic TRL's ``AutoModelForCausalLMWithValueHead`` (trl <= 0.11): the head is dropout +
``Linear(hidden_size, 1)`` on the last hidden state, one value per position. For a completion,
the value of token t is read at the position that predicts it (the same positions as
``generation.completion_logits``), so ``values[:, t]`` estimates the return from o_t on.

The head is saved beside the model as ``value_head.safetensors`` (``save_pretrained`` /
``from_pretrained``); the LM part saves as usual (a PEFT policy saves its adapter only).
"""

from __future__ import annotations

from pathlib import Path

import torch

HEAD_FILE = "value_head.safetensors"


def hidden_size(model) -> int:
    """The trunk's hidden size, for plain and PEFT-wrapped models."""
    config = model.get_base_model().config if hasattr(model, "get_base_model") else model.config
    size = getattr(config, "hidden_size", None) or getattr(config.get_text_config(), "hidden_size", None)
    if size is None:
        raise ValueError(f"cannot find the hidden size of {type(model).__name__} (no config.hidden_size)")
    return int(size)


class PolicyWithValueHead(torch.nn.Module):
    """``policy`` (a causal LM, plain or PEFT) plus ``v_head``; the trunk is shared.

    ``forward(input_ids, attention_mask, position_ids=None) -> (logits, values)`` with logits
    (B, L, V) and values (B, L); ``completion_forward`` gives both for a completion's tokens."""

    def __init__(self, policy, dropout: float = 0.1):
        super().__init__()
        self.policy = policy
        self.v_head = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(hidden_size(policy), 1))
        dtype = next(policy.parameters()).dtype
        self.v_head.to(device=next(policy.parameters()).device, dtype=dtype if dtype.is_floating_point else None)

    @property
    def config(self):
        return self.policy.config

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        out = self.policy(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          output_hidden_states=True)
        hidden = out.hidden_states[-1]                                             # (B, L, H)
        values = self.v_head(hidden.to(self.v_head[1].weight.dtype)).squeeze(-1)   # (B, L)
        return out.logits, values

    def completion_forward(self, prompt_ids, prompt_mask, completion_ids, completion_mask):
        """(logits (B, T, V), values (B, T)) at the positions that predict each completion token."""
        input_ids = torch.cat([prompt_ids, completion_ids], 1)                     # (B, P+T)
        attention_mask = torch.cat([prompt_mask, completion_mask], 1)               # (B, P+T)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)                 # (B, P+T)
        logits, values = self(input_ids, attention_mask, position_ids)
        T = completion_ids.size(1)
        return logits[:, -T - 1:-1], values[:, -T - 1:-1]                          # (B, T, V), (B, T)

    def generate(self, *args, **kwargs):
        return self.policy.generate(*args, **kwargs)

    def save_pretrained(self, path, **kwargs) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        self.policy.save_pretrained(path, **kwargs)
        save_file({k: v.detach().cpu().contiguous() for k, v in self.v_head.state_dict().items()}, path / HEAD_FILE)

    def load_head(self, path) -> None:
        """Load ``value_head.safetensors`` from ``path`` into this head."""
        from safetensors.torch import load_file

        file = Path(path) / HEAD_FILE
        if not file.exists():
            raise FileNotFoundError(f"no value head at {file} (saved by PolicyWithValueHead.save_pretrained)")
        self.v_head.load_state_dict(load_file(str(file)))

    @classmethod
    def from_pretrained(cls, policy, path, dropout: float = 0.1) -> PolicyWithValueHead:
        """Wrap an already loaded ``policy`` and load the head saved at ``path``."""
        model = cls(policy, dropout=dropout)
        model.load_head(path)
        return model
