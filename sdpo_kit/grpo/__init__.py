"""GRPO (notebooks 01 and 02).

    loss.py    group-relative advantages, the four loss aggregations, ``grpo_loss`` (pure math)
    config.py  GRPOSettings (both backends' knobs), GRPOLoopConfig (scratch; its old name GRPOConfig is a
               deprecated alias), TRLGRPOConfig (TRL backend); no TRL import
    loop.py    GRPO from scratch on the shared scaffold (GRPOLoop)
    pieces.py  the pieces a learner may write: the advantage (``advantage_fn``) and the loss (``loss_fn``)
    trl.py     GRPO on ``trl.GRPOTrainer`` (grpo_args, build_trl_grpo_trainer, build_from_config)
"""
