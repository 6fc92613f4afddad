"""A learned reward model for the tiny lab: a sequence classifier trained on right vs wrong answers.

PPO's classic setting scores responses with a reward model, not a checker. This one is a tiny
``LlamaForSequenceClassification`` (one logit, read at the last token) trained in code with a
binary cross-entropy on the arithmetic task: for each training question the right answer
(label 1) and ``wrong_per_question`` near misses, the sum plus an offset in +-1..max_offset
(label 0). It must learn the sum to judge an answer, so on held-out questions it is right only
so often: ``agreement`` measures that against the verifiable reward, on a policy's own samples.
Built once and cached like the warm start (``core.cache.cache_dir()``).

``sequence_classifier_reward(model, tokenizer)`` turns any sequence-classification reward model
(this one or a hub model with the policy's chat template) into a TRL-signature reward function.

A real model's reward model, on a CPU's budget: ``build_probe_reward_model(trunk, tokenizer, rows)``
reads a frozen causal LM's own features (its last hidden state at the sequence's last token, the eos
after the completion) and fits a linear head to them (logistic regression, standardised features) on
the same kind of pairs: a right answer and near misses per training question, written as the task
asks (``completion_format``). RLHF starts its reward model from the SFT model; here the trunk is the
student's starting weights, frozen (a LoRA trunk is read with its adapter off), so building it costs
forward passes only. The character-level tiny reward model would read a real model's text as noise.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from sdpo_kit.core.sampling import render_prompts
from sdpo_kit.text.answers import completion_text


@dataclass
class RewardModelConfig:
    """Sizes and training of the tiny reward model (a 2-layer Llama like the policy)."""

    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    digits: int = 1
    terms: int = 3
    n_eval: int = 200
    steps: int = 2000   # measured: the loss stays near its start for ~1200 steps, then falls
    batch_size: int = 64
    lr: float = 3e-4
    wrong_per_question: int = 3
    max_offset: int = 5
    init_from_warm_start: bool = True   # the trunk starts as the lab's warm start (the SFT model, as in RLHF)
    seed: int = 0
    version: int = 3

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def reward_model_rows(rows: Sequence[dict], wrong_per_question: int, max_offset: int, seed: int) -> list[dict]:
    """(prompt, completion, label) rows: the right answer (1.0) and near misses (0.0) per question."""
    rng = random.Random(seed)
    out = []
    for r in rows:
        answer = int(r["answer"])
        out.append({"prompt": r["prompt"], "answer": r["answer"], "completion": str(answer), "label": 1.0})
        offsets = [o for o in range(-max_offset, max_offset + 1) if o and answer + o >= 0]
        for o in rng.sample(offsets, min(wrong_per_question, len(offsets))):
            out.append({"prompt": r["prompt"], "answer": r["answer"], "completion": str(answer + o), "label": 0.0})
    return out


def encode(tokenizer, prompts, completions, device=None):
    """Right-padded ids / mask of chat-templated prompt + completion + eos, (N, L)."""
    texts = [p + c for p, c in zip(render_prompts(tokenizer, prompts), completions)]
    seqs = [s + [tokenizer.eos_token_id] for s in tokenizer(texts, add_special_tokens=False)["input_ids"]]   # one call
    L = max(map(len, seqs))
    ids = torch.tensor([s + [tokenizer.pad_token_id] * (L - len(s)) for s in seqs], dtype=torch.long)   # (N, L)
    mask = torch.tensor([[1] * len(s) + [0] * (L - len(s)) for s in seqs], dtype=torch.long)            # (N, L)
    return (ids, mask) if device is None else (ids.to(device), mask.to(device))


@torch.no_grad()
def score(model, tokenizer, prompts, completions, micro_batch_size: int = 256) -> torch.Tensor:
    """The reward model's logit for each (prompt, completion), (N,)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    for i in range(0, len(prompts), micro_batch_size):
        ids, mask = encode(tokenizer, prompts[i:i + micro_batch_size], completions[i:i + micro_batch_size], device)
        out.append(model(input_ids=ids, attention_mask=mask).logits[:, 0].float())
    model.train(was_training)
    return torch.cat(out)


def sequence_classifier_reward(model, tokenizer, micro_batch_size: int = 256):
    """A TRL-signature reward: the classifier's logit on (prompt, completion)."""

    def reward_model(prompts, completions, **columns) -> list[float]:
        return score(model, tokenizer, list(prompts), [completion_text(c) for c in completions],
                     micro_batch_size).tolist()

    return reward_model


def build_reward_model(cfg: RewardModelConfig | None = None, *, force: bool = False, verbose: bool = True):
    """The tiny reward model and its tokenizer (the lab's), trained once and cached on disk."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    from sdpo_kit.core.cache import cache_dir
    from sdpo_kit.lab.model import build_tokenizer
    from sdpo_kit.tasks.base import make_task

    cfg = cfg or RewardModelConfig()
    path = cache_dir() / f"tiny-rm-{cfg.key()}"
    if (path / "model.safetensors").exists() and not force:
        return LlamaForSequenceClassification.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    t0 = time.time()
    tok = build_tokenizer()
    torch.manual_seed(cfg.seed)
    if cfg.init_from_warm_start:   # the SFT model's trunk, a fresh scalar head
        from sdpo_kit.lab.model import LabConfig, warm_start

        lab = LabConfig(hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
                        digits=cfg.digits, terms=cfg.terms, n_eval=cfg.n_eval)
        warm_start(lab, verbose=verbose)
        model = LlamaForSequenceClassification.from_pretrained(cache_dir() / f"tiny-lab-{lab.key()}", num_labels=1)
        model.config.pad_token_id = tok.pad_token_id
    else:
        model = LlamaForSequenceClassification(LlamaConfig(
            vocab_size=len(tok), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
            num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
            num_key_value_heads=cfg.num_attention_heads, max_position_embeddings=128, num_labels=1,
            pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    task = make_task("arithmetic", digits=cfg.digits, terms=cfg.terms, n_eval=cfg.n_eval, seed=cfg.seed)
    rows = reward_model_rows(task.splits()[0], cfg.wrong_per_question, cfg.max_offset, cfg.seed)
    ids, mask = encode(tok, [r["prompt"] for r in rows], [r["completion"] for r in rows])
    labels = torch.tensor([r["label"] for r in rows])                               # (N,)
    pos_weight = torch.tensor(float(cfg.wrong_per_question))   # balance one right answer against its near misses
    g = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.1, 1 - s / cfg.steps))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bitwise-repeatable, as the warm start
    try:
        model.train()
        for step in range(cfg.steps):
            idx = torch.randint(0, ids.size(0), (cfg.batch_size,), generator=g)
            logits = model(input_ids=ids[idx], attention_mask=mask[idx]).logits[:, 0]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[idx], pos_weight=pos_weight)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            if verbose and (step + 1) % 100 == 0:
                print(f"reward model step {step + 1}/{cfg.steps} loss {loss.item():.3f}", flush=True)
    finally:
        torch.set_num_threads(threads)
    tmp = path.with_name(path.name + ".tmp")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "reward_model_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    try:
        tmp.replace(path)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    if verbose:
        print(f"tiny reward model: {time.time() - t0:.1f}s, cached at {path}", flush=True)
    return build_reward_model(cfg, verbose=False)


@dataclass
class ProbeRewardModelConfig:
    """The data and the head's fit of ``build_probe_reward_model``."""

    n_questions: int = 200            # training questions, each with its right answer and near misses
    wrong_per_question: int = 3
    max_offset: int = 5               # a near miss is the answer + an offset in +-1..max_offset, never below 0
    completion_format: str = "{answer}"   # how an answer is written: "#### {answer}" where the task asks for ####
    steps: int = 300                  # full-batch Adam steps on the head (a convex loss)
    lr: float = 0.05
    weight_decay: float = 1e-2        # L2 on the head's weights (the features are standardised)
    micro_batch_size: int = 16        # sequences per forward of the trunk
    seed: int = 0                     # which near misses


class ProbeRewardModel:
    """A linear head on a frozen causal LM's last hidden state: ``score(prompts, completions)`` is the
    head's logit, > 0 for an answer it takes for right. ``as_reward()`` is its TRL-signature reward."""

    def __init__(self, trunk, tokenizer, head: torch.nn.Linear, mean: torch.Tensor, std: torch.Tensor,
                 micro_batch_size: int = 16):
        self.trunk, self.tokenizer, self.head = trunk, tokenizer, head
        self.mean, self.std, self.micro_batch_size = mean, std, micro_batch_size

    @torch.no_grad()
    def features(self, prompts, completions) -> torch.Tensor:
        """The trunk's last hidden state at each sequence's last token (the eos after the completion), (N, H)."""
        import contextlib

        base = self.trunk.get_base_model() if hasattr(self.trunk, "get_base_model") else self.trunk
        decoder = base.get_decoder()                         # the transformer without its LM head
        device = next(self.trunk.parameters()).device
        off = self.trunk.disable_adapter() if hasattr(self.trunk, "disable_adapter") else contextlib.nullcontext()
        out = []
        with off:
            was_training = decoder.training
            decoder.eval()
            for i in range(0, len(prompts), self.micro_batch_size):
                ids, mask = encode(self.tokenizer, prompts[i:i + self.micro_batch_size],
                                   completions[i:i + self.micro_batch_size], device)          # (n, L) right-padded
                hidden = decoder(input_ids=ids, attention_mask=mask).last_hidden_state       # (n, L, H)
                last = mask.sum(1) - 1                                                       # (n,)
                out.append(hidden[torch.arange(len(ids), device=device), last].float().cpu())  # (n, H)
            decoder.train(was_training)
        return torch.cat(out)

    @torch.no_grad()
    def score(self, prompts, completions) -> torch.Tensor:
        """The head's logit on each (prompt, completion), (N,)."""
        z = (self.features(list(prompts), list(completions)) - self.mean) / self.std             # (N, H)
        return self.head(z)[:, 0]                                                               # (N,)

    def as_reward(self):
        """A TRL-signature reward: the head's logit on (prompt, completion)."""

        def reward_model(prompts, completions, **columns) -> list[float]:
            return self.score(prompts, [completion_text(c) for c in completions]).tolist()

        return reward_model


def fit_probe_head(features: torch.Tensor, labels: torch.Tensor, *, pos_weight: float = 1.0, steps: int = 300,
                   lr: float = 0.05, weight_decay: float = 1e-2):
    """Logistic regression on standardised ``features`` (N, H) for 0/1 ``labels`` (N,): (head, mean, std).
    The head starts at zero and the loss is convex, so the fit is deterministic."""
    mean, std = features.mean(0), features.std(0).clamp_min(1e-6)                               # (H,), (H,)
    z = (features - mean) / std                                                                 # (N, H)
    head = torch.nn.Linear(z.size(1), 1)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    for _ in range(steps):
        logits = head(z)[:, 0]                                                                  # (N,)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, pos_weight=torch.tensor(pos_weight))
        loss = loss + weight_decay * head.weight.pow(2).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return head.requires_grad_(False), mean, std


def build_probe_reward_model(trunk, tokenizer, rows: Sequence[dict], cfg: ProbeRewardModelConfig | None = None,
                             *, verbose: bool = True) -> ProbeRewardModel:
    """A reward model on ``trunk``'s own features, fitted on the first ``n_questions`` of ``rows`` (a task's
    training rows): per question the right answer (label 1) and ``wrong_per_question`` near misses (0), each
    written with ``completion_format``. Keep ``trunk`` frozen (a PEFT trunk is read with its adapter off)."""
    cfg = cfg or ProbeRewardModelConfig()
    t0 = time.time()
    data = reward_model_rows(list(rows)[:cfg.n_questions], cfg.wrong_per_question, cfg.max_offset, cfg.seed)
    completions = [cfg.completion_format.format(answer=r["completion"]) for r in data]
    probe = ProbeRewardModel(trunk, tokenizer, None, None, None, cfg.micro_batch_size)
    features = probe.features([r["prompt"] for r in data], completions)                          # (N, H)
    labels = torch.tensor([r["label"] for r in data])                                            # (N,)
    probe.head, probe.mean, probe.std = fit_probe_head(features, labels, pos_weight=float(cfg.wrong_per_question),
                                                       steps=cfg.steps, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if verbose:
        says = probe.head((features - probe.mean) / probe.std)[:, 0] > 0
        print(f"probe reward model: {len(data)} pairs of {cfg.n_questions} questions, training agreement "
              f"{(says == labels.bool()).float().mean().item():.3f}, {time.time() - t0:.1f}s", flush=True)
    return probe


def agreement(reward_fn, task, rows: Sequence[dict], completions: Sequence[str]) -> dict:
    """How often the reward model's verdict (score > 0) matches exact match on these completions:
    ``agreement``, and the share of wrong completions it scores as right (``false_positive``)."""
    scores = reward_fn([r["prompt"] for r in rows], list(completions))
    right = [task.is_correct(c, r["answer"]) for c, r in zip(completions, rows)]
    says = [s > 0 for s in scores]
    wrong = [i for i, x in enumerate(right) if not x]
    return {"agreement": sum(a == b for a, b in zip(says, right)) / len(rows),
            "false_positive": sum(says[i] for i in wrong) / max(1, len(wrong)),
            "true_positive": sum(says[i] for i, x in enumerate(right) if x) / max(1, sum(right)),
            "n": len(rows), "right_frac": sum(right) / len(rows)}
