"""The scratch VAPOR trainer: its pieces (span masks, preference forwards), a few steps on the
tiny lab for both variants, the reference it keeps, the config and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sdpo_kit import cli
from sdpo_kit.config import config_from_dict, load_config
from sdpo_kit.lab import build_model, build_tokenizer
from sdpo_kit.models import _add_peft_lora, _lora_kwargs
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.tasks import make_task
from sdpo_kit.trainers.vapor_loop import VAPORLoop, VAPORLoopConfig
from sdpo_kit.trainers.vapor_parts import completion_span_mask, preference_batch, preference_span_logps

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TAGS = ("<answer>", "</answer>")
VAPOR_KEYS = {"vapor/preference_term", "vapor/log_preference", "vapor/verifiable_ratio", "vapor/span_found_frac",
              "vapor/preference_found_frac", "loss", "loss/policy", "loss/kl", "reward/mean", "stats/clip_frac"}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def test_completion_span_mask_marks_the_answer_tokens(tok):
    """Generated ids decoded back: 1 on the characters between the tags, 0 where there is no span."""
    texts = ["<answer>12</answer>", "12", "x<answer>7</answer>y<answer>8</answer>"]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    T = max(map(len, ids))
    completion_ids = torch.tensor([i + [tok.pad_token_id] * (T - len(i)) for i in ids])
    completion_mask = torch.tensor([[1] * len(i) + [0] * (T - len(i)) for i in ids])
    mask = completion_span_mask(tok, completion_ids, completion_mask, TAGS)
    assert [tok.decode(completion_ids[b][mask[b].bool()]) for b in range(3)] == ["12", "", "7"]


def test_preference_span_logps_sum_the_span_tokens(tok):
    """log pi(y) is the sum of the token log-probs between the tags, given the prompt."""
    from sdpo_kit.generation import completion_logprobs, encode_prompts

    model = build_model(tok, seed=0)
    prompts = [[{"role": "user", "content": "1+2= <answer>"}], [{"role": "user", "content": "7+5+1= <answer>"}]]
    batch = preference_batch(tok, prompts, ["<answer>3</answer>", "<answer>13</answer>"],
                             ["<answer>4</answer>", "no tags"], TAGS)
    assert batch.found.tolist() == [1, 0]
    chosen, rejected = preference_span_logps(model, batch)
    enc = encode_prompts(tok, prompts[:1])
    ids = torch.tensor([tok("<answer>3</answer>", add_special_tokens=False)["input_ids"]])
    lp = completion_logprobs(model, enc["input_ids"], enc["attention_mask"], ids, torch.ones_like(ids))  # (1, 18)
    torch.testing.assert_close(chosen[0], lp[0, 8:9].sum())   # "3" is token 8
    assert rejected[1] == 0.0  # no span: nothing summed


def char_reward(prompts, completions, **kwargs):
    """Varies within every group (an untrained model is never right), so advantages are not 0."""
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


def make_loop(tok, variant="as_specified", lora=False, **cfg):
    task = make_task("vapor_arithmetic", n_eval=16)
    rows, heldout = task.splits()
    model = build_model(tok, seed=0)
    if lora:
        model = _add_peft_lora(model, _lora_kwargs(4))
    kw = dict(max_steps=3, prompts_per_step=2, num_generations=4, num_iterations=2, max_completion_length=20,
              learning_rate=1e-2, vapor_variant=variant)
    config = VAPORLoopConfig(**{**kw, **cfg})
    return VAPORLoop(model, tok, [exact_match_reward(tagged=True), char_reward], rows, config,
                     eval_fn=lambda m: task.evaluate(m, tok, heldout))


@pytest.mark.parametrize("variant", ["as_specified", "additive"])
def test_a_few_steps_on_the_tiny_lab(tok, variant):
    """Three steps: finite losses, the weights move, every row has the VAPOR keys, the
    preference spans are found for every pair, a frozen reference copy is kept."""
    loop = make_loop(tok, variant, beta=0.04)
    before = [p.detach().clone() for p in loop.model.parameters()]
    rows = [r for r in loop.train() if r["step"] > 0]
    assert len(rows) == 3 and all(VAPOR_KEYS <= set(r) for r in rows)
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in rows)
    assert all(r["vapor/preference_found_frac"] == 1.0 for r in rows)
    assert ("loss/dpo" in rows[0]) == (variant == "additive")
    assert any(not torch.equal(a, b) for a, b in zip(before, loop.model.parameters()))
    assert loop.ref_model is not None and not any(p.requires_grad for p in loop.ref_model.parameters())


def test_a_lora_policy_uses_its_base_model_as_the_reference(tok):
    """No second copy of a PEFT policy: the reference is the policy with its adapters disabled,
    so the first step's preference term starts at exactly P = 1 (policy == reference)."""
    loop = make_loop(tok, lora=True, max_steps=1, num_iterations=1)
    assert loop.ref_model is None
    row = [r for r in loop.train() if r["step"] == 1][0]
    assert row["vapor/log_preference"] == pytest.approx(0.0, abs=1e-6)


def test_rows_without_a_pair_are_refused(tok):
    rows = make_task("tagged_arithmetic", n_eval=16).splits()[0]
    with pytest.raises(ValueError, match="row 0: column 'chosen' is missing"):
        VAPORLoop(build_model(tok, seed=0), tok, [exact_match_reward(tagged=True)], rows, VAPORLoopConfig())


def test_config_and_cli(tmp_path):
    """configs/vapor.yaml loads as algorithm vapor (tags as tuples, variants checked) and runs
    two steps from the CLI; its config.yaml reads back the same."""
    cfg = load_config(CONFIGS / "vapor.yaml")
    assert type(cfg.trainer) is VAPORLoopConfig and cfg.trainer.verifiable_term_split == TAGS
    with pytest.raises(Exception, match="vapor_variant"):
        config_from_dict({"algorithm": "vapor", "trainer": {"vapor_variant": "multiplicative"}})
    with pytest.raises(Exception, match="two non-empty tags"):
        config_from_dict({"algorithm": "vapor", "trainer": {"verifiable_term_split": ["<a>"]}})
    out = tmp_path / "run"
    assert cli.main(["train", str(CONFIGS / "vapor.yaml"), "--max-steps", "2", "--output-dir", str(out),
                     "--set", "task.n_eval=16", "--set", "trainer.prompts_per_step=2"]) == 0
    assert load_config(out / "config.yaml") == load_config(CONFIGS / "vapor.yaml", {
        "trainer.max_steps": 2, "output_dir": str(out), "task.n_eval": 16, "trainer.prompts_per_step": 2})
