"""SDPO: self-distillation from the policy shown more context (notebooks 05 and 06).

    loss.py       ``sdpo_loss`` (= trl.experimental.sdpo), ``generalized_jsd`` (pure math)
    teacher.py    the live / base / EMA teacher, held in the reference slot; teacher_prompt_batch
    config.py     SDPOFields (SDPO's knobs, the teacher batch), SDPOLoopConfig, TRLSDPOConfig; no TRL import
    loop.py       SDPO from scratch (SDPOLoop)
    pieces.py     the piece a learner may write: the per-token distillation loss (``distill_fn``)
    trl.py        SDPO on TRL (SDPOConfig(trl.GRPOConfig), SDPOTrainer(trl.GRPOTrainer))
    teacher_quality.py  what the model does with the teacher's context (accuracy, per-token wins)
    multi_turn.py  multi-turn reprompting with feedback at test time (no training), best-of-N
    at_test_time.py  test-time SDPO (trains a copy on one question), discovery curves, hard rows (named
                  for when it runs; a ``test_*.py`` name reads as a test file to people and to pytest)
"""
