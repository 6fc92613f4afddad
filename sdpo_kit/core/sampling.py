"""Sampling helpers shared by trainers, evaluators and notebooks.

Prompts are chat message lists (rendered with the tokenizer's chat template) or plain
strings (used as they are). Generation is left-padded and batched, never a loop over single
prompts. ``sample`` runs each distinct prompt once (its KV cache repeated for the G completions
of its group, as ``shared_prompt_logprobs`` does for the loss) and then decodes token by token in
``core.decoding.decode``: the same forwards, processors and random draws as transformers' ``generate`` (the
tests check it token for token), without running every prompt G times, its matmuls in the layout a CPU runs
faster for a few rows (``few_row_linears``). A model whose forward
returns no usable cache (Unsloth's patched forward on a GPU) samples through ``generate``. LoRA
adapters are folded into their base weights while sampling (``merged_lora``: one matmul a layer, the
same policy up to float rounding).

Sampling is on-policy by construction: ``sampling_config`` spells out every knob, so the
samples come from softmax(logits / temperature) and nothing else, whatever the model's own
``generation_config`` says (Qwen2.5 ships ``repetition_penalty=1.1``, ``top_k=20``,
``top_p=0.8``; transformers would apply them to any knob left unset). Generation stops at
every eos the model names (Qwen has two), not only the tokenizer's. The TRL backend gets the same
neutral defaults while it trains (``trl_base.NeutralGenerationDefaults``): TRL's sampler leaves
``no_repeat_ngram_size`` unset and ``min_p`` at None, which the model's config would fill.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from transformers import GenerationConfig

from sdpo_kit.core.decoding import decode, few_row_linears
from sdpo_kit.core.unsloth_patches import fit_to_unsloth


def render_prompts(tokenizer, prompts) -> list[str]:
    """Chat-template each conversational prompt; plain strings pass through."""
    out = []
    for p in prompts:
        if isinstance(p, str):
            out.append(p)
        else:
            out.append(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False))
    return out


def encode_prompts(tokenizer, prompts, device=None) -> dict[str, torch.Tensor]:
    """Left-padded ``input_ids`` / ``attention_mask`` of shape (B, P)."""
    texts = render_prompts(tokenizer, prompts)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    return {k: v.to(device) if device is not None else v for k, v in enc.items()}


class SharePromptUnsupported(ValueError):
    """The shared-prompt forward cannot serve this model: gradient checkpointing drops the KV
    cache, its forward returns none, or its log-probs disagree with the plain forward's."""


@dataclass
class Rollout:
    """A batch of sampled sequences; completions are right-padded after the eos."""

    prompt_ids: torch.Tensor        # (B, P) left-padded
    prompt_mask: torch.Tensor       # (B, P)
    completion_ids: torch.Tensor    # (B, T) right-padded with pad_token_id
    completion_mask: torch.Tensor   # (B, T) 1 up to and including the first eos
    texts: list[str]                # decoded completions, special tokens removed
    sampler_logprobs: torch.Tensor | None = None   # (B, T) log p of each drawn token (``return_logprobs``)


def completion_mask_from_eos(completion_ids: torch.Tensor, eos_token_id) -> torch.Tensor:
    """1 for tokens up to and including the first eos, 0 after it (TRL's convention).

    ``eos_token_id``: one id or a list of ids (any of them ends the completion)."""
    eos = torch.as_tensor(eos_token_id, device=completion_ids.device).reshape(-1)  # (E,)
    is_eos = torch.isin(completion_ids, eos)                                  # (B, T)
    T = completion_ids.size(1)
    first = torch.where(is_eos.any(1), is_eos.float().argmax(1), torch.full_like(is_eos[:, 0], T, dtype=torch.long))  # (B,)
    pos = torch.arange(T, device=completion_ids.device).expand_as(completion_ids)  # (B, T)
    return (pos <= first.unsqueeze(1)).long()                                 # (B, T)


def eos_token_ids(model, tokenizer) -> list[int]:
    """The tokenizer's eos and every eos the model's generation config names, in that order."""
    ids = []
    for value in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if value is not None:
            ids += [int(value)] if isinstance(value, int) else [int(v) for v in value]
    return list(dict.fromkeys(ids))


def sampling_config(model, tokenizer, *, max_new_tokens: int, do_sample: bool = True, temperature: float = 1.0,
                    top_k: int = 0, top_p: float = 1.0) -> GenerationConfig:
    """A complete ``GenerationConfig``: plain sampling at ``temperature`` (or greedy), no top-k
    (``top_k=0``) or top-p (1.0) unless asked, no repetition penalty (1.0), no min-p, and the
    model's full eos list. Pass it to ``generate`` inside ``neutral_generation_defaults(model)``."""
    config = GenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=do_sample, num_beams=1, repetition_penalty=1.0,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=eos_token_ids(model, tokenizer),
        bos_token_id=getattr(tokenizer, "bos_token_id", None),
    )
    if do_sample:
        config.update(temperature=temperature, top_k=top_k or 0, top_p=1.0 if top_p is None else top_p)
    return config


def generation_model(model):
    """The transformers model whose ``generate`` runs (a PEFT model's base model)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@contextlib.contextmanager
def neutral_generation_defaults(model):
    """Swap the model's ``generation_config`` for a neutral one while sampling.

    transformers fills every knob a ``GenerationConfig`` leaves unset (``min_p``,
    ``no_repeat_ngram_size``, ``suppress_tokens``, ...) from ``model.generation_config``;
    with a neutral one in its place, only transformers' own do-nothing defaults are left.
    The model's config is given back afterwards, unchanged.
    """
    hf = generation_model(model)
    original = getattr(hf, "generation_config", None)
    if original is None:
        yield model
        return
    hf.generation_config = GenerationConfig(pad_token_id=original.pad_token_id, eos_token_id=original.eos_token_id,
                                            bos_token_id=original.bos_token_id)
    try:
        yield model
    finally:
        hf.generation_config = original


@torch.no_grad()
def sample(model, tokenizer, prompts, *, max_new_tokens: int, do_sample: bool = True,
           temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
           num_return_sequences: int = 1, return_logprobs: bool = False) -> Rollout:
    """Sample completions for ``prompts``; each prompt repeated ``num_return_sequences``
    times in a row (the layout ``group_advantages`` expects: G rows per prompt).

    On-policy: ``sampling_config`` (plain softmax at ``temperature``, the model's own
    generation defaults ignored); ``do_sample=False`` decodes greedily. ``return_logprobs``: the rollout's
    ``sampler_logprobs`` (B, T), each drawn token's log-probability under the model that drew it (0 after its
    eos): what a correction needs when that model is not the one trained (``core.sampler_copy``)."""
    from sdpo_kit.core.utils import eval_mode

    model = fit_to_unsloth(model)   # a model Unsloth did not load, beside one it did (core.unsloth_patches)
    device = next(model.parameters()).device
    enc = encode_prompts(tokenizer, prompts, device)
    G = num_return_sequences
    prompt_ids = enc["input_ids"].repeat_interleave(G, 0)                        # (B, P)
    prompt_mask = enc["attention_mask"].repeat_interleave(G, 0)                  # (B, P)
    config = sampling_config(model, tokenizer, max_new_tokens=max_new_tokens, do_sample=do_sample,
                             temperature=temperature, top_k=top_k, top_p=top_p)
    with eval_mode(model), neutral_generation_defaults(model), merged_lora(model), few_row_linears(model):
        decoded = decode(model, enc["input_ids"], enc["attention_mask"], config, G, return_logprobs)  # None: no cache
        completion_ids, logprobs = decoded if return_logprobs and decoded is not None else (decoded, None)
        if completion_ids is None and return_logprobs:
            raise ValueError("return_logprobs needs sampling's own decoding loop, and this model's forward returns "
                             "no KV cache it can use")
        if completion_ids is None:   # no usable KV cache: transformers' generate, every prompt G times
            out = model.generate(input_ids=prompt_ids, attention_mask=prompt_mask, generation_config=config)
            completion_ids = out[:, prompt_ids.size(1):]                         # (B, T)
    completion_mask = completion_mask_from_eos(completion_ids, config.eos_token_id)  # (B, T)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    if logprobs is not None:
        logprobs = logprobs * completion_mask                                     # (B, T)
    return Rollout(prompt_ids, prompt_mask, completion_ids, completion_mask, texts, logprobs)


def mergeable_lora_layers(model) -> list | None:
    """The model's LoRA layers as ``[(layer, adapter)]`` when ``merged_lora`` can fold every one of them
    into its base weight; None when there is nothing to fold or one cannot be folded exactly: a base that
    is not a plain fp32 ``nn.Linear`` (Unsloth's 4-bit, bf16 on a GPU), DoRA or another variant, a LoRA bias, more
    than one active adapter, adapters already merged or switched off (inside ``disable_adapter``: the model
    runs without them), or a model without PEFT's ``disable_adapter``."""
    if not hasattr(model, "disable_adapter"):
        return None
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:
        return None
    layers = []
    for module in model.modules():
        if not isinstance(module, LoraLayer):
            continue
        base, active = module.get_base_layer(), list(module.active_adapters)
        if (type(base) is not torch.nn.Linear or base.weight.dtype != torch.float32 or module.merged
                or module.disable_adapters
                or len(active) != 1 or active[0] in getattr(module, "lora_variant", {})
                or active[0] not in module.lora_A or getattr(module, "lora_bias", {}).get(active[0])):
            return None
        layers.append((module, active[0]))
    return layers or None


@contextlib.contextmanager
def merged_lora(model):
    """Sample through LoRA adapters folded into their base weights: one matmul a layer instead of three.

        W' = W + s B A      (out, in), s = lora_alpha / r: PEFT's ``get_delta_weight``
        x W'^T = x W^T + s (x A^T) B^T      the same function, up to float rounding

    Each base ``weight`` is swapped for a new tensor W' (never written in place: the frozen base keeps its
    bits, and the original Parameter objects come back afterwards), and the adapters are switched off
    (``disable_adapter``) while the block runs. With r = 16 on every projection of SmolLM2-135M this cuts
    a decoding step's 630 matmuls to 210 (benchmarks/results/real_decode.json times sampling folded and not, on
    the same sampled rows). A model ``mergeable_lora_layers``
    refuses passes through unchanged. For sampling and evaluation only (no gradients reach W')."""
    layers = mergeable_lora_layers(model)
    if layers is None:
        yield model
        return
    swapped = []
    try:
        with torch.no_grad():
            for layer, adapter in layers:
                base = layer.get_base_layer()
                swapped.append((base, base.weight))
                base.weight = torch.nn.Parameter(base.weight + layer.get_delta_weight(adapter), requires_grad=False)
        with model.disable_adapter():
            yield model
    finally:
        for base, weight in swapped:
            base.weight = weight


def generate_completions(model, tokenizer, prompts, *, max_new_tokens: int,
                         do_sample: bool = False, **kwargs) -> list[str]:
    """Decoded completions, one per prompt (greedy by default)."""
    return sample(model, tokenizer, prompts, max_new_tokens=max_new_tokens,
                  do_sample=do_sample, **kwargs).texts


def completion_logits(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """The logits that predict each completion token, (B, T, V): position t predicts o_t.

    Positions come from the attention mask, as in ``generate``, so left padding does not
    shift the positions the model saw while sampling. Only the last T + 1 positions' logits
    are computed (``logits_to_keep``).
    """
    input_ids = torch.cat([prompt_ids, completion_ids], 1)                    # (B, P+T)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)              # (B, P+T)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)                # (B, P+T)
    T = completion_ids.size(1)
    logits = model(input_ids=input_ids, attention_mask=attention_mask,
                   position_ids=position_ids, logits_to_keep=T + 1).logits    # (B, T+1, V)
    return logits[:, :-1]                                                      # (B, T, V)


def completion_logprobs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                        completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                        temperature: float = 1.0) -> torch.Tensor:
    """log pi(o_t | q, o_<t) for every completion token, shape (B, T) (``completion_logits``)."""
    from sdpo_kit.core.logprobs import token_logprobs

    logits = completion_logits(model, prompt_ids, prompt_mask, completion_ids, completion_mask)  # (B, T, V)
    return token_logprobs(logits, completion_ids, temperature)                 # (B, T)


def shared_prompt_logprobs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                           completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                           group_size: int, temperature: float = 1.0) -> torch.Tensor:
    """``completion_logprobs`` for G completions per prompt, running each prompt once.

    GRPO batches hold every prompt G times in a row. The plain forward runs the prompt
    G times; here the B/G distinct prompts run once (with gradients), their key/value cache
    is repeated G times, and only the completion tokens run on top of it:

        h(q) computed once  ->  cache repeated G times  ->  log pi(o_t | q, o_<t) for each o

    Same values and the same gradients (autograd sums the G copies back into the one
    prompt pass); about (P + T) / (P/G + T) times fewer tokens through the model. Needs the
    model's cache in the training forward, so it refuses a model with gradient checkpointing
    (which drops the cache) with ``SharePromptUnsupported``; use ``completion_logprobs``
    there. Rows that are not groups of G identical prompts raise a plain ``ValueError``.
    Shape: (B, T).
    """
    from sdpo_kit.core.logprobs import token_logprobs

    if getattr(model, "is_gradient_checkpointing", False):
        raise SharePromptUnsupported("shared_prompt_logprobs needs the KV cache, which gradient checkpointing "
                         "drops; call completion_logprobs instead")
    B, P = prompt_ids.shape
    G, T = group_size, completion_ids.size(1)
    if G < 1 or B % G:
        raise ValueError(f"batch of {B} rows is not a whole number of groups of {G}")
    n = B // G
    q_ids, q_mask = prompt_ids[::G], prompt_mask[::G]                          # (n, P)
    if not (torch.equal(prompt_ids.view(n, G, P), q_ids.unsqueeze(1).expand(n, G, P))
            and torch.equal(prompt_mask.view(n, G, P), q_mask.unsqueeze(1).expand(n, G, P))):
        raise ValueError(f"rows are not groups of {G} identical prompts in a row")
    q_pos = (q_mask.cumsum(-1) - 1).clamp(min=0)                               # (n, P)
    out = model(input_ids=q_ids, attention_mask=q_mask, position_ids=q_pos,
                use_cache=True, logits_to_keep=1)
    first = out.logits[:, -1:].repeat_interleave(G, 0)                         # (B, 1, V) predicts o_1
    if T == 1:
        return token_logprobs(first, completion_ids, temperature)              # (B, 1)
    cache = out.past_key_values
    # e.g. a patched forward that skips the cache, or returns the legacy tuple (Unsloth's, on a GPU)
    if cache is None or not hasattr(cache, "get_seq_length") or cache.get_seq_length() != P:
        raise SharePromptUnsupported("the model's forward returned no KV cache for the prompt; "
                         "call completion_logprobs instead")
    cache.batch_repeat_interleave(G)                                           # (B, heads, P, d) per layer
    mask = torch.cat([prompt_mask, completion_mask], 1)                        # (B, P+T)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, P:]                            # (B, T)
    rest = model(input_ids=completion_ids[:, :-1], attention_mask=mask[:, :-1],
                 position_ids=pos[:, :-1], past_key_values=cache, use_cache=True).logits  # (B, T-1, V)
    return token_logprobs(torch.cat([first, rest], 1), completion_ids, temperature)  # (B, T)
