"""Model-scored rewards: a causal LM's likelihoods as the reward.

Two of them are this project's own proposals, not published methods, kept here as cases to study and
implemented exactly as their formulas read, flaws included: the unsupervised inverse loss
(``inverse_loss_reward``) and the supervised coverage-weighted cross-entropy
(``coverage_weighted_ce_reward``). The third, ``answer_likelihood_reward``, is a sounder supervised one.

Batched: sequences are padded, one forward pass per micro-batch under ``torch.no_grad()``,
never a Python loop of single forwards. The scorer is put in eval mode while it scores (no
dropout) and given back in the mode it came in (``utils.eval_mode``).

Dimension letters: ``B`` completions in a micro-batch, ``P`` context tokens, ``T`` scored
tokens, ``L`` sequence length, ``V`` vocabulary.

Left out on purpose: learned reward models (sequence classifiers); the PPO track adds one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from sdpo_kit.core.logprobs import masked_mean
from sdpo_kit.core.sampling import completion_logprobs, render_prompts
from sdpo_kit.core.utils import eval_mode
from sdpo_kit.rewards.core import RewardFunc
from sdpo_kit.text.answers import completion_text

SCORERS = ("policy", "frozen")


def _scorer_model(model, scorer: str):
    """The policy itself, or a frozen deep copy taken now (eval, no gradients)."""
    if scorer == "policy":
        return model
    if scorer == "frozen":
        return copy.deepcopy(model).eval().requires_grad_(False)
    raise ValueError(f"scorer must be one of {SCORERS}, got {scorer!r}")


def _check_micro_batch_size(micro_batch_size: int) -> int:
    if not isinstance(micro_batch_size, int) or micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be a positive int, got {micro_batch_size!r}")
    return micro_batch_size


def _encode(tokenizer, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
    """Token ids of each text (an empty text gives an empty list)."""
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=add_special_tokens)["input_ids"]]


def _pad_id(tokenizer) -> int:
    for tid in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return tid
    return 0


def _pad(seqs: Sequence[Sequence[int]], pad_id: int, side: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask), each (B, max len), padded on ``side``; a batch of empty rows gives width 0."""
    width = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)           # (B, L)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)                 # (B, L)
    for i, s in enumerate(seqs):
        if not s:
            continue
        sl = slice(0, len(s)) if side == "right" else slice(width - len(s), width)
        ids[i, sl] = torch.tensor(list(s), dtype=torch.long)
        mask[i, sl] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def _mean_target_logprob(model, tokenizer, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                         micro_batch_size: int) -> list[float]:
    """(1/|y|) sum_t log p(y_t | x, y_<t) for each (context x, target y) pair, batched.

    Contexts are left-padded and targets right-padded (positions from the attention mask,
    as in ``generation.completion_logprobs``), so the logits of every target sit in the
    last T + 1 positions and only those are computed. A row with no context cannot score its
    first target token (nothing to predict it from), so that token is left out; a row with
    nothing left to score gets 0.0 and no forward pass.
    """
    pad_id = _pad_id(tokenizer)
    device = next(model.parameters()).device
    out = [0.0] * len(targets)
    rows = [i for i, (x, y) in enumerate(zip(contexts, targets)) if len(y) - (len(x) == 0) > 0]
    with eval_mode(model):
        for start in range(0, len(rows), micro_batch_size):
            chunk = rows[start:start + micro_batch_size]
            ctx_ids, ctx_mask = _pad([contexts[i] for i in chunk], pad_id, "left", device)    # (B, P)
            tgt_ids, tgt_mask = _pad([targets[i] for i in chunk], pad_id, "right", device)    # (B, T)
            if ctx_ids.size(1) == 0:  # every context empty: the first target token becomes the context
                ctx_ids, ctx_mask = tgt_ids[:, :1], tgt_mask[:, :1]                           # (B, 1)
                tgt_ids, tgt_mask = tgt_ids[:, 1:], tgt_mask[:, 1:]                           # (B, T-1)
            score_mask = tgt_mask.clone()                                                     # (B, T)
            no_ctx = ctx_mask.sum(1) == 0                                                     # (B,)
            score_mask[no_ctx, 0] = 0  # nothing before it to predict it from
            logp = completion_logprobs(model, ctx_ids, ctx_mask, tgt_ids, tgt_mask)           # (B, T)
            means = masked_mean(logp.float(), score_mask, dim=1)                              # (B,)
            for i, v in zip(chunk, means.tolist()):
                out[i] = v
    return out


def inverse_loss_reward(model, tokenizer, *, scorer: str = "policy", micro_batch_size: int = 64) -> RewardFunc:
    """An unsupervised reward (this project's proposal, not a published method): minus the mean cross-entropy
    of the completion given the prompt.

    For a prompt q (chat prompts rendered with the tokenizer's chat template) and a completion
    o of |o| tokens, scored by the model p:

        R(o) = -CE(o | q) = (1/|o|) sum_{t=1}^{|o|} log p(o_t | q, o_<t),     R(empty) = 0.0

    so R <= 0, and higher means "more likely under the scorer". The completion is its text
    only (no eos appended). Prompt and completion are tokenized separately without special
    tokens and concatenated; for the tiny lab's character tokenizer this is token for token the
    one-example form, ``tokenizer(prompt + completion)`` and the slice ``token_losses[prompt_length - 1:]``
    (the reference in ``tests/test_rewards.py``; a tokenizer that adds a BOS would shift that slice by
    one, also scoring the prompt's last token). With an empty prompt the first completion token has
    nothing to be predicted from and is left out (that slice would score only the last token there).

    Batched: one forward per ``micro_batch_size`` completions, under ``torch.no_grad()``.

    ``scorer="policy"`` (the default, as proposed) scores with the model being trained; ``"frozen"`` with a
    deep copy taken now (eval mode, no gradients), which never moves.

    Why the self-scored version invites collapse: the reward is the policy's own likelihood
    of what it wrote. Within a group, the completions the policy already finds most likely
    get the positive advantages, GRPO makes them more likely still, and the next round scores
    exactly that text higher. Nothing outside the model anchors the loop, so the policy
    reinforces its own mode: entropy falls and samples drift to short, repetitive,
    degenerate, high-likelihood text whether or not it answers the question. The reward
    moves with the policy, so it can be gamed: raising it needs no better answers, only more
    confident ones. Note too that the empty completion's 0.0 is the best score possible. A
    frozen scorer stops the target from moving but still rewards typical text, not correct
    text; watch ``completion/mean_length`` and ``eval/accuracy``, not ``reward/mean``.
    """
    micro_batch_size = _check_micro_batch_size(micro_batch_size)
    scorer_model = _scorer_model(model, scorer)

    def inverse_loss(prompts, completions, **columns) -> list[float]:
        contexts = _encode(tokenizer, render_prompts(tokenizer, prompts))
        targets = _encode(tokenizer, [completion_text(c) for c in completions])
        return _mean_target_logprob(scorer_model, tokenizer, contexts, targets, micro_batch_size)

    inverse_loss.__name__ = "inverse_loss" if scorer == "policy" else f"inverse_loss_{scorer}"
    inverse_loss.scorer_model = scorer_model
    return inverse_loss


@torch.no_grad()
def _coverage_ce(model, tokenizer, completions: Sequence[str], answers: Sequence[str],
                 micro_batch_size: int) -> list[float]:
    """-CE(logits of the completion alone, answer tokens) * coverage, batched (see the reward)."""
    pad_id = _pad_id(tokenizer)
    device = next(model.parameters()).device
    inputs = _encode(tokenizer, completions, add_special_tokens=True)  # the formula's tokenizer(completion)
    comp_tokens = _encode(tokenizer, completions)                      # its coverage: add_special_tokens=False
    ans_tokens = _encode(tokenizer, answers)
    # logits[:-1] has len(inputs) - 1 positions; min_len == 0 scores 0.0 with no forward
    min_len = [min(max(len(x) - 1, 0), len(a)) for x, a in zip(inputs, ans_tokens)]
    out = [0.0] * len(completions)
    rows = [i for i, m in enumerate(min_len) if m > 0]
    with eval_mode(model):
        for start in range(0, len(rows), micro_batch_size):
            chunk = rows[start:start + micro_batch_size]
            M = max(min_len[i] for i in chunk)
            # causal: the logits at positions < M need only the first M input tokens
            ids, mask = _pad([inputs[i][:M] for i in chunk], pad_id, "right", device)      # (B, M)
            target, tmask = _pad([ans_tokens[i][:min_len[i]] for i in chunk], pad_id, "right", device)  # (B, M)
            logits = model(input_ids=ids, attention_mask=mask).logits                     # (B, M, V)
            logp_all = torch.log_softmax(logits.float(), dim=-1)                          # (B, M, V)
            logp = logp_all.gather(-1, target.unsqueeze(-1)).squeeze(-1)                   # (B, M)
            neg_ce = masked_mean(logp, tmask, dim=1)                                      # (B,)
            for i, v in zip(chunk, neg_ce.tolist()):
                coverage = min(1.0, len(comp_tokens[i]) / len(ans_tokens[i]))
                out[i] = v * coverage
    return out


def coverage_weighted_ce_reward(model, tokenizer, answer_field: str = "answer", *, scorer: str = "policy",
                                micro_batch_size: int = 64) -> RewardFunc:
    """A supervised reward (this project's proposal, not a published method), exactly as its formula reads.

    Run the model on the completion tokens c_1..c_n ALONE (no prompt), keep the shifted
    logits z_1..z_{n-1} (z_k is the prediction made after reading c_1..c_k) and score them
    against the answer tokens a_1..a_|a| position by position:

        m        = min(n - 1, |a|)
        CE       = -(1/m) sum_{k=1}^{m} log softmax(z_k)[a_k]
        coverage = min(1, n / |a|)
        R        = -CE * coverage,        R = 0.0 when m == 0 (either side empty, or n == 1)

    Kept literal: the model input is ``tokenizer(completion)`` with the tokenizer's default
    ``add_special_tokens`` and the coverage counts ``tokenizer(completion,
    add_special_tokens=False)``, as the formula has them; the tiny lab's character tokenizer adds no
    special tokens, so both are the completion's characters.

    Why not plain answer perplexity: ``ppl(prompt + answer)`` does not depend on the
    completion at all, so every completion of a group gets the same reward, the group
    advantage (r_i - mean_g r) / (std_g + eps) is exactly zero for all of them and GRPO
    learns nothing. This formula does vary with the completion, but it is odd: the logits
    after the completion's prefix c_1..c_k are compared with the answer token a_k at the
    same index, and the prompt is never seen. It rewards completions after whose prefixes the
    model happens to predict the answer's characters, which is not the completion being
    right. For a one-token answer it looks only at the completion's first token; every
    completion of one token scores 0.0, the best score possible. ``answer_likelihood_reward``
    is the sounder alternative.

    Batched: one forward per ``micro_batch_size`` scorable completions, under ``no_grad``.
    """
    micro_batch_size = _check_micro_batch_size(micro_batch_size)
    scorer_model = _scorer_model(model, scorer)

    def coverage_weighted_ce(prompts, completions, **columns) -> list[float]:
        texts = [completion_text(c) for c in completions]
        answers = ["" if a is None else str(a) for a in columns[answer_field]]
        return _coverage_ce(scorer_model, tokenizer, texts, answers, micro_batch_size)

    coverage_weighted_ce.required_columns = (answer_field,)
    coverage_weighted_ce.__name__ = "coverage_ce" if scorer == "policy" else f"coverage_ce_{scorer}"
    coverage_weighted_ce.scorer_model = scorer_model
    return coverage_weighted_ce


ANSWER_SEPARATOR = "\nAnswer: "


def answer_likelihood_reward(model, tokenizer, answer_field: str = "answer", *, separator: str = ANSWER_SEPARATOR,
                             scorer: str = "policy", micro_batch_size: int = 64) -> RewardFunc:
    """Mean log-likelihood of the answer given the prompt and the completion (a sounder supervised reward).

    The scorer reads the rendered prompt q, the completion o, a fixed ``separator`` s, and
    is asked for the answer a:

        R(o) = (1/|a|) sum_{k=1}^{|a|} log p(a_k | q, o, s, a_<k),      R = 0.0 when a is empty

    Unlike ``ppl(prompt + answer)`` it depends on the completion, so a group's rewards
    differ and GRPO has advantages to learn from; unlike the coverage-weighted CE it
    conditions on the prompt and scores the answer where an answer belongs, after the
    completion. An empty completion is scored like any other (the answer straight after the
    prompt), not given 0.0. Still a model's judgement: with ``scorer="policy"`` the target
    moves with the policy (the inverse loss's problem), so prefer ``scorer="frozen"``.

    Batched: one forward per ``micro_batch_size`` completions, under ``no_grad``.
    """
    micro_batch_size = _check_micro_batch_size(micro_batch_size)
    scorer_model = _scorer_model(model, scorer)

    def answer_likelihood(prompts, completions, **columns) -> list[float]:
        answers = ["" if a is None else str(a) for a in columns[answer_field]]
        rendered = render_prompts(tokenizer, prompts)
        q = _encode(tokenizer, rendered)
        o = _encode(tokenizer, [completion_text(c) for c in completions])
        s = _encode(tokenizer, [separator])[0] if separator else []
        contexts = [qi + oi + s for qi, oi in zip(q, o)]
        targets = _encode(tokenizer, answers)
        return _mean_target_logprob(scorer_model, tokenizer, contexts, targets, micro_batch_size)

    answer_likelihood.required_columns = (answer_field,)
    answer_likelihood.__name__ = "answer_likelihood" if scorer == "policy" else f"answer_likelihood_{scorer}"
    answer_likelihood.scorer_model = scorer_model
    return answer_likelihood


