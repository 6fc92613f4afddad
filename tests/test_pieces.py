"""Your own pieces train: ``sdpo_kit.train(cfg, advantage_fn=..., loss_fn=..., distill_fn=..., gae_fn=...)``.

A learner's function equal to the library's math gives the library's run (every step's loss within 1e-5, the
same rewards); a wrong one changes the run; one that raises or returns the wrong shape stops the run at its
first call, naming itself and what was wrong; a setting it cannot express, or a trainer that does not take it,
is refused before the model loads.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from sdpo_kit.core.config import ConfigError
from sdpo_kit.core.pieces import PieceError
from sdpo_kit.training import train

SOLUTIONS = Path(__file__).resolve().parents[1] / "notebooks" / "solutions"


def solution(nb: str, name: str):
    spec = importlib.util.spec_from_file_location(f"solutions_{nb}", SOLUTIONS / f"{nb}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def grpo(tmp_path, **trainer) -> dict:
    """Scratch GRPO on the tiny lab, 3 steps of 2 passes each (the clip is active on the second)."""
    return {"algorithm": "grpo", "task": {"name": "arithmetic", "n_eval": 10}, "output_dir": str(tmp_path),
            "trainer": {"max_steps": 3, "prompts_per_step": 4, "num_generations": 4, "max_completion_length": 4,
                        "num_iterations": 2, "temperature": 1.0, "eval_every": 0, "log_completions_every": 0,
                        **trainer}}


def steps(summary) -> list[dict]:
    return [r for r in summary["history"] if "loss" in r]


def assert_same_run(mine, library):
    """Every step's loss within 1e-5 and the same rewards: the learner's pieces trained the library's run."""
    a, b = steps(mine), steps(library)
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        assert x["reward/mean"] == y["reward/mean"] and x["reward/std"] == y["reward/std"]
        assert abs(x["loss"] - y["loss"]) <= 1e-5, (x["step"], x["loss"], y["loss"])


def test_the_learners_grpo_advantage_and_loss_train_the_librarys_run(tmp_path):
    """Notebook 01's and 02's reference answers as advantage_fn and loss_fn: the same losses and rewards as the
    library's run, step by step."""
    library = train(grpo(tmp_path / "lib"))
    mine = train(grpo(tmp_path / "mine"), advantage_fn=solution("nb01", "my_group_advantages"),
                 loss_fn=solution("nb02", "my_grpo_loss"))
    assert_same_run(mine, library)


def test_a_wrong_advantage_changes_the_run(tmp_path):
    """An advantage with the sign flipped trains: the first step's rewards are the same (the same samples), its
    loss is not."""
    right = solution("nb01", "my_group_advantages")
    library = train(grpo(tmp_path / "lib"))
    flipped = train(grpo(tmp_path / "flip"), advantage_fn=lambda r, G: -right(r, G))
    first, first_lib = steps(flipped)[0], steps(library)[0]
    assert first["reward/mean"] == first_lib["reward/mean"]
    assert abs(first["loss"] - first_lib["loss"]) > 1e-3


@pytest.mark.parametrize("piece, fn, says", [
    ("advantage_fn", lambda r, G: r.view(-1, G).mean(1), "returned shape (4,); one advantage per completion"),
    ("advantage_fn", lambda r, G: 1 / 0, "raised ZeroDivisionError: division by zero"),
    ("loss_fn", lambda logp, old, A, m, eps: (logp * m).sum(1), "returned shape (16,); the loss is one number"),
    ("loss_fn", lambda logp, old, A, m, eps: torch.tensor(0.5), "returned a value with no gradient"),
    ("advantage_fn", lambda r, G: r.tolist(), "returned a list, not a torch.Tensor"),
])
def test_a_broken_piece_stops_the_run_at_its_first_call(tmp_path, piece, fn, says):
    """The message names the piece, the function and what was wrong; no step is logged."""
    with pytest.raises(PieceError) as e:
        train(grpo(tmp_path), **{piece: fn})
    msg = str(e.value)
    assert msg.startswith(f"{piece}: your ") and "<lambda>" in msg and says in msg, msg
    assert not (tmp_path / "model").exists() and not (tmp_path / "metrics.jsonl").read_text().count('"loss"')


@pytest.mark.parametrize("trainer, says", [
    ({"beta": 0.04}, "trainer.beta=0.04"),
    ({"loss_type": "grpo"}, "trainer.loss_type='grpo'"),
    ({"epsilon_high": 0.28}, "trainer.epsilon_high=0.28"),
    ({"sampling_dtype": "bfloat16"}, "trainer.sampling_dtype='bfloat16'"),
])
def test_a_setting_the_loss_cannot_express_is_refused_before_the_model_loads(tmp_path, monkeypatch, trainer, says):
    """beta, another loss_type, a second clip range, a bf16 sampler: a ConfigError naming the key, and no model
    loaded, no folder written."""
    import sdpo_kit.models

    monkeypatch.setattr(sdpo_kit.models, "load_policy", lambda *a, **k: pytest.fail("the model loaded"))
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(".", r"\.")):
        train(grpo(tmp_path / "run", **trainer), loss_fn=solution("nb02", "my_grpo_loss"))
    assert not (tmp_path / "run").exists()


def test_a_trainer_that_does_not_take_the_piece_refuses_it(tmp_path):
    """loss_fn on the TRL backend, gae_fn on GRPO: refused, naming what the trainer takes."""
    with pytest.raises(ConfigError, match=r"loss_fn: this trainer does not take it \(it takes: none\)"):
        train({**grpo(tmp_path), "backend": "trl"}, loss_fn=solution("nb02", "my_grpo_loss"))
    with pytest.raises(ConfigError, match=r"gae_fn: this trainer does not take it \(it takes: advantage_fn, loss_fn\)"):
        train(grpo(tmp_path), gae_fn=lambda r, v, g, lam: r)
    with pytest.raises(ConfigError, match="scale_rewards"):
        train(grpo(tmp_path, scale_rewards="none"), advantage_fn=solution("nb01", "my_group_advantages"))


def sdpo(tmp_path, **trainer) -> dict:
    return {**grpo(tmp_path, **trainer), "algorithm": "sdpo"}


def sampled_token_kl(student_logits, teacher_logits, completion_ids):
    """The sampled-token surrogate written out: sg(log s - log t) * log s on each sampled token, (B, T)."""
    ids = completion_ids.unsqueeze(-1)                                             # (B, T, 1)
    s = torch.log_softmax(student_logits, -1).gather(-1, ids).squeeze(-1)          # (B, T)
    t = torch.log_softmax(teacher_logits, -1).gather(-1, ids).squeeze(-1)          # (B, T)
    return (s - t).detach() * s                                                    # (B, T)


def test_the_learners_distillation_loss_trains_the_librarys_sdpo_run(tmp_path):
    """SDPO's per-token loss written out (sampled_token), and notebook 05's top-k with a tail bucket under
    topk_logits with add_tail: each gives the library's run."""
    assert_same_run(train(sdpo(tmp_path / "mine"), distill_fn=sampled_token_kl), train(sdpo(tmp_path / "lib")))
    topk = solution("nb05", "my_topk_tail_kl")
    k = dict(distillation_mode="topk_logits", distillation_topk=5, distillation_add_tail=True)
    assert_same_run(train(sdpo(tmp_path / "mine_k", **k), distill_fn=lambda s, t, ids: topk(s, t, 5)),
                    train(sdpo(tmp_path / "lib_k", **k)))


def test_the_sequence_mode_refuses_a_distillation_loss(tmp_path):
    with pytest.raises(ConfigError, match="distillation_mode='sequence'"):
        train(sdpo(tmp_path, distillation_mode="sequence"), distill_fn=sampled_token_kl)


def my_gae(rewards, values, gamma, lam):
    """GAE written as a learner would: from the last token back, (B, T)."""
    advantages, running = torch.zeros_like(rewards), torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.size(1))):
        next_value = values[:, t + 1] if t + 1 < rewards.size(1) else torch.zeros_like(running)
        running = rewards[:, t] + gamma * next_value - values[:, t] + gamma * lam * running
        advantages[:, t] = running
    return advantages


def ppo(tmp_path) -> dict:
    return {"algorithm": "ppo", "task": {"name": "arithmetic", "n_eval": 10}, "output_dir": str(tmp_path),
            "trainer": {"max_steps": 3, "batch_size": 8, "mini_batch_size": 4, "ppo_epochs": 2, "kd_coef": 0.0,
                        "teacher_model": None, "max_completion_length": 4, "eval_every": 0,
                        "log_completions_every": 0}}


def test_the_learners_gae_trains_the_librarys_ppo_run(tmp_path):
    """A GAE written from the last token back gives the library's PPO run; a broken one stops it."""
    assert_same_run(train(ppo(tmp_path / "mine"), gae_fn=my_gae), train(ppo(tmp_path / "lib")))
    with pytest.raises(PieceError, match=r"gae_fn: your .*returned shape \(8,\)"):
        train(ppo(tmp_path / "bad"), gae_fn=lambda r, v, g, lam: r.sum(1))
