"""A pytest plugin for ``make test-trl115``: trl 1.15's fused log-prob kernel, in plain torch, on CPU.

trl 1.15 (Unsloth's pin) computes every GRPO log-prob through
``trl.trainer.utils._ChunkedLogProbFunction``, a Triton kernel: None without triton, and with
triton it still needs a GPU driver ("0 active drivers"). trl 1.16 computes the same quantities
in torch off-GPU. This stand-in does what 1.16 does on a CPU, so the rest of 1.15's
GRPOTrainer (generation, rewards, advantages, ``_compute_loss``, the training loop) runs under
our tests; the Triton kernel itself is not tested here (it needs a GPU). On CUDA / XPU the
original kernel is used. Loaded with ``pytest -p trl115_cpu_kernel`` (``tests/`` on PYTHONPATH).
"""

import torch
import torch.nn.functional as F
import trl
import trl.trainer.utils as trl_utils

if not trl.__version__.startswith("1.15."):   # the overlay (.trl115/site, first on PYTHONPATH) must be what runs
    raise ImportError(f"make test-trl115 runs trl 1.15, but trl {trl.__version__} was imported from {trl.__file__}")

_TRITON = trl_utils._ChunkedLogProbFunction
_OUTPUTS = ("entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


class TorchChunkedLogProb:
    """``_ChunkedLogProbFunction.apply`` with trl 1.15's arguments and return values."""

    @staticmethod
    def apply(hidden, weight, bias, targets, temperature, chunk_size, softcap=None, logit_scale=1.0,
              outputs=_OUTPUTS):
        if _TRITON is not None and hidden.device.type in ("cuda", "xpu"):
            return _TRITON.apply(hidden, weight, bias, targets, temperature, chunk_size, softcap, logit_scale,
                                 outputs)
        z = F.linear(hidden, weight, bias).float() * logit_scale                      # (N, V)
        if softcap is not None:
            z = softcap * torch.tanh(z / softcap)
        z = z / temperature
        logp = z.log_softmax(-1)                                                       # (N, V)
        picked = logp.gather(-1, targets[:, None]).squeeze(-1)                         # (N,)
        entropy = -(logp.exp() * logp).sum(-1) if "entropy" in outputs else None       # (N,)
        with torch.no_grad():
            lssp = torch.logsumexp(2 * logp, -1) if "log_sum_sq_probs" in outputs else None
            mean_logits = z.mean(-1) if "mean_logits" in outputs else None
            top1 = (z.argmax(-1) == targets) if "is_top1" in outputs else None
        return picked, entropy, lssp, mean_logits, top1


trl_utils._ChunkedLogProbFunction = TorchChunkedLogProb
