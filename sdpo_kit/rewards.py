"""Reward functions with TRL's signature: ``fn(prompts, completions, **columns) -> list[float]``.

``completions`` are strings or chat message lists (TRL passes lists of
``{"role": "assistant", "content": ...}`` for conversational datasets); every reward here
takes both. Dataset columns arrive as keyword lists, one entry per completion.

Verifiable rewards never crash on empty or garbage text: they score it 0.0.

A reward function may declare the dataset columns it needs with a ``required_columns``
attribute; ``check_columns`` turns a missing column into an error that names both.

Model-scored rewards (``inverse_loss_reward``, ``coverage_weighted_ce_reward``,
``answer_likelihood_reward``) are batched: sequences are padded, one forward pass per
micro-batch under ``torch.no_grad()``, never a Python loop of single forwards. The scorer is
put in eval mode while it scores (no dropout) and restored afterwards.

``make_reward(config, model, tokenizer, task)`` builds reward functions from config dicts
(``{"type": "inverse_loss" | "supervised" | ..., "answer_field": "answer", ...}``).

Dimension letters: ``B`` completions in a micro-batch, ``P`` context tokens, ``T`` scored
tokens, ``L`` sequence length, ``V`` vocabulary.

Left out on purpose: learned reward models (sequence classifiers); model-scored rewards
below score with a causal LM instead.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
from collections.abc import Callable, Iterable, Sequence

import torch

from .generation import completion_logprobs, render_prompts
from .losses import masked_mean
from .tasks import completion_text, extract_answer

RewardFunc = Callable[..., list[float]]


# ---------------------------------------------------------------------------------------
# naming, column checks and safe calling (shared by the scratch loop and the TRL path)
# ---------------------------------------------------------------------------------------
def reward_name(fn) -> str:
    """A readable name for a reward function (TRL logs rewards under this name too)."""
    return getattr(fn, "__name__", None) or type(fn).__name__


def required_columns(fn) -> tuple[str, ...]:
    return tuple(getattr(fn, "required_columns", ()))


def check_columns(columns: Iterable[str], reward_funcs: Sequence[RewardFunc]) -> None:
    """Fail early, naming the column and the reward, when a dataset lacks what a reward needs."""
    columns = set(columns)
    if "prompt" not in columns:
        raise ValueError(f"dataset has no 'prompt' column (columns: {sorted(columns)})")
    for fn in reward_funcs:
        for col in required_columns(fn):
            if col not in columns:
                raise ValueError(
                    f"reward {reward_name(fn)!r} needs the dataset column {col!r}, "
                    f"which is missing (columns: {sorted(columns)})"
                )


class RewardError(RuntimeError):
    """A reward function raised, or returned something that is not a finite float per completion."""


def call_reward(fn: RewardFunc, prompts, completions, **columns) -> list[float]:
    """Call one reward function and check what it returns.

    Raises ``RewardError`` naming the function when it raises (the original traceback is
    chained), returns the wrong number of values, or returns NaN / inf.
    """
    name = reward_name(fn)
    try:
        values = fn(prompts=prompts, completions=completions, **columns)
    except Exception as e:  # keep the traceback, add the name
        raise RewardError(f"reward function {name!r} raised {type(e).__name__}: {e}") from e
    values = list(values)
    if len(values) != len(completions):
        raise RewardError(f"reward function {name!r} returned {len(values)} values for {len(completions)} completions")
    out = []
    for i, v in enumerate(values):
        v = float("nan") if v is None else float(v)
        if not math.isfinite(v):
            raise RewardError(f"reward function {name!r} returned {v} for completion {i}: {completions[i]!r}")
        out.append(v)
    return out


def checked(fn: RewardFunc) -> RewardFunc:
    """Wrap ``fn`` so TRL's trainer gets the same named errors as the scratch loop."""

    @functools.wraps(fn)
    def wrapper(prompts, completions, **columns):
        return call_reward(fn, prompts, completions, **columns)

    wrapper.__name__ = reward_name(fn)
    return wrapper


def compute_rewards(reward_funcs: Sequence[RewardFunc], prompts, completions, columns: dict,
                    weights: Sequence[float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Score completions with every reward function.

    Returns ``(total, per_func)``: (B,) weighted sum and (B, F) one column per function.
    """
    per_func = torch.tensor(
        [call_reward(fn, prompts, completions, **columns) for fn in reward_funcs], dtype=torch.float32
    ).T                                                                        # (B, F)
    w = torch.tensor(weights if weights is not None else [1.0] * len(reward_funcs))  # (F,)
    return per_func @ w, per_func                                               # (B,), (B, F)


# ---------------------------------------------------------------------------------------
# verifiable rewards
# ---------------------------------------------------------------------------------------
def _normalise(ans: str) -> str:
    return ans.strip().rstrip(".").replace(",", "").strip()


def exact_match_reward(answer_field: str = "answer", tagged: bool = False) -> RewardFunc:
    """1.0 when the completion's answer equals the dataset's answer, else 0.0.

    Plain: the answer is the completion's first line. Tagged: the content of the first
    ``<answer>...</answer>``; no tags scores 0.
    """

    def exact_match(prompts, completions, **columns) -> list[float]:
        answers = columns[answer_field]
        out = []
        for c, a in zip(completions, answers):
            got = extract_answer(completion_text(c), tagged)
            out.append(float(got is not None and _normalise(got) == _normalise(str(a))))
        return out

    exact_match.required_columns = (answer_field,)
    exact_match.__name__ = "tagged_exact_match" if tagged else "exact_match"
    return exact_match


def tag_format_reward(tag: str = "answer") -> RewardFunc:
    """1.0 when the completion holds exactly one well-formed ``<tag>...</tag>`` with text inside."""
    open_t, close_t = f"<{tag}>", f"</{tag}>"

    def tag_format(prompts, completions, **columns) -> list[float]:
        out = []
        for c in completions:
            t = completion_text(c)
            i, j = t.find(open_t), t.find(close_t)
            ok = (t.count(open_t) == 1 and t.count(close_t) == 1 and i < j
                  and t[i + len(open_t):j].strip() != "")
            out.append(float(ok))
        return out

    tag_format.__name__ = f"{tag}_format"
    return tag_format


def format_and_match_reward(answer_field: str = "answer", format_weight: float = 0.2) -> RewardFunc:
    """``format_weight * tag_format + (1 - format_weight) * tagged_exact_match``, in [0, 1]."""
    fmt, match = tag_format_reward(), exact_match_reward(answer_field, tagged=True)

    def format_and_match(prompts, completions, **columns) -> list[float]:
        f = fmt(prompts, completions, **columns)
        m = match(prompts, completions, **columns)
        return [format_weight * a + (1 - format_weight) * b for a, b in zip(f, m)]

    format_and_match.required_columns = (answer_field,)
    return format_and_match


# ---------------------------------------------------------------------------------------
# model-scored rewards (the seed's two, and a sounder supervised one)
# ---------------------------------------------------------------------------------------
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


@contextlib.contextmanager
def _eval_mode(model):
    """Score without dropout; give the model back in the mode it came in."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


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
    with _eval_mode(model):
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
    """The seed's unsupervised reward: minus the mean cross-entropy of the completion given the prompt.

    For a prompt q (chat prompts rendered with the tokenizer's chat template) and a completion
    o of |o| tokens, scored by the model p:

        R(o) = -CE(o | q) = (1/|o|) sum_{t=1}^{|o|} log p(o_t | q, o_<t),     R(empty) = 0.0

    so R <= 0, and higher means "more likely under the scorer". The completion is its text
    only (no eos appended), as in the seed. Prompt and completion are tokenized separately
    without special tokens and concatenated; for the tiny lab's character tokenizer this is
    token for token the seed's ``tokenizer(prompt + completion)`` and its slice
    ``token_losses[prompt_length - 1:]`` (a tokenizer that adds a BOS would shift the seed's
    slice by one, also scoring the prompt's last token). With an empty prompt the first
    completion token has nothing to be predicted from and is left out (the seed would score
    only the last token there).

    Batched: one forward per ``micro_batch_size`` completions, under ``torch.no_grad()``.

    ``scorer="policy"`` (the seed) scores with the model being trained; ``"frozen"`` with a
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
    inputs = _encode(tokenizer, completions, add_special_tokens=True)  # the seed: tokenizer(completion)
    comp_tokens = _encode(tokenizer, completions)                      # the seed: add_special_tokens=False
    ans_tokens = _encode(tokenizer, answers)
    # logits[:-1] has len(inputs) - 1 positions; min_len == 0 scores 0.0 with no forward
    min_len = [min(max(len(x) - 1, 0), len(a)) for x, a in zip(inputs, ans_tokens)]
    out = [0.0] * len(completions)
    rows = [i for i, m in enumerate(min_len) if m > 0]
    with _eval_mode(model):
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
    """The seed's supervised reward, exactly as its formula reads.

    Run the model on the completion tokens c_1..c_n ALONE (no prompt), keep the shifted
    logits z_1..z_{n-1} (z_k is the prediction made after reading c_1..c_k) and score them
    against the answer tokens a_1..a_|a| position by position:

        m        = min(n - 1, |a|)
        CE       = -(1/m) sum_{k=1}^{m} log softmax(z_k)[a_k]
        coverage = min(1, n / |a|)
        R        = -CE * coverage,        R = 0.0 when m == 0 (either side empty, or n == 1)

    Kept literal: the model input is ``tokenizer(completion)`` with the tokenizer's default
    ``add_special_tokens`` and the coverage counts ``tokenizer(completion,
    add_special_tokens=False)``, as in the seed; the tiny lab's character tokenizer adds no
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


# ---------------------------------------------------------------------------------------
# factory from config
# ---------------------------------------------------------------------------------------
def _exact_match_from_config(model, tokenizer, task, answer_field="answer", tagged=None):
    if tagged is None:  # follow the task: a tagged task's answers live in <answer> tags
        tagged = bool(getattr(task, "tagged", False))
    return exact_match_reward(answer_field, tagged=tagged)


# type -> (builder(model, tokenizer, task, **options), needs a model and tokenizer)
_REWARD_TYPES: dict[str, tuple[Callable, bool]] = {
    "exact_match": (_exact_match_from_config, False),
    "tagged_exact_match": (lambda model, tokenizer, task, answer_field="answer":
                           exact_match_reward(answer_field, tagged=True), False),
    "tag_format": (lambda model, tokenizer, task, tag="answer": tag_format_reward(tag), False),
    "format_and_match": (lambda model, tokenizer, task, answer_field="answer", format_weight=0.2:
                         format_and_match_reward(answer_field, format_weight), False),
    "inverse_loss": (lambda model, tokenizer, task, scorer="policy", micro_batch_size=64:
                     inverse_loss_reward(model, tokenizer, scorer=scorer, micro_batch_size=micro_batch_size),
                     True),
    "supervised": (lambda model, tokenizer, task, answer_field="answer", scorer="policy", micro_batch_size=64:
                   coverage_weighted_ce_reward(model, tokenizer, answer_field, scorer=scorer,
                                               micro_batch_size=micro_batch_size), True),
    "answer_likelihood": (lambda model, tokenizer, task, answer_field="answer", separator=ANSWER_SEPARATOR,
                          scorer="policy", micro_batch_size=64:
                          answer_likelihood_reward(model, tokenizer, answer_field, separator=separator,
                                                   scorer=scorer, micro_batch_size=micro_batch_size), True),
}
_REWARD_TYPES["coverage_ce"] = _REWARD_TYPES["supervised"]  # alias: the seed calls it "supervised"
REWARD_TYPES = tuple(sorted(_REWARD_TYPES))


def make_reward(config: dict | str | Sequence[dict | str], model=None, tokenizer=None, task=None) -> list[RewardFunc]:
    """Reward functions from config entries; always returns a list (one per entry).

    An entry is a type name or a dict ``{"type": ..., **options}``:

        exact_match          answer_field="answer", tagged=None (None: the task's ``tagged``, else False)
        tagged_exact_match   answer_field="answer"
        tag_format           tag="answer"
        format_and_match     answer_field="answer", format_weight=0.2
        inverse_loss         scorer="policy" | "frozen", micro_batch_size=64     (needs model, tokenizer)
        supervised           answer_field="answer", scorer, micro_batch_size     (needs model, tokenizer)
        coverage_ce          alias of supervised (the seed's coverage-weighted CE)
        answer_likelihood    answer_field="answer", separator="\\nAnswer: ", scorer, micro_batch_size
                                                                                  (needs model, tokenizer)

    Weights are not an option here: pass them to ``compute_rewards`` / the trainers
    (``reward_weights``). Unknown types or options raise ``ValueError`` listing the valid ones.
    """
    entries = list(config) if isinstance(config, (list, tuple)) else [config]
    if not entries:
        raise ValueError("make_reward got an empty list of reward configs")
    out = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            entry = {"type": entry}
        if not isinstance(entry, dict) or "type" not in entry:
            raise ValueError(f"reward config {i} must be a type name or a dict with a 'type' key, got {entry!r}")
        options = {k: v for k, v in entry.items() if k != "type"}
        rtype = entry["type"]
        if rtype not in _REWARD_TYPES:
            raise ValueError(f"unknown reward type {rtype!r}; valid types: {', '.join(REWARD_TYPES)}")
        builder, needs_model = _REWARD_TYPES[rtype]
        accepted = [p for p in inspect.signature(builder).parameters if p not in ("model", "tokenizer", "task")]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            hint = " (weights go to compute_rewards / reward_weights)" if "weight" in unknown else ""
            raise ValueError(f"reward type {rtype!r} got unknown option(s) {unknown}; "
                             f"accepted: {accepted}{hint}")
        if needs_model and (model is None or tokenizer is None):
            raise ValueError(f"reward type {rtype!r} is scored by a model: pass model= and tokenizer= to make_reward")
        out.append(builder(model, tokenizer, task, **options))
    return out
