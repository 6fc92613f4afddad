"""sdpo_kit.losses against TRL 1.16's own GRPOTrainer on the tiny lab.

TRL keeps its GRPO loss inside ``GRPOTrainer._compute_loss`` and its advantage formula inside
``_generate_and_score_completions`` (no standalone functions), so these tests build real
trainers and call those methods directly with hand-built batches.

One process, no gradient accumulation: ``current_gradient_accumulation_steps`` = 1 and
``steps_per_generation`` = 1, the setting in which sdpo_kit's losses claim to equal TRL's.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

from datasets import Dataset
from transformers import LlamaForCausalLM
from trl import GRPOConfig, GRPOTrainer

from sdpo_kit.core.sampling import completion_logprobs, encode_prompts
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.losses import group_advantages, grpo_loss, kl_k3, masked_mean

G = 4  # num_generations
PROMPTS = ["1+2=", "7+5="]  # same length: the chat-rendered prompts need no padding
MAX_COMPLETION_LENGTH = 6
FP32 = {"rtol": 1e-5, "atol": 1e-6}
SEQ_KEYS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The tiny lab model and tokenizer saved to disk, so TRL can load its reference model from the
    path (it does, from ``model.config._name_or_path``, whenever beta != 0)."""
    path = tmp_path_factory.mktemp("tiny_lab")
    tok = build_tokenizer()
    build_model(tok, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    return path, tok


def make_trainer(lab, tmp_path, reward_func, **config):
    """A real trl.GRPOTrainer on the tiny lab, CPU, fp32, no logging, set up as in training."""
    path, tok = lab
    rows = [{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS]
    args = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", logging_strategy="no",
        save_strategy="no", num_generations=G,
        # two groups per batch, so that scale_rewards="batch" differs from "group"
        per_device_train_batch_size=2 * G, max_completion_length=MAX_COMPLETION_LENGTH, **config,
    )
    model = LlamaForCausalLM.from_pretrained(path)  # a fresh copy: TRL patches the forward in place
    trainer = GRPOTrainer(model=model, reward_funcs=reward_func, args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=tok)
    trainer.model.train()  # _compute_loss reads "train" vs "eval" from model.training
    # set by Trainer's training loop; 1 = no gradient accumulation
    # (TRL divides grpo/bnpo/dr_grpo by it, and scales dapo's normaliser by it)
    trainer.current_gradient_accumulation_steps = 1
    assert trainer.args.steps_per_generation == 1 and trainer.accelerator.num_processes == 1
    return trainer


def zero_reward(prompts, completions, **kwargs):
    return [0.0] * len(prompts)


def make_inputs(tok, seed=0):
    """A hand-built batch of 2 prompts x G completions with ragged lengths, off-policy old and
    reference log-probs, and advantages that make some ratios clip on each side.

    The prompts are right-aligned and of equal length (no left padding): TRL's forward passes no
    position_ids (so positions are 0..P+T-1) while completion_logprobs derives them from the
    attention mask; without padding the two agree. Completion padding is on the right only, after
    every real token, so it cannot shift a real token's position either.
    """
    g = torch.Generator().manual_seed(seed)
    chats = [[{"role": "user", "content": p}] for p in PROMPTS for _ in range(G)]
    enc = encode_prompts(tok, chats)
    prompt_ids, prompt_mask = enc["input_ids"], enc["attention_mask"]                    # (B, P)
    # T < max_completion_length, as when TRL pads to a batch's longest completion: dr_grpo must
    # divide by B * max_completion_length, not by B * T
    B, T = prompt_ids.size(0), MAX_COMPLETION_LENGTH - 1
    assert prompt_mask.all(), "prompts must not be padded (see docstring)"
    n_special = len(tok.all_special_tokens)  # sample ordinary characters only
    completion_ids = torch.randint(n_special, len(tok), (B, T), generator=g)           # (B, T)
    lengths = torch.tensor([5, 3, 5, 1, 5, 2, 4, 5])                                     # (B,)
    completion_mask = (torch.arange(T)[None] < lengths[:, None]).long()                  # (B, T)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tok.pad_token_id)  # (B, T)
    rewards = torch.tensor([1.0, 0.0, 0.0, 2.0, 0.5, 0.5, 1.0, 0.0])                     # (B,)
    advantages = group_advantages(rewards, G)                                            # (B,)
    # old_logp = logp + old_offset, so ratio = exp(-old_offset), in [0.6, 1.65]
    old_offset = torch.rand(B, T, generator=g) - 0.5                                     # (B, T)
    # make sure both clip sides are hit:
    # A_0 > 0 with ratio 1.65 > 1.28 (high), A_1 < 0 with ratio 0.61 < 0.8 (low)
    assert advantages[0] > 0 and advantages[1] < 0
    old_offset[0, 0], old_offset[1, 0] = -0.5, 0.5
    return {
        "prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
        "completion_ids": completion_ids, "completion_mask": completion_mask,
        "advantages": advantages, "old_offset": old_offset,
        "ref_offset": torch.rand(B, T, generator=g) - 0.5,                               # (B, T)
    }


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_grpo_loss_equals_trl_compute_loss(lab, tmp_path, loss_type, beta):
    """grpo_loss on completion_logprobs equals TRL's GRPOTrainer._compute_loss (value and gradient
    w.r.t. every parameter), and its clip fractions and kl equal TRL's logged metrics, for each
    loss_type, beta 0 and 0.04 (k3 KL with the default bias correction), epsilon_high != epsilon."""
    trainer = make_trainer(lab, tmp_path, zero_reward, loss_type=loss_type, beta=beta, epsilon=0.2,
                           epsilon_high=0.28)
    assert trainer.args.use_bias_correction_kl  # TRL 1.16's default, and grpo_loss's
    model, tok = trainer.model, lab[1]
    batch = make_inputs(tok)
    args = tuple(batch[k] for k in SEQ_KEYS)
    with torch.no_grad():
        logp0 = completion_logprobs(model, *args)                                        # (B, T)
    old_logp = logp0 + batch["old_offset"]                                               # (B, T)
    ref_logp = logp0 + batch["ref_offset"]                                               # (B, T)

    inputs = {
        "prompt_ids": batch["prompt_ids"], "prompt_mask": batch["prompt_mask"],
        "completion_ids": batch["completion_ids"], "completion_mask": batch["completion_mask"],
        "advantages": batch["advantages"], "old_per_token_logps": old_logp,
        "ref_per_token_logps": ref_logp,
        # dapo normalises by the generation batch's completion-token count
        "num_items_in_batch": batch["completion_mask"].sum(),
    }
    model.zero_grad()
    trl_loss = trainer._compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = [p.grad.clone() for p in model.parameters()]
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}

    model.zero_grad()
    logp = completion_logprobs(model, *args)                                             # (B, T)
    loss, stats = grpo_loss(logp, old_logp, batch["advantages"], batch["completion_mask"],
                            ref_logp=ref_logp, beta=beta, epsilon=0.2, epsilon_high=0.28,
                            loss_type=loss_type, max_completion_length=MAX_COMPLETION_LENGTH)
    loss.backward()

    torch.testing.assert_close(loss, trl_loss, **FP32)
    for p, trl_grad in zip(model.parameters(), trl_grads):
        torch.testing.assert_close(p.grad, trl_grad, **FP32)
    # both clip sides exercised, and the fractions equal TRL's
    assert metrics["clip_ratio/low_mean"] > 0 and metrics["clip_ratio/high_mean"] > 0
    for ours, theirs in [("clip_frac_low", "low_mean"), ("clip_frac_high", "high_mean"),
                         ("clip_frac", "region_mean")]:
        assert stats[ours].item() == pytest.approx(metrics[f"clip_ratio/{theirs}"], abs=1e-7)
    if beta:
        # TRL logs k3 x ratio (its bias correction); our loss/kl is the raw k3
        with torch.no_grad():
            k3 = kl_k3(logp, ref_logp)                                                   # (B, T)
            ratio = torch.exp(logp - old_logp)                                           # (B, T)
        mask = batch["completion_mask"]
        assert masked_mean(k3 * ratio, mask).item() == pytest.approx(metrics["kl"], rel=1e-5, abs=1e-6)
        torch.testing.assert_close(stats["kl"], masked_mean(k3, mask), **FP32)


def test_grpo_loss_without_bias_correction_equals_trl(lab, tmp_path):
    """With use_bias_correction_kl=False (plain k3, no ratio factor) grpo_loss still equals TRL."""
    trainer = make_trainer(lab, tmp_path, zero_reward, loss_type="dapo", beta=0.1,
                           epsilon_high=0.28, use_bias_correction_kl=False)
    model, tok = trainer.model, lab[1]
    batch = make_inputs(tok, seed=1)
    args = tuple(batch[k] for k in SEQ_KEYS)
    with torch.no_grad():
        logp = completion_logprobs(model, *args)                                         # (B, T)
        old_logp = logp + batch["old_offset"]                                            # (B, T)
        ref_logp = logp + 4 * batch["ref_offset"]                                        # (B, T)
        inputs = {
            "prompt_ids": batch["prompt_ids"], "prompt_mask": batch["prompt_mask"],
            "completion_ids": batch["completion_ids"], "completion_mask": batch["completion_mask"],
            "advantages": batch["advantages"], "old_per_token_logps": old_logp,
            "ref_per_token_logps": ref_logp,
            "num_items_in_batch": batch["completion_mask"].sum(),
        }
        trl_loss = trainer._compute_loss(model, inputs)
    kwargs = {"ref_logp": ref_logp, "beta": 0.1, "epsilon_high": 0.28, "loss_type": "dapo"}
    loss, _ = grpo_loss(logp, old_logp, batch["advantages"], batch["completion_mask"],
                        use_bias_correction_kl=False, **kwargs)
    torch.testing.assert_close(loss, trl_loss, **FP32)
    # and the switch matters here, so the comparison above can tell the two apart
    corrected, _ = grpo_loss(logp, old_logp, batch["advantages"], batch["completion_mask"],
                             **kwargs)
    assert abs(corrected.item() - trl_loss.item()) > 1e-4


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_group_advantages_equals_trl(lab, tmp_path, scale_rewards):
    """group_advantages equals the advantages TRL's _generate_and_score_completions computes from the
    same rewards (TRL has no standalone advantage function; this runs its real code path: tiny
    generations, then its reward, baseline and std lines), including an all-equal group (std 0)."""
    # call order = batch order: group 0 has spread, group 1 is all equal (zero std, zero advantage)
    table = [1.0, 0.0, 0.5, 2.0, 3.0, 3.0, 3.0, 3.0]

    def table_reward(prompts, completions, **kwargs):
        return table[: len(prompts)]

    trainer = make_trainer(lab, tmp_path, table_reward, scale_rewards=scale_rewards)
    rows = [{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS for _ in range(G)]
    torch.manual_seed(0)
    out = trainer._generate_and_score_completions(rows)
    expected = group_advantages(torch.tensor(table), G, scale_rewards)                   # (B,)
    torch.testing.assert_close(out["advantages"], expected, **FP32)
    assert expected[:G].abs().max() > 0.1 and (expected[G:] == 0).all()


def test_backends_agree_on_left_padded_prompts_of_different_lengths(lab, tmp_path):
    """Scratch and TRL on one batch whose prompts differ in length (so they are left-padded by
    different amounts): per-token log-probs and the loss (value and gradients) agree.

    The two forwards place the tokens differently: TRL passes no position_ids (positions
    0..P+T-1, padding included), ``completion_logprobs`` derives them from the attention mask
    as ``generate`` does. With rotary embeddings (Llama, Qwen) attention sees only position
    differences, which a constant shift per row leaves unchanged, so the two agree to float
    rounding (measured: max |diff| of log-probs 4.8e-7); a model with absolute position
    embeddings would not (see docs/concepts/grpo.md)."""
    trainer = make_trainer(lab, tmp_path, zero_reward, loss_type="dapo", beta=0.04, epsilon=0.2, epsilon_high=0.28)
    model, tok = trainer.model, lab[1]
    prompts = ["1+2=", "123+456+7="]
    g = torch.Generator().manual_seed(5)
    enc = encode_prompts(tok, [[{"role": "user", "content": p}] for p in prompts for _ in range(G)])
    prompt_ids, prompt_mask = enc["input_ids"], enc["attention_mask"]                   # (B, P)
    assert prompt_mask.sum(1).unique().numel() == 2 and not prompt_mask.all()            # left-padded, unequally
    B, T = prompt_ids.size(0), MAX_COMPLETION_LENGTH - 1
    completion_ids = torch.randint(len(tok.all_special_tokens), len(tok), (B, T), generator=g)  # (B, T)
    lengths = torch.tensor([5, 3, 5, 1, 5, 2, 4, 5])                                     # (B,)
    completion_mask = (torch.arange(T)[None] < lengths[:, None]).long()                  # (B, T)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tok.pad_token_id)
    advantages = group_advantages(torch.tensor([1.0, 0.0, 0.0, 2.0, 0.5, 0.5, 1.0, 0.0]), G)  # (B,)
    args = (prompt_ids, prompt_mask, completion_ids, completion_mask)
    with torch.no_grad():
        logp0 = completion_logprobs(model, *args)                                        # (B, T)
        # TRL's own per-token log-probs on the same batch
        trl_logp, _, _ = trainer._get_per_token_logps_and_entropies(
            model, torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1), T)
    m = completion_mask.bool()
    torch.testing.assert_close(trl_logp[m], logp0[m], **FP32)
    old_logp = logp0 + 0.3 * (torch.rand(B, T, generator=g) - 0.5)                        # (B, T)
    ref_logp = logp0 + 0.3 * (torch.rand(B, T, generator=g) - 0.5)                        # (B, T)
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
              "completion_mask": completion_mask, "advantages": advantages, "old_per_token_logps": old_logp,
              "ref_per_token_logps": ref_logp, "num_items_in_batch": completion_mask.sum()}
    model.zero_grad()
    trl_loss = trainer._compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss, _ = grpo_loss(completion_logprobs(model, *args), old_logp, advantages, completion_mask, ref_logp=ref_logp,
                        beta=0.04, epsilon=0.2, epsilon_high=0.28, loss_type="dapo")
    loss.backward()
    torch.testing.assert_close(loss, trl_loss, **FP32)
    for p, trl_grad in zip(model.parameters(), trl_grads):
        torch.testing.assert_close(p.grad, trl_grad, **FP32)


@pytest.mark.parametrize("mode", ["token_truncate", "sequence_mask"])
def test_grpo_loss_with_sampler_weights_equals_trl_with_its_vllm_correction(lab, tmp_path, mode):
    """Samples another policy drew (a bf16 copy here, vLLM in TRL): grpo_loss(..., sampler_weights=w) equals
    TRL's _compute_loss with ``importance_sampling_ratio`` = w, as TRL sets it when it corrects vLLM's
    samples (value and gradient), per token (B, T) and per sequence (B, 1)."""
    from sdpo_kit.grpo.loss import sampler_weights

    trainer = make_trainer(lab, tmp_path, zero_reward, loss_type="dapo", epsilon_high=0.28)
    trainer.use_vllm = trainer.vllm_importance_sampling_correction = True   # its loss reads these two flags only
    model, tok = trainer.model, lab[1]
    batch = make_inputs(tok, seed=2)
    args, mask = tuple(batch[k] for k in SEQ_KEYS), batch["completion_mask"]
    with torch.no_grad():
        old_logp = completion_logprobs(model, *args) + batch["old_offset"]                  # (B, T)
    sampler_logp = old_logp + 0.3 * batch["ref_offset"]                                    # (B, T) another policy's
    w = sampler_weights(old_logp, sampler_logp, mask, mode, clip_max=1.0 if mode == "sequence_mask" else 1.05)
    assert w.shape == ((mask.size(0), 1) if mode.startswith("sequence") else mask.shape)
    assert (w == 0).any() if mode.endswith("mask") else (w == 1.05).any()   # the clip or the mask acts
    inputs = {k: batch[k] for k in SEQ_KEYS} | {"advantages": batch["advantages"], "old_per_token_logps": old_logp,
                                                "importance_sampling_ratio": w, "num_items_in_batch": mask.sum()}
    model.zero_grad()
    trl_loss = trainer._compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss, _ = grpo_loss(completion_logprobs(model, *args), old_logp, batch["advantages"], mask, epsilon_high=0.28,
                        loss_type="dapo", sampler_weights=w)
    loss.backward()
    torch.testing.assert_close(loss, trl_loss, **FP32)
    for p, trl_grad in zip(model.parameters(), trl_grads):
        torch.testing.assert_close(p.grad, trl_grad, **FP32)
    unweighted, _ = grpo_loss(completion_logprobs(model, *args).detach(), old_logp, batch["advantages"], mask,
                              epsilon_high=0.28, loss_type="dapo")
    assert abs(unweighted.item() - loss.item()) > 1e-4   # the weights change the loss: the comparison tells
