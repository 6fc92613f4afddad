"""The offline tiny lab: a character-level tokenizer, a tiny Llama and its warm start.

Everything here is built in code, so CI and a laptop without a hub can run every notebook.

* ``build_tokenizer()``: one token per printable ASCII character plus newline and the chat
  specials ``<|im_start|>`` / ``<|im_end|>``; ``<|im_end|>`` ends a turn and is the eos that
  generation stops on. Any English text (SDPO reprompts, VAPOR tags) tokenizes with no
  unknown token.
* ``build_model()``: a ``LlamaForCausalLM`` of about 0.2M parameters (a Llama config, not
  Qwen2: ``AutoTokenizer`` would force Qwen2Tokenizer on reload and drop spaces).
* ``warm_start()``: a short, deterministic SFT, cached on disk, on the task plus examples that
  copy a solution shown in the prompt (``tasks.HINT_TEMPLATE``; the skill SDPO's reprompted
  teacher relies on), stopped early so held-out greedy accuracy stays in the middle and RL has
  room to show. ``LabConfig.copy_steps`` adds a copy-only phase (see its comment);
  ``LabConfig.context_steps`` is the SDPO skill lab's dial (``lab/skill.py``): steps on SDPO's
  teacher prompts joined to (or interleaved with) the task's, whose budget stays fixed.

Left out on purpose: BPE (a character vocabulary keeps the model tiny and every string
covered) and any download.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import string
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from sdpo_kit.core.cache import cache_dir
from sdpo_kit.core.config import ConfigError
from sdpo_kit.core.unsloth_patches import patched_by_unsloth, run_without_unsloth

IM_START, IM_END, PAD, UNK = "<|im_start|>", "<|im_end|>", "<pad>", "<unk>"
SPECIAL_TOKENS = [PAD, UNK, IM_START, IM_END]
CHARS = [c for c in string.printable if c not in "\t\r\x0b\x0c"]  # printable ASCII + "\n"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tokenizer():
    """Character-level ``PreTrainedTokenizerFast`` with a chat template; eos = ``<|im_end|>``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=IM_END,
        additional_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=256,
    )
    tok.padding_side = "left"
    return tok


@dataclass
class LabConfig:
    """Sizes of the tiny model and its warm start (all CPU-friendly)."""

    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    max_position_embeddings: int = 128
    # warm start
    task: str = "arithmetic"
    digits: int = 1
    terms: int = 3
    n_eval: int = 200
    sft_steps: int = 180        # the task (with copy_fraction hinted rows), stopped early: held-out acc mid-way
    # an optional copy-only phase (hinted prompts only). measured (benchmarks/bench_lab.py): 300 steps
    # first lift copy accuracy from ~0.1 to ~1.0 but weaken the GRPO demo's lift, so it is off by
    # default; the SDPO track, whose teacher copies a sibling's solution, turns it on.
    copy_steps: int = 0
    copy_first: bool = True     # the copy phase before (True) or after (False) the task phase
    copy_lr: float = 3e-3
    sft_batch_size: int = 64
    sft_lr: float = 3e-3
    copy_fraction: float = 0.3
    # the in-context-skill dial (the SDPO skill lab, lab/skill.py): SFT steps on SDPO teacher prompts
    # (a successful sibling's answer and / or digit feedback on a near miss, the right answer as the
    # target), joined to or interleaved with the sft_steps task steps (context_mix), whose budget stays the
    # same at every setting
    context_steps: int = 0
    # restart the task phase's schedule (a fresh AdamW, warm-up and decay) every this many task steps
    # (0: one schedule); context steps are shared out over the cycles. The skill lab (bench_sdpo_lab.py)
    # uses it: on long_addition one long schedule leaves the width-64 model near 0 held-out accuracy
    sft_cycle_steps: int = 0
    context_templates: str = "trl"   # the teacher prompts' templates (lab/skill.py TEMPLATES): trl | compact
    context_lr_scale: float = 1.0    # the context steps' learning rate, a multiple of the task's at that step
    # how context steps meet the task's: "interleave" (steps of their own, spread over the schedule) or
    # "joint" (a context batch added to each of the last context_steps task steps, one loss, one update:
    # the task's batches, steps and schedule are then exactly the same at every dial setting)
    context_mix: str = "interleave"
    context_feedback_share: float = 1 / 3   # the share of context rows that hold feedback only (lab/skill.py)
    seed: int = 0
    version: int = 3  # bump when the recipe changes, so stale caches are not reused (3: split by multiset)

    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def build_model(tokenizer, cfg: LabConfig | None = None, seed: int = 0):
    """A freshly initialised tiny ``LlamaForCausalLM`` (float32, CPU)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = cfg or LabConfig()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_attention_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    return model


def tokenize_sft(tokenizer, rows, device=None):
    """Right-padded (input_ids, labels, attention_mask), labels -100 outside the completion. One batched
    tokenizer call for the prompts, one for the completions (a warm start's pool holds 20,000 rows)."""
    from sdpo_kit.core.sampling import render_prompts

    prompts = render_prompts(tokenizer, [r["prompt"] for r in rows])
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    c_ids = tokenizer([r["completion"] for r in rows], add_special_tokens=False)["input_ids"]
    seqs = [p + c + [tokenizer.eos_token_id] for p, c in zip(p_ids, c_ids)]
    L = max(len(s) for s in seqs)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([s + [pad] * (L - len(s)) for s in seqs], dtype=torch.long)                  # (N, L)
    lab = torch.tensor([[-100] * len(p) + c + [tokenizer.eos_token_id] + [-100] * (L - len(p) - len(c) - 1)
                        for p, c in zip(p_ids, c_ids)], dtype=torch.long)                           # (N, L)
    att = torch.tensor([[1] * len(s) + [0] * (L - len(s)) for s in seqs], dtype=torch.long)          # (N, L)
    if device is not None:
        ids, lab, att = ids.to(device), lab.to(device), att.to(device)
    return ids, lab, att


def interleave(n_main: int, n_extra: int) -> list[bool]:
    """Which of ``n_main + n_extra`` steps are extra ones, spread evenly (True = extra)."""
    total = n_main + n_extra
    return [(i + 1) * n_extra // total > i * n_extra // total for i in range(total)] if total else []


def cycles(steps: int, extra_steps: int, cycle: int, *, last: bool = False) -> list[tuple[int, int]]:
    """(task steps, extra steps) of each schedule cycle: ``steps`` cut into cycles of ``cycle`` task
    steps (the last may be shorter; 0: one cycle) with ``extra_steps`` shared out in proportion, or
    with ``last`` given to the cycles that hold the last ``extra_steps`` task steps."""
    if not steps:
        return []
    if cycle <= 0 or cycle >= steps:
        cuts = [0, steps]
    else:
        cuts = list(range(0, steps, cycle)) + [steps]
    if last:
        start = steps - min(extra_steps, steps)
        return [(b - a, max(0, b - max(a, start))) for a, b in zip(cuts, cuts[1:])]
    return [(b - a, extra_steps * b // steps - extra_steps * a // steps) for a, b in zip(cuts, cuts[1:])]


def _batch_loss(model, pool, batch_size: int, generator) -> torch.Tensor:
    """The mean token loss of ``batch_size`` rows drawn (with replacement) from a ``tokenize_sft`` pool."""
    ids, lab, att = pool
    idx = torch.randint(0, ids.size(0), (batch_size,), generator=generator)         # (b,)
    return model(input_ids=ids[idx], attention_mask=att[idx], labels=lab[idx]).loss


def sft(model, tokenizer, rows, *, steps: int, batch_size: int, lr: float, seed: int = 0,
        log_every: int = 0, context_rows=None, context_steps: int = 0, context_lr_scale: float = 1.0,
        context_mix: str = "interleave", pools=None) -> list[float]:
    """Plain supervised fine-tuning on (prompt, completion) rows; returns the loss curve.

    With ``context_rows`` and ``context_steps``, that many steps on those rows are interleaved
    evenly with the ``steps`` on ``rows`` (each pool padded on its own, one learning-rate schedule
    over all steps, the context steps' rate times ``context_lr_scale``), so the ``rows`` budget is the
    same whatever ``context_steps`` is; the curve holds every step's loss. With ``context_mix="joint"``
    each of the last ``context_steps`` steps on ``rows`` also draws a context batch (its own generator,
    seeded ``seed + 7919``) and adds its loss, times ``context_lr_scale``, to the step's, one update: the
    ``rows`` batches and schedule do not depend on the dial, and the curve holds the ``rows`` losses.
    ``pools``: ``(tokenize_sft(rows), tokenize_sft(context_rows) or None)`` when the caller has them already
    (a cycled warm start calls this once a cycle on the same rows); tokenized here otherwise."""
    if context_mix not in ("interleave", "joint"):
        raise ValueError(f"context_mix must be 'interleave' or 'joint', got {context_mix!r}")
    if context_steps and not context_rows:
        raise ValueError(f"context_steps={context_steps} needs context_rows")
    joint = context_mix == "joint"
    device = next(model.parameters()).device
    if pools is None:
        pools = tokenize_sft(tokenizer, rows), tokenize_sft(tokenizer, context_rows) if context_steps else None
    task_pool = tuple(t.to(device) for t in pools[0])
    ctx_pool = tuple(t.to(device) for t in pools[1]) if context_steps else None
    g, g_ctx = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed + 7919)
    # each step: (a step on the context rows?, a context batch joined to a step on the rows?)
    if joint:
        plan = [(False, step >= steps - context_steps) for step in range(steps)]
    else:
        plan = [(extra, False) for extra in interleave(steps, context_steps)]
    total = len(plan)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.1, 1 - s / total))
    model.train()
    losses = []
    for step, (on_context, joined) in enumerate(plan):
        loss = _batch_loss(model, ctx_pool if on_context else task_pool, batch_size, g)
        losses.append(loss.item())
        if joined:
            loss = loss + context_lr_scale * _batch_loss(model, ctx_pool, batch_size, g_ctx)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if on_context:
            for group in opt.param_groups:   # the scheduler resets lr from its base at sched.step()
                group["lr"] *= context_lr_scale
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if log_every and (step + 1) % log_every == 0:
            label = "task loss" if joint else "loss"
            print(f"sft step {step + 1}/{total} {label} {sum(losses[-log_every:]) / log_every:.3f}", flush=True)
    model.eval()
    return losses


# the dial's fields: the task cycles a joint-mix warm start runs before its first context batch never read them
DIAL_FIELDS = ("context_steps", "context_templates", "context_lr_scale", "context_mix", "context_feedback_share")


def prefix_dir(cfg: LabConfig) -> Path:
    """Where the task cycles shared by every dial setting of one lab are cached: snapshots of the weights after
    each cycle that ran no context batch (``cycle<k>.pt``), keyed by every field but the dial's."""
    blob = json.dumps({k: v for k, v in asdict(cfg).items() if k not in DIAL_FIELDS}, sort_keys=True).encode()
    return cache_dir() / f"tiny-lab-prefix-{hashlib.sha256(blob).hexdigest()[:12]}"


def shared_cycles(plan: list[tuple[int, int]]) -> int:
    """How many leading cycles of a ``cycles`` plan run no context batch (the same at every dial setting)."""
    return next((k for k, (_, extra) in enumerate(plan) if extra), len(plan))


def resume_prefix(model, snaps: Path, shared: int) -> int:
    """Load the latest cached snapshot of the first ``shared`` cycles into ``model``; the cycles it covers (0: none).
    Each cycle starts a fresh AdamW and seeds its own batches, so the weights are all a cycle carries over."""
    for k in range(shared - 1, -1, -1):
        path = snaps / f"cycle{k}.pt"
        if path.exists():
            model.load_state_dict(torch.load(path, weights_only=True))
            return k + 1
    return 0


def save_prefix(model, snaps: Path, k: int) -> None:
    """Cache the weights after shared cycle ``k`` (atomically; a concurrent build may write the same file)."""
    snaps.mkdir(parents=True, exist_ok=True)
    tmp = snaps / f"cycle{k}.pt.tmp{os.getpid()}"
    torch.save(model.state_dict(), tmp)
    tmp.replace(snaps / f"cycle{k}.pt")


def warm_start(cfg: LabConfig | None = None, *, force: bool = False, verbose: bool = True):
    """The warm-started tiny model and tokenizer, trained once and cached on disk.

    Deterministic for a given ``LabConfig`` (seeded init, seeded batches, one thread).
    Returns ``(model, tokenizer)`` in eval mode.
    """
    from transformers import AutoTokenizer, LlamaForCausalLM

    from sdpo_kit.tasks.base import make_task

    cfg = cfg or LabConfig()
    path = cache_dir() / f"tiny-lab-{cfg.key()}"
    if (path / "model.safetensors").exists() and not force:
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a 0.1M-parameter load needs no progress bar
        try:
            model = LlamaForCausalLM.from_pretrained(path, use_safetensors=True)
            tok = AutoTokenizer.from_pretrained(path)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        return model.eval(), tok

    if patched_by_unsloth(LlamaForCausalLM):   # Unsloth's forward runs on CUDA only: train where it is not loaded
        run_without_unsloth(__name__, "warm_start", cfg, force=force, verbose=verbose)
        return warm_start(cfg, verbose=False)
    t0 = time.time()
    tok = build_tokenizer()
    model = build_model(tok, cfg, seed=cfg.seed)
    task = make_task(cfg.task, digits=cfg.digits, terms=cfg.terms, n_eval=cfg.n_eval, seed=cfg.seed)
    train_rows, _ = task.splits()
    # phase 1 rows: only the hinted prompts (half carry a random number, so copying is what pays)
    copy_rows = [r for r in task.sft_rows(train_rows, copy_fraction=1.0, seed=cfg.seed + 1) if r["kind"] == "copy"]
    rows = task.sft_rows(train_rows, copy_fraction=cfg.copy_fraction, seed=cfg.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bitwise-repeatable warm start whatever the core count
    try:
        log = 100 if verbose else 0
        context_rows = None
        if cfg.context_steps:
            from sdpo_kit.lab.skill import context_rows as build_context_rows

            context_rows = build_context_rows(task, train_rows, seed=cfg.seed + 2, templates=cfg.context_templates,
                                              feedback_share=cfg.context_feedback_share)
        phases = [(copy_rows, cfg.copy_steps, cfg.copy_lr, cfg.seed + 1, None, 0),
                  (rows, cfg.sft_steps, cfg.sft_lr, cfg.seed, context_rows, cfg.context_steps)]
        for phase_rows, steps, lr, seed, extra_rows, extra_steps in (phases if cfg.copy_first else phases[::-1]):
            cycle = cfg.sft_cycle_steps if phase_rows is rows else 0      # the task phase only
            joint = cfg.context_mix == "joint"
            plan = cycles(steps, extra_steps, cycle, last=joint)
            # joint mix: the leading cycles without a context batch are the same at every dial setting; reuse them
            shared = shared_cycles(plan) if joint and phase_rows is rows and not force else 0
            snaps = prefix_dir(cfg)
            done = resume_prefix(model, snaps, shared)
            if done and verbose:
                print(f"tiny-lab warm start: {done} shared task cycle(s) loaded from the cache", flush=True)
            todo = plan[done:]
            pools = (tokenize_sft(tok, phase_rows) if todo else None,   # once for every cycle of the phase
                     tokenize_sft(tok, extra_rows) if any(n_extra for _, n_extra in todo) else None)
            for k, (n, n_extra) in enumerate(todo, start=done):
                sft(model, tok, phase_rows, steps=n, batch_size=cfg.sft_batch_size, lr=lr, seed=seed + 1000 * k,
                    log_every=log, context_rows=extra_rows, context_steps=n_extra,
                    context_lr_scale=cfg.context_lr_scale, context_mix=cfg.context_mix, pools=pools)
                if k < min(shared, len(plan) - 1):   # the last cycle's weights are the warm start itself
                    save_prefix(model, snaps, k)
    finally:
        torch.set_num_threads(threads)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    from sdpo_kit.core.utils import quiet_progress_bars

    with quiet_progress_bars():
        model.save_pretrained(tmp)  # safetensors is the default and the only format we load
    tok.save_pretrained(tmp)
    (tmp / "lab_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    try:  # atomic publish; a concurrent process may have won the race
        tmp.replace(path)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    if verbose:
        # the cache folder's name, not its path: a notebook's output shows no machine path
        print(f"tiny-lab warm start: {time.time() - t0:.1f}s, cached as {path.name} in $SDPO_KIT_CACHE "
              "(default ~/.cache/sdpo_kit)", flush=True)
    return warm_start(cfg, verbose=False)


def lab_config_for(cfg, task) -> dict | None:
    """The warm-start recipe (``LabConfig`` overrides) for a run config ``cfg`` training ``task``;
    ``None`` unless the model is the tiny lab. The warm start follows the task (cached per recipe).

    ConfigError when the task's held-out problems could be in the warm start's SFT rows (a larger
    ``n_eval`` or another ``seed`` than the warm start's split)."""
    if cfg.model.name != "tiny-lab":
        return None
    if cfg.task["name"] == "dataset":   # a file of one's own: the default warm start (its sums), as it is
        return dict(cfg.model.lab)
    lab = {"task": cfg.task["name"], "digits": getattr(task, "digits", 1), "terms": getattr(task, "terms", 3),
           **cfg.model.lab}
    task_eval, task_seed = getattr(task, "n_eval", 200), getattr(task, "seed", 0)
    lab_eval, lab_seed = lab.get("n_eval", LabConfig.n_eval), lab.get("seed", LabConfig.seed)
    # a smaller n_eval with the same seed holds out a prefix of the warm start's held-out problems
    if task_eval > lab_eval or task_seed != lab_seed:
        raise ConfigError(
            f"the task holds out n_eval={task_eval} problems with seed={task_seed}, but the tiny lab's warm start "
            f"was trained on the split with n_eval={lab_eval}, seed={lab_seed}: some held-out problems would have "
            f"been in its SFT rows. Set model.lab.n_eval and model.lab.seed to the task's values "
            f"(or task.n_eval <= {lab_eval} with task.seed = {lab_seed}).")
    return lab
