"""sdpo_kit against the real verl engine (0.9.1, CPU): run in .venv-verl by ``make test-verl``.

verl pins transformers < 5.11, so it has a venv of its own; these tests skip anywhere verl is not
importable. What they pin down: our advantages, loss aggregations and KL estimate are verl's
(``core_algos``), the exported parquet loads through verl's ``RLHFDataset`` + ``collate_fn`` with
our tokenizer, verl's reward manager scores a ``DataProto`` with our reward module exactly as the
local trainers score it (the rule rewards, the feedback rewards, and the code reward, whose
programs run in our sandbox from inside verl's reward loop), and the generated Hydra overrides compose against verl's own
``ppo_trainer`` config and pass its ``validate_config`` (an unknown key fails). verl's ``fit()``
needs a GPU and a vLLM / SGLang rollout: not run here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("verl.trainer.ppo.core_algos")  # verl 0.9.1 (.venv-verl)

from verl import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402

from sdpo_kit.core.logprobs import kl_k3, masked_mean  # noqa: E402
from sdpo_kit.deploy.verl import export_verl  # noqa: E402
from sdpo_kit.deploy.verl_config import VerlExportError, compose  # noqa: E402
from sdpo_kit.grpo.verl import LOSS_AGG_MODE  # noqa: E402
from sdpo_kit.losses import aggregate_loss, gae, group_advantages  # noqa: E402
from sdpo_kit.registry import load_config  # noqa: E402


def batch(B=12, T=6, G=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(B, T)
    for i, n in enumerate(torch.randint(1, T + 1, (B,), generator=g).tolist()):
        mask[i, n:] = 0                                   # right padding, as verl's responses
    scores = torch.randint(0, 3, (B,), generator=g).float()
    token_rewards = torch.zeros(B, T)
    token_rewards[torch.arange(B), mask.sum(1).long() - 1] = scores   # the score on the last token
    return mask, scores, token_rewards, np.array([i // G for i in range(B)]), g


@pytest.mark.parametrize("scale_rewards", ["group", "none"])
def test_group_advantages_are_verls_grpo_advantage(scale_rewards):
    mask, scores, token_rewards, index, _ = batch()
    adv, _ = core_algos.compute_grpo_outcome_advantage(token_level_rewards=token_rewards, response_mask=mask,
                                                       index=index, epsilon=1e-6,
                                                       norm_adv_by_std_in_grpo=scale_rewards == "group")
    ours = group_advantages(scores, 4, scale_rewards, eps=1e-6)          # (B,), broadcast over tokens
    torch.testing.assert_close(adv, ours[:, None] * mask, rtol=0, atol=1e-6)


def test_gae_is_verls_gae():
    mask, _, token_rewards, _, g = batch()
    values = torch.randn(mask.shape, generator=g)
    for gamma, lam in ((1.0, 0.95), (0.99, 0.9)):
        adv_v, ret_v = core_algos.compute_gae_advantage_return(token_level_rewards=token_rewards, values=values,
                                                               response_mask=mask, gamma=gamma, lam=lam)
        adv, ret = gae(token_rewards, values, mask, gamma=gamma, lam=lam)
        torch.testing.assert_close(adv * mask, adv_v * mask, rtol=0, atol=1e-5)   # verl whitens too
        torch.testing.assert_close(ret * mask, ret_v * mask, rtol=0, atol=1e-6)


@pytest.mark.parametrize("loss_type", sorted(LOSS_AGG_MODE))
def test_loss_aggregations_are_verls_agg_loss(loss_type):
    mask, _, _, _, g = batch()
    per_token = torch.randn(mask.shape, generator=g)
    theirs = core_algos.agg_loss(per_token, mask, LOSS_AGG_MODE[loss_type],
                                 loss_scale_factor=mask.shape[1] if loss_type == "dr_grpo" else None)
    ours = aggregate_loss(per_token, mask, loss_type, max_completion_length=mask.shape[1])
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    # PPO's masked mean (trl 0.11.4) is verl's token-mean
    torch.testing.assert_close(masked_mean(per_token, mask), core_algos.agg_loss(per_token, mask, "token-mean"))


def test_k3_is_verls_low_var_kl_inside_its_clamp():
    _, _, _, _, g = batch()
    logp, ref = -torch.rand(4, 9, generator=g) * 3, -torch.rand(4, 9, generator=g) * 3
    torch.testing.assert_close(kl_k3(logp, ref), core_algos.kl_penalty(logp, ref, "low_var_kl"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """configs/demo.yaml exported, composed and validated against verl (check=True)."""
    cfg = load_config("configs/demo.yaml")
    out = export_verl(cfg, tmp_path_factory.mktemp("verl") / "demo", check=True)
    assert out["checked_with_verl"]
    return cfg, out


def verl_config(out):
    return compose([f"{k}={v}" for k, v in _resolved(out).items()])


def _resolved(out):
    from sdpo_kit.deploy.verl_config import hydra_value

    root = str(out["out_dir"].resolve())
    return {k: hydra_value(v.replace("$D", root) if isinstance(v, str) else v) for k, v in out["values"].items()}


def test_the_parquet_loads_through_rlhf_dataset_with_our_tokenizer(exported):
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from sdpo_kit import make_task

    cfg, out = exported
    config = verl_config(out)
    tokenizer = AutoTokenizer.from_pretrained(out["out_dir"] / "model")
    train, val = make_task(**cfg.task).splits()
    for files, rows in ((config.data.train_files, train), (config.data.val_files, val)):
        ds = RLHFDataset(files, tokenizer, config.data)
        assert len(ds) == len(rows)          # no prompt filtered as over data.max_prompt_length
        items = collate_fn([ds[i] for i in range(4)])
        for i in range(4):
            assert list(items["raw_prompt"][i]) == rows[i]["prompt"]
            assert items["reward_model"][i]["ground_truth"] == str(rows[i]["answer"])
            assert items["data_source"][i] == "sdpo_kit/arithmetic"
        text = tokenizer.apply_chat_template(list(items["raw_prompt"][0]), add_generation_prompt=True, tokenize=False)
        assert text.endswith("<|im_start|>assistant\n") and rows[0]["prompt"][-1]["content"] in text


def test_verls_reward_manager_scores_a_dataproto_as_our_trainers_do(exported):
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from sdpo_kit import make_task
    from sdpo_kit.rewards import compute_rewards, make_reward

    cfg, out = exported
    config = verl_config(out)
    tokenizer = AutoTokenizer.from_pretrained(out["out_dir"] / "model")
    ds = RLHFDataset(config.data.val_files, tokenizer, config.data)
    items = collate_fn([ds[i] for i in range(6)])
    answers = [str(a) for a in (r["ground_truth"] for r in items["reward_model"])]
    texts = [answers[0], str(int(answers[1]) + 1), f" {answers[2]}.", "x", answers[4][::-1] + "9", answers[5]]
    # the response ids verl's rollout would hand over: right padded, attention mask over prompt + response
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
    T = max(map(len, ids))
    responses = torch.tensor([r + [tokenizer.pad_token_id] * (T - len(r)) for r in ids])
    attention = torch.cat([torch.ones(6, 3, dtype=torch.long),
                           torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in ids])], dim=1)
    data = DataProto.from_dict(tensors={"responses": responses, "attention_mask": attention},
                               non_tensors={k: items[k] for k in ("data_source", "reward_model", "extra_info")})
    manager = load_reward_manager(config, tokenizer)
    run = manager.loop.run_until_complete                     # the event loop the manager was built on
    theirs = [run(manager.run_single(data[i:i + 1]))["reward_score"] for i in range(6)]
    rows = [{"prompt": list(p), "answer": a} for p, a in zip(items["raw_prompt"], answers)]
    ours, _ = compute_rewards(make_reward(cfg.reward, task=make_task(**cfg.task)), [r["prompt"] for r in rows],
                              [[{"role": "assistant", "content": t}] for t in texts], {"answer": answers})
    ours = ours.tolist()
    assert theirs == ours and sorted(set(ours)) == [0.0, 1.0]


def test_both_configs_compose_and_validate_and_an_unknown_key_fails(exported, tmp_path):
    from hydra.errors import ConfigCompositionException

    _, out = exported
    config = verl_config(out)
    assert config.algorithm.adv_estimator == "grpo" and config.actor_rollout_ref.rollout.n == 8
    assert config.actor_rollout_ref.actor.loss_agg_mode == "token-mean"
    ppo = export_verl(load_config("configs/teacher_student_ppo.yaml"), tmp_path / "ppo", check=True)
    assert ppo["checked_with_verl"] and ppo["values"]["critic.enable"] is True
    with pytest.raises(ConfigCompositionException, match="Could not override"):
        compose([*(f"{k}={v}" for k, v in _resolved(out).items()), "actor_rollout_ref.actor.no_such_key=1"])
    # 3 prompts x 3 samples cannot be split over 2 GPUs: verl's validate_config says so, nothing is kept
    bad = load_config("configs/demo.yaml", {"trainer.prompts_per_step": 3, "trainer.num_generations": 3})
    with pytest.raises(VerlExportError, match="rejected.*divisible"):
        export_verl(bad, tmp_path / "bad", n_gpus_per_node=2, check=True)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("reward", ["feedback", "environment"])
def test_a_feedback_reward_gives_verls_reward_loop_the_same_keys_on_every_row(reward, tmp_path):
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    cfg = load_config("configs/demo.yaml", {"reward": [{"type": reward}]})
    out = export_verl(cfg, tmp_path / "fb", check=True)
    config = verl_config(out)
    tokenizer = AutoTokenizer.from_pretrained(out["out_dir"] / "model")
    ds = RLHFDataset(config.data.val_files, tokenizer, config.data)
    items = collate_fn([ds[i] for i in range(2)])
    answers = [r["ground_truth"] for r in items["reward_model"]]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in (answers[0], str(int(answers[1]) + 1))]
    T = max(map(len, ids))
    data = DataProto.from_dict(
        tensors={"responses": torch.tensor([r + [tokenizer.pad_token_id] * (T - len(r)) for r in ids]),
                 "attention_mask": torch.tensor([[1] * 3 + [1] * len(r) + [0] * (T - len(r)) for r in ids])},
        non_tensors={k: items[k] for k in ("data_source", "reward_model", "extra_info")})
    manager = load_reward_manager(config, tokenizer)
    right, wrong = (manager.loop.run_until_complete(manager.run_single(data[i:i + 1])) for i in range(2))
    assert (right["reward_score"], wrong["reward_score"]) == (1.0, 0.0)
    assert set(right["reward_extra_info"]) == set(wrong["reward_extra_info"]) == {"score", "feedback"}
    assert right["reward_extra_info"]["feedback"] == "" and "too large" in wrong["reward_extra_info"]["feedback"]


@pytest.mark.skipif(os.name != "posix", reason="the sandbox needs a POSIX system")
def test_the_code_reward_scores_in_verls_reward_loop_as_our_trainers_do(tmp_path):
    """Code rows (tests as verl's ground truth, verl_rows(..., answer_field="tests")) scored by
    verl's reward manager through our reward module: per row the score and the feedback the local
    trainers get from the code reward, and the same extra-info keys on every row (1 / "" for a
    reference, 0 / Wrong Answer or Runtime Error for a wrong program, 0 / the format message)."""
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import load_reward_manager

    from sdpo_kit.deploy.verl import verl_rows
    from sdpo_kit.rewards import compute_rewards_with_feedback, load_code_problems, make_reward

    spec = [{"type": "code", "timeout_s": 5.0}]
    out = export_verl(load_config("configs/demo.yaml", {"reward": spec}), tmp_path / "code", check=True)
    config = verl_config(out)
    tokenizer = AutoTokenizer.from_pretrained(out["out_dir"] / "model")
    refs = json.loads((Path(__file__).parents[1] / "data" / "code_problem_references.json").read_text())
    rows = [r for r in load_code_problems() if r["problem_id"] in ("sum_two", "two_sum")]
    texts = [f"```python\n{refs[r['problem_id']]}```" for r in rows] + ["```python\nprint(0)\n```"] * 2 + ["print(0)"]
    rows = rows + rows + rows[:1]
    verl = verl_rows(rows, data_source="sdpo_kit/code", split="train", ability="code", answer_field="tests")
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
    B, T = len(ids), max(map(len, ids))
    data = DataProto.from_dict(
        tensors={"responses": torch.tensor([r + [tokenizer.pad_token_id] * (T - len(r)) for r in ids]),
                 "attention_mask": torch.cat([torch.ones(B, 3, dtype=torch.long),
                                              torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in ids])], dim=1)},
        non_tensors={k: np.array([v[k] for v in verl], dtype=object) for k in ("data_source", "reward_model", "extra_info")})
    manager = load_reward_manager(config, tokenizer)
    theirs = [manager.loop.run_until_complete(manager.run_single(data[i:i + 1])) for i in range(B)]
    total, _, feedbacks = compute_rewards_with_feedback(make_reward(spec), [r["prompt"] for r in rows],
                                                        [[{"role": "assistant", "content": t}] for t in texts],
                                                        {"tests": [r["tests"] for r in rows]})
    assert [t["reward_score"] for t in theirs] == total.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert [t["reward_extra_info"]["feedback"] for t in theirs] == [f or "" for f in feedbacks]
    assert all(set(t["reward_extra_info"]) == {"score", "feedback"} for t in theirs)
    assert feedbacks[:2] == [None, None] and re.match(r"Test Case \d+: Wrong Answer\n", feedbacks[2])
    assert feedbacks[3].startswith("Runtime Error\nNameError") and feedbacks[4].startswith("Incorrect Format")
