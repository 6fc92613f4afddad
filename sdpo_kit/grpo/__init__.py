"""GRPO (notebooks 01 and 02).

    loss.py   group-relative advantages, the four loss aggregations, ``grpo_loss`` (pure math)
    loop.py   GRPO from scratch on the shared scaffold (GRPOSettings, GRPOConfig, GRPOLoop)
    trl.py    GRPO on ``trl.GRPOTrainer`` (TRLGRPOConfig, build_trl_grpo_trainer)
"""
