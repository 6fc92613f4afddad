"""Teacher-student PPO with a critic (notebook 07; = trl 0.11.4).

    loss.py        GAE, the PPO loss, KL controllers, score scaling, Hinton's KD (pure math)
    value_head.py  PolicyWithValueHead: a scalar value head on the policy's trunk
    config.py      PPOScratchConfig (the YAML ``trainer:`` section of ``algorithm: ppo``)
    trainer.py     PPOScratchTrainer on the shared scratch scaffold
    pieces.py      the piece a learner may write: the GAE recursion (``gae_fn``)
    verl.py        PPO's settings in verl's keys (``sdpo-kit export-verl``)
    algorithm.py   PPO as the library sees it: ``PPO`` (backend, panels, metric keys, pieces, verl)
"""
