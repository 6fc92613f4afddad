"""The decoding loop ``core.sampling.sample`` runs: one token a step for every row, as ``generate`` draws it.

    decode(model, prompt_ids, prompt_mask, config, G)    completion ids (B, T); each prompt runs once, its KV
                                                         cache repeated for its G rows
    decode(..., return_logprobs=True)                    also log p(o_t) under the distribution each token was
                                                         drawn from (B, T): a sampler that is not the policy
                                                         (``core.sampler_copy``) needs them for its correction
    draw(probs)                                          torch.multinomial's token, its random numbers vectorised
    few_row_linears(model)                               a decoding step's matmuls in the layout a CPU runs faster

A decoding step multiplies a few rows (the B last tokens) by every weight of the model: 16 rows on
``configs/real_grpo.yaml``. On a CPU the weights' read and the row products bound it, and the BLAS kernel
matters: in fp32 ``y^T = W x^T`` runs these shapes faster than ``y = x W^T`` (``F.linear``'s layout), the same
products summed in the same order, so every row comes out the same (``benchmarks/results/real_decode.json``
measures both layouts on the real model's batch: ``merged_s`` against ``plain_layout_s``, and
``rows_identical_layout``; bf16 weights keep ``F.linear``, which is faster there, on 2-D rows).
``few_row_linears`` switches every plain ``nn.Linear`` of the model to it while sampling, for inputs of at
most ``FEW_ROWS`` rows on a CPU; a prompt's forward keeps ``F.linear``.
"""

from __future__ import annotations

import contextlib

import torch
from transformers import GenerationConfig

FEW_ROWS = 64   # a decoding step's rows (B); a prompt's forward (n x P rows) keeps F.linear


def logits_processors(config: GenerationConfig):
    """What ``generate`` applies to the next-token logits when sampling: temperature, then top-k, then
    top-p (transformers' own warpers, each only when it changes something); nothing when greedy."""
    from transformers.generation import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    out = LogitsProcessorList()
    if config.do_sample:
        if config.temperature is not None and config.temperature != 1.0:
            out.append(TemperatureLogitsWarper(config.temperature))
        if config.top_k:
            out.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
        if config.top_p is not None and config.top_p < 1.0:
            out.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
    return out


def draw(probs: torch.Tensor) -> torch.Tensor:
    """One token per row of ``probs`` (B, V), the very token ``torch.multinomial(probs, 1)`` draws, from the
    same random numbers, in less time on a CPU (``benchmarks/results/real_decode.json`` measures both: ``draw_s``).

    torch draws one sample as argmax_v p_v / q_v, q_v ~ Exp(1) (the exponential race), and a CPU makes each
    q_v as -log(1 - u_v) from a float64 uniform u_v, one element at a time. Here the uniforms come from
    ``torch.rand`` (the same generator, the same order) and the logarithm runs vectorised: q is equal bit
    for bit (``tests/test_sampling.py`` holds it to ``torch.multinomial``). Elsewhere (a GPU, another
    dtype) it is ``torch.multinomial``."""
    if probs.device.type != "cpu" or probs.dtype != torch.float32 or probs.dim() != 2:
        return torch.multinomial(probs, 1).squeeze(1)
    if not bool(((probs >= 0) & (probs < float("inf"))).all()) or bool((probs.sum(-1) == 0).any()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0, or a row sums to 0")
    q = torch.log1p(-torch.rand(probs.shape, dtype=torch.float64)).neg_().float()   # (B, V) Exp(1), as torch's
    return (probs / q).argmax(-1)                                                   # (B,)


def _few_row_forward(self, x: torch.Tensor) -> torch.Tensor:
    """``nn.Linear.forward`` as (W x^T)^T when x has at most FEW_ROWS rows: the same products and sums."""
    rows = x.reshape(-1, x.size(-1))                                      # (N, in)
    if rows.size(0) > FEW_ROWS:
        return torch.nn.functional.linear(x, self.weight, self.bias)
    if self.weight.dtype == torch.float32:
        y = (self.weight @ rows.t()).t()                                  # (N, out)
        if self.bias is not None:
            y = y + self.bias
    else:   # bf16 runs F.linear's layout faster; 2-D rows, or a sliced 3-D input becomes a bmm on a weight copy
        y = torch.nn.functional.linear(rows, self.weight, self.bias)     # (N, out)
    return y.reshape(*x.shape[:-1], y.size(-1))                           # (..., out)


@contextlib.contextmanager
def few_row_linears(model):
    """Every plain ``nn.Linear`` of ``model`` on a CPU (not a subclass: 4-bit and other layers keep theirs)
    runs ``_few_row_forward`` inside the block; the modules' own ``forward`` comes back afterwards."""
    layers = [m for m in model.modules() if type(m) is torch.nn.Linear and m.weight.device.type == "cpu"
              and "forward" not in vars(m)]
    for layer in layers:
        layer.forward = _few_row_forward.__get__(layer)
    try:
        yield model
    finally:
        for layer in layers:
            del layer.forward


@torch.no_grad()
def decode(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, config: GenerationConfig,
           group_size: int = 1, return_logprobs: bool = False):
    """Completion ids (B, T), B = n prompts x ``group_size``, each prompt's G rows in a row; None when the
    model's forward returns no KV cache this loop can repeat (then ``sample`` calls ``generate``).

    The n distinct prompts (n, P) run once; their cache is repeated G times, and each step feeds the
    B last tokens back. Every step draws as ``generate`` does: logits in fp32, the processors of
    ``logits_processors``, softmax, one ``torch.multinomial`` draw over (B, V) (``draw``; argmax when greedy); a
    finished row gets ``pad_token_id``; it stops when every row has emitted an eos or after
    ``max_new_tokens``. T is the number of steps taken.

    ``return_logprobs``: ``(ids, logprobs)``, logprobs (B, T) the log of each drawn token's probability in the
    distribution it was drawn from (after the processors: log softmax(logits / temperature) without top-k /
    top-p); 0 on a finished row's padding."""
    G, eos = group_size, torch.as_tensor(config.eos_token_id, device=prompt_ids.device).reshape(-1)
    position_ids = (prompt_mask.cumsum(-1) - 1).masked_fill(prompt_mask == 0, 1)  # (n, P) as generate does
    out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=position_ids, use_cache=True,
                logits_to_keep=1)
    cache = out.past_key_values
    if cache is None or not hasattr(cache, "batch_repeat_interleave") or cache.get_seq_length() != prompt_ids.size(1):
        return None
    if G > 1:
        cache.batch_repeat_interleave(G)                                          # (B, heads, P, d) per layer
    logits = out.logits[:, -1].float().repeat_interleave(G, 0)                    # (B, V)
    mask = prompt_mask.repeat_interleave(G, 0)                                    # (B, P)
    position = position_ids[:, -1:].repeat_interleave(G, 0)                       # (B, 1)
    processors = logits_processors(config)
    B = mask.size(0)
    unfinished = torch.ones(B, dtype=torch.bool, device=mask.device)              # (B,)
    tokens, logprobs = [], []
    for step in range(config.max_new_tokens):
        seen = torch.stack(tokens, 1) if tokens else mask.new_zeros(B, 0)         # (B, t) for the processors
        scores = processors(seen, logits)                                         # (B, V)
        probs = torch.softmax(scores, -1) if config.do_sample or return_logprobs else None  # (B, V)
        next_ids = draw(probs) if config.do_sample else scores.argmax(-1)         # (B,)
        if return_logprobs:
            chosen = probs.gather(1, next_ids[:, None]).squeeze(1).log()          # (B,)
            logprobs.append(torch.where(unfinished, chosen, torch.zeros_like(chosen)))
        next_ids = torch.where(unfinished, next_ids, torch.full_like(next_ids, config.pad_token_id))
        tokens.append(next_ids)
        unfinished &= ~torch.isin(next_ids, eos)
        if not unfinished.any() or step == config.max_new_tokens - 1:
            break
        mask = torch.cat([mask, mask.new_ones(B, 1)], 1)                          # (B, P+t+1)
        position = position + 1                                                   # (B, 1)
        out = model(input_ids=next_ids[:, None], attention_mask=mask, position_ids=position, past_key_values=cache,
                    use_cache=True)
        logits = out.logits[:, -1].float()                                        # (B, V)
    ids = torch.stack(tokens, 1)                                                  # (B, T)
    return (ids, torch.stack(logprobs, 1)) if return_logprobs else ids            # (B, T), (B, T)
