"""Test-time SDPO (Hübotter et al. 2026, "Reinforcement Learning via Self-Distillation"): train a
copy of the policy on one hard question until it discovers a solution.

    pi_0 <- a copy of the policy (the caller's model is never changed); AdamW on pi_0
    batch b = 1, 2, ...:   sample B attempts o_1..o_B ~ pi_{b-1}(. | q) from the plain question q;
                           score them (reward and feedback)
        any success:       stop; attempts = (b - 1) x B + the first success's index in the batch
        else:              steps_per_batch SDPO steps on q, then sample the next batch from the update

    one SDPO step, on the batch's failed attempts (B rows, T completion tokens, V vocabulary):
        student   s_t = pi(o_t | q, o_<t)                             logits (B, T, V), with gradients
        teacher   t_t = teacher(o_t | reprompt(q, f_i), o_<t)         logits (B, T, V), no gradients
                  f_i = attempt i's own feedback; an attempt without feedback has no teacher (mask 0)
        loss      sampled-token SDPO (``sdpo_loss``, mode "sampled_token"):
                  l_t = sg(log s_t - log t_t) * log s_t, mean over each attempt's tokens x mask, mean over B
                  (optional importance weight min(s_t / s_t^old, is_clip), s^old: the sampling policy)
    teacher: "base" the frozen original policy (the caller's model, read under no_grad), "ema" an EMA of
             the copy (``Teacher``, started at the original), "live" the copy itself

Discovery rate at k attempts: the fraction of questions with a success within their first k
attempts. ``discovery_curves`` measures it at equal attempts for best-of-k (the first success in a
stream of plain samples), multi-turn reprompting (``sdpo/multi_turn.py``, no training) and
test-time SDPO; ``hard_rows`` picks the hard questions (by default held-out ones the warm
start solves in under 10% of its samples; the paper's very hard questions are pass@64 < 0.03). The paper reports test-time SDPO reaching best-of-k's
discovery rate with about 3x fewer attempts.

The copy trains what the caller's model trains: every weight of a plain model, the adapters of a LoRA
model (its base is copied frozen). A quantized base (bitsandbytes 4- or 8-bit, Unsloth's default on a
GPU) is refused with the reason: it can be neither deep-copied safely nor trained; load it in 16 bits
with LoRA (``load_policy(name, load_in_4bit=False)``) and the copy trains its adapters.

Left out on purpose: a replay of earlier batches' attempts (each step reads the latest batch only),
top-k / full-logit distillation (the paper's test-time runs use the sampled-token loss), and
successful siblings as teachers (a success ends the run, so there never is one to distil).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from sdpo_kit.core.logprobs import tempered, token_logprobs
from sdpo_kit.core.sampling import completion_logits, encode_prompts, sample
from sdpo_kit.sdpo.loss import sdpo_loss
from sdpo_kit.sdpo.multi_turn import first_success, multi_turn_reprompting, score_completions
from sdpo_kit.sdpo.teacher import TEACHER_KINDS, Teacher
from sdpo_kit.text.reprompt import reprompt

TEMPLATE_KEYS = ("reprompt_template", "solution_template", "feedback_template")
METHODS = ("best_of_k", "multi_turn", "test_time_sdpo")
COMMON_KEYS = {"max_new_tokens", "temperature", "success_threshold"}      # discovery_curves' kwargs, by method
MULTI_TURN_KEYS = {"show_best_attempt"}
SDPO_KEYS = {"steps_per_batch", "learning_rate", "teacher", "teacher_update_rate", "is_clip"}


@dataclass
class TestTimeSDPOResult:
    """What test-time SDPO did on one question."""

    __test__ = False             # not a pytest class, whatever its name

    solved: bool
    attempts: int                # 1-based index of the first success in sampling order; the attempts drawn if none
    first_success: str | None    # its text
    losses: list[float] = field(default_factory=list)  # every SDPO step's loss, in order
    batches: int = 0             # batches sampled
    model: object = None         # the trained copy, with ``keep_model=True``


def _check(batch_size, max_attempts, steps_per_batch, learning_rate, teacher, teacher_update_rate, max_new_tokens,
           temperature, is_clip, templates) -> None:
    problems = [msg for bad, msg in (
        (batch_size < 1, f"batch_size must be >= 1, got {batch_size}"),
        (max_attempts < 1, f"max_attempts must be >= 1, got {max_attempts}"),
        (steps_per_batch < 0, f"steps_per_batch must be >= 0, got {steps_per_batch}"),
        (not learning_rate > 0, f"learning_rate must be > 0, got {learning_rate}"),
        (teacher not in TEACHER_KINDS, f"teacher must be one of {TEACHER_KINDS}, got {teacher!r}"),
        (not 0.0 <= teacher_update_rate <= 1.0, f"teacher_update_rate must be in [0, 1], got {teacher_update_rate}"),
        (max_new_tokens < 1, f"max_new_tokens must be >= 1, got {max_new_tokens}"),
        (not temperature > 0, f"temperature must be > 0, got {temperature}"),
        (is_clip is not None and not is_clip > 0, f"is_clip must be None or > 0, got {is_clip}"),
        (bool(set(templates) - set(TEMPLATE_KEYS)), f"unknown keyword(s) {sorted(set(templates) - set(TEMPLATE_KEYS))}: "
                                                    f"the templates are {TEMPLATE_KEYS}"),
    ) if bad]
    if problems:
        raise ValueError("test_time_sdpo: " + "; ".join(problems))


def is_quantized(model) -> bool:
    """Whether ``model`` (or the model inside a PEFT wrapper) holds quantized weights: bitsandbytes 4- or
    8-bit, as transformers marks them (``is_loaded_in_4bit`` / ``_8bit``) or as their parameters' classes say."""
    marked = any(getattr(m, "is_loaded_in_4bit", False) is True or getattr(m, "is_loaded_in_8bit", False) is True
                 for m in model.modules())
    return marked or any(type(p).__name__ in ("Params4bit", "Int8Params") for p in model.parameters())


def check_trainable_copy(model) -> None:
    """ValueError with the reason when test-time SDPO cannot train a copy of ``model`` (a quantized base)."""
    if is_quantized(model):
        raise ValueError("test_time_sdpo trains a copy of the policy on each question (the caller's model never "
                         "changes), and this model's base is quantized (bitsandbytes 4- or 8-bit: Unsloth's default "
                         "on a GPU), which can be neither copied safely nor trained. Load it in 16 bits with LoRA, "
                         "load_policy(name, load_in_4bit=False): the copy then trains its LoRA adapters only.")


def feedback_teacher_prompts(prompt, scores: Sequence[float], feedbacks: Sequence, *, success_threshold: float = 1.0,
                             **templates) -> tuple[list, torch.Tensor]:
    """The teacher's side of a test-time SDPO step on B attempts of ``prompt``: each failed attempt
    (score < ``success_threshold``) with feedback gets ``reprompt(prompt, None, its feedback)``; the
    others keep the plain prompt and no teacher. Returns (B teacher prompts, row mask (B,) float: 1 for
    a failed attempt with feedback)."""
    has = [s < success_threshold and isinstance(f, str) and f.strip() != "" for s, f in zip(scores, feedbacks)]
    prompts = [reprompt(prompt, None, f, **templates) if h else prompt for f, h in zip(feedbacks, has)]
    return prompts, torch.tensor(has, dtype=torch.float32)                                  # mask (B,)


def sdpo_step(student, optimizer, teacher_net, tokenizer, prompt, teacher_prompts: list, ro, row_mask: torch.Tensor,
              temperature: float, old_logp: torch.Tensor | None = None, is_clip: float | None = None) -> float:
    """One sampled-token SDPO step of ``student`` on B attempts ``ro`` of ``prompt``, each towards
    ``teacher_net`` reading its own teacher prompt; ``row_mask`` (B,) 0 for rows without a teacher.
    Returns the loss."""
    n, device = ro.completion_ids.size(0), ro.completion_ids.device
    s_enc = encode_prompts(tokenizer, [prompt] * n, device)                                 # (B, P)
    t_enc = encode_prompts(tokenizer, teacher_prompts, device)                              # (B, P')
    mask = ro.completion_mask * row_mask.to(device)[:, None]                                # (B, T)
    with torch.no_grad():
        t = tempered(completion_logits(teacher_net, t_enc["input_ids"], t_enc["attention_mask"], ro.completion_ids,
                                       ro.completion_mask), temperature)                    # (B, T, V)
    with torch.enable_grad():
        s = tempered(completion_logits(student, s_enc["input_ids"], s_enc["attention_mask"], ro.completion_ids,
                                       ro.completion_mask), temperature)                    # (B, T, V)
        loss, _ = sdpo_loss(s, t.to(s.dtype), ro.completion_ids, mask.to(s.dtype), mode="sampled_token",
                            old_logp=old_logp, is_clip=is_clip)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return loss.item()


def test_time_sdpo(model, tokenizer, prompt, reward_fn: Callable, *, columns: dict, batch_size: int = 8,
                   max_attempts: int = 64, steps_per_batch: int = 1, learning_rate: float = 1e-4,
                   teacher: str = "base", teacher_update_rate: float = 0.05, max_new_tokens: int = 8,
                   temperature: float = 1.0, success_threshold: float = 1.0, is_clip: float | None = None,
                   keep_model: bool = False, **templates) -> TestTimeSDPOResult:
    """Test-time SDPO on one question (module docstring) until a success or ``max_attempts``.

    ``reward_fn``: a TRL-signature reward (floats or ``{"score", "feedback"}``); ``columns`` its
    dataset columns for this one row (``{"answer": "9"}``); ``templates``: ``reprompt_template``,
    ``solution_template``, ``feedback_template`` for the teacher's reprompt (``reprompt.reprompt``).
    The last batch is cut to the attempts left; no steps follow it. ``steps_per_batch=0`` trains
    nothing (best-of-k in batches: a control). A batch whose failures all lack feedback trains nothing.
    The copy trains the parameters that require gradients in ``model`` (all, when none does): a LoRA
    model's adapters. A quantized base is refused (``check_trainable_copy``: the module docstring).
    ``keep_model``: the result holds the trained copy (else it is dropped)."""
    _check(batch_size, max_attempts, steps_per_batch, learning_rate, teacher, teacher_update_rate, max_new_tokens,
           temperature, is_clip, templates)
    check_trainable_copy(model)
    student = copy.deepcopy(model)                               # pi_0: the caller's model stays as it is
    if not any(p.requires_grad for p in student.parameters()):   # a frozen model: train all of the copy
        student.requires_grad_(True)                             # (else what the caller trains: a LoRA, say)
    optimizer = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=learning_rate)
    ema = Teacher(student, teacher, teacher_update_rate) if teacher != "base" else None   # ema: copy; live: student
    drawn, batches, losses = 0, 0, []
    while drawn < max_attempts:
        b = min(batch_size, max_attempts - drawn)
        ro = sample(student, tokenizer, [prompt], max_new_tokens=max_new_tokens, temperature=temperature,
                    num_return_sequences=b)                                                 # (b, T)
        _, scores, feedbacks = score_completions(reward_fn, prompt, ro.texts, columns)
        batches += 1
        hit = next((i for i, s in enumerate(scores) if s >= success_threshold), None)
        if hit is not None:
            return TestTimeSDPOResult(True, drawn + hit + 1, ro.texts[hit], losses, batches,
                                      student if keep_model else None)
        drawn += b
        if drawn >= max_attempts or not steps_per_batch:     # no step follows this batch: no teacher to build
            continue
        teacher_prompts, row_mask = feedback_teacher_prompts(prompt, scores, feedbacks,
                                                             success_threshold=success_threshold, **templates)
        if not row_mask.any():
            continue
        old_logp = None
        if is_clip is not None:   # the sampling policy's log-probs, for the importance weight
            enc = encode_prompts(tokenizer, [prompt] * b, ro.completion_ids.device)
            with torch.no_grad():
                old_logp = token_logprobs(completion_logits(student, enc["input_ids"], enc["attention_mask"],
                                                            ro.completion_ids, ro.completion_mask),
                                          ro.completion_ids, temperature)                   # (b, T)
        for _ in range(steps_per_batch):
            with (ema.forward() if ema is not None else contextlib.nullcontext(model)) as net:
                losses.append(sdpo_step(student, optimizer, net, tokenizer, prompt, teacher_prompts, ro, row_mask,
                                        temperature, old_logp, is_clip))
            if ema is not None:
                ema.optimizer_step()                           # ema: t <- (1 - rate) t + rate pi; live, base: nothing
    return TestTimeSDPOResult(False, drawn, None, losses, batches, student if keep_model else None)


test_time_sdpo.__test__ = False   # a library function, not a pytest test, wherever it is imported


def _split_kwargs(kwargs: dict) -> tuple[dict, dict, dict]:
    """(for every method, multi-turn only, test-time SDPO only) from ``discovery_curves``' kwargs."""
    unknown = set(kwargs) - COMMON_KEYS - set(TEMPLATE_KEYS) - MULTI_TURN_KEYS - SDPO_KEYS
    if unknown:
        raise ValueError(f"discovery_curves: unknown keyword(s) {sorted(unknown)}; it takes "
                         f"{sorted(COMMON_KEYS | set(TEMPLATE_KEYS) | MULTI_TURN_KEYS | SDPO_KEYS)}")
    common = {k: v for k, v in kwargs.items() if k in COMMON_KEYS}
    tpl = {k: v for k, v in kwargs.items() if k in TEMPLATE_KEYS}
    return (common, {**tpl, **{k: v for k, v in kwargs.items() if k in MULTI_TURN_KEYS}},
            {**tpl, **{k: v for k, v in kwargs.items() if k in SDPO_KEYS}})


def discovery_curves(model, tokenizer, task, rows: Sequence[dict], reward_fn: Callable, *, budgets: Sequence[int],
                     batch_size: int = 8, seed: int = 0, methods: Sequence[str] = METHODS, **kwargs) -> dict:
    """Discovery rate at each k in ``budgets`` for each method, all at K = max(budgets) attempts:

        best_of_k       the first success in a stream of K plain samples (batch_size a call)
        multi_turn      ``multi_turn_reprompting`` with n = batch_size, rounds = K / batch_size
        test_time_sdpo  ``test_time_sdpo`` with batch_size, max_attempts = K

    Row i is run under ``torch.manual_seed(seed + i)`` by every method. ``kwargs``:
    ``max_new_tokens`` (default: the task's), ``temperature``, ``success_threshold``, the templates,
    and either method's own knobs (``show_best_attempt``; ``steps_per_batch``, ``learning_rate``,
    ``teacher``, ...). Returns ``{"budgets": sorted budgets, "rows", "batch_size", "max_attempts": K,
    "methods": {name: {"discovery": [rate at each k], "first_success": [attempt index or None per
    row], "max_attempts": the attempts that method was given}}}``."""
    budgets = sorted(set(budgets))
    if not budgets or any(not isinstance(k, int) or k < 1 for k in budgets):
        raise ValueError(f"budgets must be positive ints, got {budgets}")
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"methods must be a non-empty selection of {METHODS}, got {list(methods)}")
    K = budgets[-1]
    if batch_size < 1 or ("multi_turn" in methods and K % batch_size):
        raise ValueError(f"max(budgets) = {K} must be a multiple of batch_size = {batch_size} >= 1 so that "
                         f"multi-turn rounds use exactly the same attempts")
    common, multi_kw, sdpo_kw = _split_kwargs(kwargs)
    common.setdefault("max_new_tokens", task.max_completion_tokens())
    if "test_time_sdpo" in methods:
        check_trainable_copy(model)   # before any method runs, not after the others' attempts

    def run(method: str, row: dict) -> int | None:
        prompt, columns = row["prompt"], {task.answer_column: row[task.answer_column]}
        if method == "best_of_k":
            return first_success(model, tokenizer, prompt, reward_fn, columns=columns, n=K, batch_size=batch_size,
                                 **common)
        if method == "multi_turn":
            res = multi_turn_reprompting(model, tokenizer, prompt, reward_fn, columns=columns, n=batch_size,
                                         rounds=K // batch_size, **common, **multi_kw)
            return res.attempts if res.solved else None
        res = test_time_sdpo(model, tokenizer, prompt, reward_fn, columns=columns, batch_size=batch_size,
                             max_attempts=K, **common, **sdpo_kw)
        return res.attempts if res.solved else None

    out = {"budgets": budgets, "rows": len(rows), "batch_size": batch_size, "max_attempts": K, "methods": {}}
    for method in methods:
        firsts = []
        for i, row in enumerate(rows):
            torch.manual_seed(seed + i)
            firsts.append(run(method, row))
        given = (K // batch_size) * batch_size if method == "multi_turn" else K   # = K (checked above)
        out["methods"][method] = {
            "discovery": [sum(f is not None and f <= k for f in firsts) / max(1, len(rows)) for k in budgets],
            "first_success": firsts, "max_attempts": given}
    return out


@torch.no_grad()
def success_rates(model, tokenizer, task, rows: Sequence[dict], reward_fn: Callable, *, samples: int = 32,
                  seed: int = 0, max_new_tokens: int | None = None, temperature: float = 1.0,
                  success_threshold: float = 1.0, prompts_per_call: int | None = None) -> list[float]:
    """Per row, the share of ``samples`` plain samples that succeed (seeded once with ``seed``;
    ``prompts_per_call`` rows per ``sample`` call, default about 256 sequences a call)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    max_new_tokens = max_new_tokens or task.max_completion_tokens()
    chunk = prompts_per_call or max(1, 256 // samples)
    torch.manual_seed(seed)
    rates = []
    for c in range(0, len(rows), chunk):
        part = rows[c:c + chunk]
        texts = sample(model, tokenizer, [r["prompt"] for r in part], max_new_tokens=max_new_tokens,
                       temperature=temperature, num_return_sequences=samples).texts          # samples per row, in order
        for j, row in enumerate(part):
            _, scores, _ = score_completions(reward_fn, row["prompt"], texts[j * samples:(j + 1) * samples],
                                             {task.answer_column: row[task.answer_column]})
            rates.append(sum(s >= success_threshold for s in scores) / samples)
    return rates


def hard_rows(model, tokenizer, task, rows: Sequence[dict], reward_fn: Callable, *, samples: int = 32,
              below: float = 0.1, seed: int = 0, **kwargs) -> list[dict]:
    """The rows whose success rate over ``samples`` plain samples (``success_rates``, ``kwargs``
    to it) is under ``below`` (default 0.1; the paper's very hard questions are pass@64 < 0.03)."""
    rates = success_rates(model, tokenizer, task, rows, reward_fn, samples=samples, seed=seed, **kwargs)
    return [r for r, p in zip(rows, rates) if p < below]
