"""The scratch VAPOR trainer: its pieces (span masks, preference forwards), a few steps on the
tiny lab for both variants, the reference it keeps, the config and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sdpo_kit import cli, make_task
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.models import add_peft_lora, lora_kwargs
from sdpo_kit.registry import config_from_dict, load_config
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.vapor.config import VAPORScratchConfig
from sdpo_kit.vapor.loop import VAPORScratchTrainer
from sdpo_kit.vapor.parts import completion_span_mask, preference_batch, preference_span_logps

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
    from sdpo_kit.core.sampling import completion_logprobs, encode_prompts

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


def make_loop(tok, variant="as_specified", lora=False, callbacks=(), **cfg):
    task = make_task("vapor_arithmetic", n_eval=16)
    rows, heldout = task.splits()
    model = build_model(tok, seed=0)
    if lora:
        model = add_peft_lora(model, lora_kwargs(4))
    kw = dict(max_steps=3, prompts_per_step=2, num_generations=4, num_iterations=2, max_completion_length=20,
              learning_rate=1e-2, vapor_variant=variant)
    config = VAPORScratchConfig(**{**kw, **cfg})
    return VAPORScratchTrainer(model, tok, [exact_match_reward(tagged=True), char_reward], rows, config,
                     eval_fn=lambda m: task.evaluate(m, tok, heldout), callbacks=callbacks)


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


def test_completions_jsonl_and_the_dashboard_follow_the_run(tok, tmp_path):
    """Four steps, log_completions_every=2: completions.jsonl holds the whole batch (P x G) at steps 2 and 4, its
    mean reward the step's reward/mean (fp32: rel 1e-5, abs 1e-6); the dashboard's history is the loop's, its
    table the last step's completions with their rewards and feedback."""
    import pandas as pd

    from sdpo_kit.viz.dashboard import Dashboard

    dash = Dashboard(table_size=4)
    loop = make_loop(tok, max_steps=4, output_dir=str(tmp_path), log_completions_every=2, callbacks=[dash])
    history = dash.train(loop)
    logged = pd.read_json(tmp_path / "completions.jsonl", lines=True, dtype=False)
    by_step = {h["step"]: h for h in history if "loss" in h}
    assert sorted(by_step) == [1, 2, 3, 4] and sorted(set(logged["step"])) == [2, 4]
    for step, batch in logged.groupby("step"):
        assert len(batch) == 2 * 4, step
        assert batch["reward"].mean() == pytest.approx(by_step[step]["reward/mean"], rel=1e-5, abs=1e-6)
    assert dash.plot.history == history
    assert dash.table_step == 4 and len(dash.table_rows) == 4
    assert {"prompt", "completion", "reward", "reward/char_reward", "feedback"} <= set(dash.table_rows[0])


def test_every_variant_samples_the_same_first_batch(tok, tmp_path):
    """GRPO on the span, VAPOR as specified and the additive form, from the same weights and seed: the same
    first batch of completions (completions.jsonl at step 1), so the variants differ only in the loss."""
    import pandas as pd

    variants = {"grpo_span": dict(vapor_variant="additive", preference_weight=0.0),
                "as_specified": dict(vapor_variant="as_specified"), "additive": dict(vapor_variant="additive")}
    first = {}
    for name, kw in variants.items():
        make_loop(tok, **kw, max_steps=2, seed=5, output_dir=str(tmp_path / name), log_completions_every=1).train()
        logged = pd.read_json(tmp_path / name / "completions.jsonl", lines=True, dtype=False)
        first[name] = logged[logged["step"] == 1][["prompt", "completion"]].values.tolist()
    assert first["grpo_span"] == first["as_specified"] == first["additive"]
    assert len(first["additive"]) == 2 * 4


def test_preference_margin_counts_the_pairs_whose_spans_are_found(tok):
    """``preference_margin``: the mean of log pi(y_w) - log pi(y_l) over the pairs with both spans, the fraction
    of those with a positive margin, and how many there were (a pair without tags is left out)."""
    from sdpo_kit.vapor.parts import preference_margin

    model = build_model(tok, seed=0)
    rows = make_task("vapor_arithmetic", n_eval=6).splits()[1]
    broken = {**rows[0], "rejected": "no tags"}
    got = preference_margin(model, tok, [broken, *rows[1:]], TAGS)
    batch = preference_batch(tok, [r["prompt"] for r in rows[1:]], [r["chosen"] for r in rows[1:]],
                             [r["rejected"] for r in rows[1:]], TAGS)
    with torch.no_grad():
        chosen, rejected = preference_span_logps(model, batch)
    margins = chosen - rejected                                                      # (P - 1,)
    assert got["pairs"] == len(rows) - 1
    assert got["margin"] == pytest.approx(margins.mean().item(), rel=1e-5, abs=1e-6)
    assert got["accuracy"] == pytest.approx((margins > 0).float().mean().item())


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
        VAPORScratchTrainer(build_model(tok, seed=0), tok, [exact_match_reward(tagged=True)], rows, VAPORScratchConfig())


def test_config_and_cli(tmp_path):
    """configs/vapor.yaml loads as algorithm vapor (tags as tuples, variants checked) and runs
    two steps from the CLI; its config.yaml reads back the same."""
    cfg = load_config(CONFIGS / "vapor.yaml")
    assert type(cfg.trainer) is VAPORScratchConfig and cfg.trainer.verifiable_term_split == TAGS
    with pytest.raises(Exception, match="vapor_variant"):
        config_from_dict({"algorithm": "vapor", "trainer": {"vapor_variant": "multiplicative"}})
    with pytest.raises(Exception, match="two non-empty tags"):
        config_from_dict({"algorithm": "vapor", "trainer": {"verifiable_term_split": ["<a>"]}})
    out = tmp_path / "run"
    assert cli.main(["train", str(CONFIGS / "vapor.yaml"), "--max-steps", "2", "--output-dir", str(out),
                     "--set", "task.n_eval=16", "--set", "trainer.prompts_per_step=2"]) == 0
    from sdpo_kit.registry import panels_for

    assert {k for p in panels_for("vapor") for k in p.keys} >= {"vapor/preference_term", "vapor/verifiable_ratio"}
    assert (out / "reward_curve.png").exists()
    assert load_config(out / "config.yaml") == load_config(CONFIGS / "vapor.yaml", {
        "trainer.max_steps": 2, "output_dir": str(out), "task.n_eval": 16, "trainer.prompts_per_step": 2})


def test_trl_backend_gives_the_scratch_loss_on_the_same_batch(tok, tmp_path):
    """VAPORTRLTrainer (TRL) and the scratch objective on one batch that TRL generated: the same loss
    and the same gradients, for both variants, with a KL term (GRPO's: k3 x the importance ratio);
    P = 2 prompts x G = 4, mu = 2 (an off-policy old_logp), each distinct pair computed once."""
    from transformers import LlamaForCausalLM

    from sdpo_kit.core.sampling import completion_logprobs
    from sdpo_kit.losses import group_advantages, kl_k3, masked_mean, preference_log_term
    from sdpo_kit.vapor.loop import vapor_objective
    from sdpo_kit.vapor.trl import build_trl_vapor_trainer

    task = make_task("vapor_arithmetic", n_eval=16)
    rows = task.splits()[0][:2]
    build_model(tok, seed=0).save_pretrained(tmp_path / "start")  # TRL loads its KL reference from a path
    for variant in ("as_specified", "additive"):
        model = LlamaForCausalLM.from_pretrained(tmp_path / "start")
        trainer = build_trl_vapor_trainer(
            model, tok, [exact_match_reward(tagged=True), char_reward], rows, preset="cpu", output_dir=tmp_path,
            verbose=False, max_steps=1, prompts_per_step=2, num_generations=4, max_completion_length=20,
            num_iterations=2, beta=0.04, vapor_variant=variant, preference_beta=0.5, scale_rewards="none")
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        torch.manual_seed(0)
        batch = trainer._generate_and_score_completions([r for r in rows for _ in range(4)])
        batch["old_per_token_logps"] = batch["old_per_token_logps"] + 0.1  # make pi_old differ from pi
        model.zero_grad()
        trl_loss = trainer._compute_loss(model, batch)
        trl_loss.backward()
        trl_grads = [p.grad.clone() for p in model.parameters()]

        model.zero_grad()
        cfg = trainer.args
        args = (batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], batch["completion_mask"])
        logp = completion_logprobs(model, *args, cfg.temperature)                                   # (B, T)
        pref = preference_batch(tok, [r["prompt"] for r in rows], [r["chosen"] for r in rows],
                                [r["rejected"] for r in rows], TAGS)
        chosen, rejected = preference_span_logps(model, pref)                                       # (P,)
        with torch.no_grad():
            ref_c, ref_r = preference_span_logps(trainer.vapor_ref_model, pref)
        log_pref = preference_log_term(chosen, ref_c, rejected, ref_r, 0.5)                        # (P,)
        rewards = torch.tensor([[f(None, [c], answer=[a])[0] for f in (exact_match_reward(tagged=True), char_reward)]
                                for c, a in zip([[{"role": "assistant", "content": t}]
                                                 for t in tok.batch_decode(batch["completion_ids"], skip_special_tokens=True)],
                                                [r["answer"] for r in rows for _ in range(4)])]).sum(1)
        torch.testing.assert_close(batch["advantages"], group_advantages(rewards, 4, "none"))
        loss, _, _ = vapor_objective(logp, batch["old_per_token_logps"], batch["span_mask"], batch["advantages"],
                                     log_pref, pref.found.float(), cfg, 4)
        ratio = torch.exp(logp - batch["old_per_token_logps"])                                     # (B, T)
        kl = kl_k3(logp, batch["ref_per_token_logps"]) * ratio                                     # (B, T) GRPO's
        loss = loss + 0.04 * masked_mean(kl, batch["completion_mask"])
        loss.backward()
        torch.testing.assert_close(trl_loss, loss, rtol=1e-5, atol=1e-6)
        for p, g in zip(model.parameters(), trl_grads):
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)


def test_trl_backend_from_the_cli(tmp_path):
    """`sdpo-kit train configs/vapor.yaml --backend trl` runs and logs the VAPOR keys."""
    import json

    out = tmp_path / "trl"
    assert cli.main(["train", str(CONFIGS / "vapor.yaml"), "--backend", "trl", "--max-steps", "2",
                     "--output-dir", str(out), "--set", "task.n_eval=16", "--set", "trainer.prompts_per_step=2"]) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2]
    assert all(VAPOR_KEYS <= set(r) for r in rows if "loss" in r)
