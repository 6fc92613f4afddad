"""GRPO (notebooks 01 and 02).

    loss.py    group-relative advantages, the four loss aggregations, ``grpo_loss`` (pure math)
    config.py  GRPOFields (both backends' knobs), GRPOScratchConfig (scratch), GRPOTRLConfig (TRL backend);
               no TRL import
    loop.py    GRPO from scratch on the shared scaffold (GRPOScratchTrainer)
    pieces.py  the pieces a learner may write: the advantage (``advantage_fn``) and the loss (``loss_fn``)
    verl.py    GRPO's settings in verl's keys (``sdpo-kit export-verl``)
    algorithm.py  GRPO as the library sees it: ``GRPO`` (backends, pieces, verl), registered by ``sdpo_kit.registry``
    trl.py     GRPO on ``trl.GRPOTrainer`` (grpo_args, build_trl_grpo_trainer, build_from_config)
"""
