"""An algorithm is one folder: what the library knows about it is declared in its package and read from there.

A toy algorithm, GRPO under another name with a panel and a metric key of its own, is declared in a temporary
package that is not part of sdpo_kit, registered with ``sk.register_algorithm("toy_algo:TOY")``, and trained one
step through ``sk.train``: no library file is edited. The library's four are read the same way: the config
check, the builder, the dashboard's panels, the teacher flag, the dataset refusal, the pieces, the verl mapping.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

import sdpo_kit as sk
from sdpo_kit import registry

TOY = textwrap.dedent('''
    from sdpo_kit.core.algorithm import Algorithm, Backend
    from sdpo_kit.viz.panels import Panel

    TOY = Algorithm(
        name="toy_grpo",
        backends={"scratch": Backend(config="sdpo_kit.grpo.config:GRPOScratchConfig",
                                     build="toy_algo.trainer:ToyTrainer", pieces="sdpo_kit.grpo.pieces:PIECES")},
        panels=(Panel("toy: the step's mean advantage magnitude", ("toy/abs_advantage",)),),
        metric_keys={"toy/abs_advantage": "mean |A| over the step's completions"},
    )
''')
TRAINER = textwrap.dedent('''
    from sdpo_kit.grpo.loop import GRPOScratchTrainer


    class ToyTrainer(GRPOScratchTrainer):
        def advantages(self, rewards):
            A = super().advantages(rewards)
            self.last_abs = A.abs().mean().item()
            return A

        def step(self):
            row = super().step()
            return {**row, "toy/abs_advantage": self.last_abs}
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    pkg = tmp_path / "toy_algo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(TOY)
    (pkg / "trainer.py").write_text(TRAINER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield sk.register_algorithm("toy_algo:TOY")
    registry.ALGORITHMS.pop("toy_grpo", None)
    for name in [m for m in sys.modules if m.startswith("toy_algo")]:
        del sys.modules[name]


def test_a_toy_algorithm_from_a_package_of_its_own_trains_through_sk_train(toy, tmp_path):
    """Registered from outside the library: its config is checked, its trainer built, its panel drawn and its
    metric logged and named; a learner's advantage_fn (GRPO's pieces) trains it too."""
    assert "toy_grpo" in registry.algorithms() and registry.backends("toy_grpo") == ["scratch"]
    cfg = {"algorithm": "toy_grpo", "task": {"name": "arithmetic", "n_eval": 8}, "output_dir": str(tmp_path / "run"),
           "trainer": {"max_steps": 1, "prompts_per_step": 2, "num_generations": 2, "max_completion_length": 4,
                       "eval_every": 0}}
    summary = sk.train(cfg)
    (row,) = [r for r in summary["history"] if "loss" in r]
    assert "toy/abs_advantage" in row and row["toy/abs_advantage"] >= 0
    assert registry.metric_keys()["toy/abs_advantage"].startswith("mean |A|")
    assert registry.panels_for("toy_grpo")[-1].keys == ("toy/abs_advantage",)
    assert (tmp_path / "run" / "reward_curve.png").exists()
    with pytest.raises(sk.ConfigError, match=r"toy_grpo/scratch: trainer.beta=0.1: loss_fn"):
        sk.train({**cfg, "trainer": {**cfg["trainer"], "beta": 0.1}}, loss_fn=lambda *a: None)


def test_the_librarys_algorithms_are_read_from_their_declarations():
    """What used to be lists elsewhere is each algorithm's own: teacher, dataset refusal, panels, verl, pieces."""
    from sdpo_kit.grpo.config import GRPOScratchConfig

    grpo, vapor, sdpo, ppo = (registry.get_algorithm(n) for n in ("grpo", "vapor", "sdpo", "ppo"))
    assert not grpo.teacher_in_step(GRPOScratchConfig()) and grpo.teacher_in_step(GRPOScratchConfig(beta=0.1))
    assert sdpo.teacher_in_step(None) and ppo.teacher_in_step(None)
    assert vapor.dataset_refusal and grpo.dataset_refusal is None and sdpo.dataset_refusal is None
    assert registry.verl_algorithms() == ["grpo", "ppo"]
    assert {k for p in registry.panels_for("ppo") for k in p.keys} >= {"loss/value", "stats/kl_coef"}
    assert set(registry.get_trainer("grpo", "scratch").learner_pieces) == {"advantage_fn", "loss_fn"}
    assert set(registry.get_trainer("ppo", "scratch").learner_pieces) == {"gae_fn"}
    assert registry.get_trainer("sdpo", "trl").learner_pieces == {}
    with pytest.raises(ValueError, match="no algorithm 'nope'; registered: grpo, ppo, sdpo, vapor"):
        registry.get_algorithm("nope")
