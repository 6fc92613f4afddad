"""VAPOR: GRPO plus a preference term on tagged spans (notebook 04).

    loss.py   ``preference_log_term``, ``vapor_loss``, ``preference_dpo_loss`` (pure math)
    spans.py  finding tagged character spans and the tokens that cover them
    parts.py  the pieces both backends share: preference batches, span masks, span log-probs
    config.py VAPORFields (VAPOR's knobs), VAPORLoopConfig, TRLVAPORConfig; no TRL import
    loop.py   VAPOR from scratch (VAPORLoop)
    trl.py    VAPOR on TRL (VAPORConfig(trl.GRPOConfig), VAPORTrainer(trl.GRPOTrainer))
    tasks.py  VAPOR's data for a real instruct model: tagged word problems with a chosen / rejected pair,
              registered as ``vapor_word_problems`` in ``lab.tasks.TASKS`` when this package is imported
"""

from sdpo_kit.vapor import tasks  # noqa: F401 (registers "vapor_word_problems"; the lab does not import vapor/)
