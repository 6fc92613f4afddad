"""The tiny lab's learned reward model: its data, build and cache, the reward function, the
config type, and the agreement measure against exact match."""

from __future__ import annotations

import torch

from sdpo_kit.rewards import learned as rm
from sdpo_kit.rewards import make_reward
from sdpo_kit.tasks import ArithmeticTask

SMALL = rm.RewardModelConfig(steps=20, init_from_warm_start=False, n_eval=16)


def test_rows_hold_one_right_answer_and_near_misses_per_question():
    task = ArithmeticTask(n_eval=16, seed=0)
    rows = task.splits()[0][:50]
    out = rm.reward_model_rows(rows, wrong_per_question=3, max_offset=5, seed=0)
    assert len(out) == 4 * len(rows)
    for q in range(len(rows)):
        group = out[4 * q:4 * q + 4]
        assert [g["label"] for g in group] == [1.0, 0.0, 0.0, 0.0]
        answer = int(rows[q]["answer"])
        assert group[0]["completion"] == str(answer)
        assert all(0 < abs(int(g["completion"]) - answer) <= 5 and int(g["completion"]) >= 0 for g in group[1:])


def test_build_caches_and_scores_as_a_trl_reward(tmp_path, monkeypatch):
    monkeypatch.setenv("SDPO_KIT_CACHE", str(tmp_path))
    model, tok = rm.build_reward_model(SMALL, verbose=False)
    assert (tmp_path / f"tiny-rm-{SMALL.key()}" / "model.safetensors").exists()
    again, _ = rm.build_reward_model(SMALL, verbose=False)               # from the cache: the same weights
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    fn = rm.sequence_classifier_reward(model, tok, micro_batch_size=2)
    prompts = [[{"role": "user", "content": "1+2+3="}]] * 3
    comps = [[{"role": "assistant", "content": t}] for t in ("6", "7", "60")]
    scores = fn(prompts, comps)
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    torch.testing.assert_close(torch.tensor(scores), rm.score(model, tok, prompts, ["6", "7", "60"]))
    monkeypatch.setattr(rm, "RewardModelConfig", lambda **kw: SMALL)   # the config type builds the same model
    (built,) = make_reward({"type": "reward_model"}, task=ArithmeticTask())
    # another micro-batching of the same forward: equal to fp32 rounding, not to the bit (seen 1.5e-8 apart)
    torch.testing.assert_close(torch.tensor(built(prompts, comps)), torch.tensor(scores), rtol=1e-5, atol=1e-6)


def test_agreement_counts_verdicts_against_exact_match():
    task = ArithmeticTask(n_eval=16, seed=0)
    rows = task.splits()[1][:4]
    completions = [rows[0]["answer"], "999", rows[2]["answer"], "998"]

    def oracle(prompts, completions_):
        return [1.0 if task.is_correct(c, r["answer"]) else -1.0 for c, r in zip(completions_, rows)]

    def yes(prompts, completions_):
        return [1.0] * len(completions_)

    assert rm.agreement(oracle, task, rows, completions) == {"agreement": 1.0, "false_positive": 0.0,
                                                              "true_positive": 1.0, "n": 4, "right_frac": 0.5}
    assert rm.agreement(yes, task, rows, completions)["false_positive"] == 1.0


# --- the probe reward model: a linear head on a frozen model's own features (a real model's reward model)

def probe_lab():
    from sdpo_kit.lab.model import build_model, build_tokenizer

    tok = build_tokenizer()
    return build_model(tok, seed=0).eval(), tok, ArithmeticTask(n_eval=16, seed=0)


def test_probe_features_are_the_last_token_s_hidden_state_whatever_the_padding():
    """Batched right-padded features equal an unpadded forward of each prompt + completion + eos, read at its
    last token (fp32: rtol=1e-5, atol=1e-6)."""
    model, tok, task = probe_lab()
    probe = rm.ProbeRewardModel(model, tok, None, None, None, micro_batch_size=3)
    rows = task.splits()[1][:5]
    completions = ["6", "12", "1", "", "#### 7"]
    got = probe.features([r["prompt"] for r in rows], completions)                     # (5, H)
    for i, (r, c) in enumerate(zip(rows, completions)):
        ids, _ = rm.encode(tok, [r["prompt"]], [c])                                     # (1, L) no padding
        with torch.no_grad():
            want = model.model(input_ids=ids).last_hidden_state[0, -1]                  # (H,)
        torch.testing.assert_close(got[i], want, rtol=1e-5, atol=1e-6)


def test_the_probe_head_is_logistic_regression():
    """Separable features are fitted with every training verdict right; the fit starts at zero, so it repeats
    exactly; the head's logit is its linear map of the standardised features."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(256, 8, generator=g)                                                 # (N, H)
    rule = X[:, 2] - 0.5 * X[:, 5]                                                       # (N,) a linear rule
    X = X[rule.abs() > 0.5]                                                              # with a margin
    y = (X[:, 2] - 0.5 * X[:, 5] > 0).float()                                            # (N,)
    head, mean, std = rm.fit_probe_head(X, y, steps=300)
    logits = head((X - mean) / std)[:, 0]
    assert ((logits > 0).float() == y).all()
    again, _, _ = rm.fit_probe_head(X, y, steps=300)
    assert torch.equal(head.weight, again.weight) and torch.equal(head.bias, again.bias)
    torch.testing.assert_close(logits, ((X - mean) / std) @ head.weight[0] + head.bias)


def test_a_lora_trunk_is_read_with_its_adapter_off():
    """The probe reads a PEFT trunk's base weights: an adapter that moved changes nothing (LoRA never trains
    the base), so PPO on the student cannot move its own reward model."""
    from sdpo_kit.models import add_peft_lora, lora_kwargs

    model, tok, task = probe_lab()
    rows = task.splits()[1][:4]
    prompts, completions = [r["prompt"] for r in rows], [r["answer"] for r in rows]
    base = rm.ProbeRewardModel(model, tok, None, None, None).features(prompts, completions)
    peft = add_peft_lora(model, lora_kwargs(4))
    with torch.no_grad():
        for n, p in peft.named_parameters():
            if "lora_B" in n:
                p.add_(0.5)                                                              # the adapter moved
    torch.testing.assert_close(rm.ProbeRewardModel(peft, tok, None, None, None).features(prompts, completions), base,
                               rtol=1e-5, atol=1e-6)


def test_probe_reward_model_from_the_registry_is_a_trl_reward_on_a_frozen_copy():
    """``make_reward({"type": "probe_reward_model"})`` needs the policy; it fits on the task's training questions
    (pairs in ``completion_format``) and scores floats; a fully trained policy is read through a copy taken at
    build time, so training the policy afterwards leaves the scores as they were."""
    import pytest

    model, tok, task = probe_lab()
    with pytest.raises(ValueError, match="scored by a model"):
        make_reward({"type": "probe_reward_model"}, task=task)
    (fn,) = make_reward({"type": "probe_reward_model", "n_questions": 12, "steps": 50,
                         "completion_format": "{answer}"}, model=model, tokenizer=tok, task=task)
    rows = task.splits()[1][:4]
    prompts, comps = [r["prompt"] for r in rows], [[{"role": "assistant", "content": r["answer"]}] for r in rows]
    scores = fn(prompts, comps)
    assert len(scores) == 4 and all(isinstance(s, float) for s in scores) and fn.__name__ == "reward_model"
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)                                                                  # the policy trains on
    assert fn(prompts, comps) == scores
