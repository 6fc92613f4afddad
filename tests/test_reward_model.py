"""The tiny lab's learned reward model: its data, build and cache, the reward function, the
config type, and the agreement measure against exact match."""

from __future__ import annotations

import torch

from sdpo_kit.lab.tasks import ArithmeticTask
from sdpo_kit.rewards import learned as rm
from sdpo_kit.rewards import make_reward

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
