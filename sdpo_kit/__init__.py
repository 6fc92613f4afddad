"""sdpo_kit: a notebook-first toolkit for RL post-training of language models.

The rooms, floor by floor from the bottom; a room imports its own modules and lower floors only
(``tests/test_layout.py`` holds the order):

    1  core/                the machinery every algorithm runs on: log-probs, sampling, the scratch scaffold,
                            checkpoints, metrics, plots, the run config
    2  text/                answer rules and ``completion_text``; SDPO's teacher prompts (``text.reprompt``)
    3  sandbox/             running model-written Python in a locked-down child process, graded by test cases
    4  lab/                 the offline tiny lab (model, tokenizer, warm start) and its tasks
    5  rewards/, models.py  reward functions with TRL's signature; ``load_policy`` for every model
    6  grpo/, ppo/          one folder per algorithm: loss.py (the math), config.py, loop.py, trl.py / trainer.py
    7  sdpo/, vapor/        the algorithms built on GRPO's loop
    8  losses/              every algorithm's loss functions in one import
    9  registry.py          (algorithm, backend) -> trainer, ``load_config``, ``make_task``
    10 deploy/, training.py exports and ``sdpo-kit eval``; ``train(cfg)``, the training API
    11 course/, cli.py      the notebooks' setup and checks; the ``sdpo-kit`` command
"""

__version__ = "0.1.0"
