"""SDPO: self-distillation from the policy shown more context (notebooks 05 and 06).

    loss.py       ``sdpo_loss`` (= trl.experimental.sdpo), ``generalized_jsd`` (pure math)
    teacher.py    the live / base / EMA teacher, held in the reference slot; teacher_prompt_batch
    config.py     SDPOFields (SDPO's knobs, the teacher batch), SDPOScratchConfig, SDPOTRLConfig; no TRL import
    loop.py       SDPO from scratch (SDPOScratchTrainer)
    pieces.py     the piece a learner may write: the per-token distillation loss (``distill_fn``)
    algorithm.py  SDPO as the library sees it: ``SDPO`` (backends, metric keys, pieces), registered by the registry
    trl.py        SDPO on TRL (SDPOTRLArgs(trl.GRPOConfig), SDPOTRLTrainer(trl.GRPOTrainer))
    quality.py    what the model does with the teacher's context (accuracy, per-token wins)
    multi_turn.py  multi-turn reprompting with feedback at test time (no training), best-of-N
    at_test_time.py  test-time SDPO (trains a copy on one question), discovery curves, hard rows (named
                  for when it runs; a ``test_*.py`` name reads as a test file to people and to pytest)
"""

from sdpo_kit.core.lazy import lazy_exports

EXPORTS = {   # SDPO's public pieces: sk.sdpo.Teacher, sk.sdpo.reprompt, ...
    "Teacher": "sdpo_kit.sdpo.teacher:Teacher",
    "ema_update": "sdpo_kit.sdpo.teacher:ema_update",
    "teacher_prompt_batch": "sdpo_kit.sdpo.teacher:teacher_prompt_batch",
    "reprompt": "sdpo_kit.text.reprompt:reprompt",
    "build_teacher_prompts": "sdpo_kit.text.reprompt:build_teacher_prompts",
    "REPROMPT_TEMPLATE": "sdpo_kit.text.reprompt:REPROMPT_TEMPLATE",
    "SOLUTION_TEMPLATE": "sdpo_kit.text.reprompt:SOLUTION_TEMPLATE",
    "FEEDBACK_TEMPLATE": "sdpo_kit.text.reprompt:FEEDBACK_TEMPLATE",
    "teacher_quality": "sdpo_kit.sdpo.quality:teacher_quality",
    "multi_turn_reprompting": "sdpo_kit.sdpo.multi_turn:multi_turn_reprompting",
    "score_completions": "sdpo_kit.sdpo.multi_turn:score_completions",
    "best_of_n": "sdpo_kit.sdpo.multi_turn:best_of_n",
    "test_time_sdpo": "sdpo_kit.sdpo.at_test_time:test_time_sdpo",
    "sdpo_step": "sdpo_kit.sdpo.at_test_time:sdpo_step",
    "feedback_teacher_prompts": "sdpo_kit.sdpo.at_test_time:feedback_teacher_prompts",
    "discovery_curves": "sdpo_kit.sdpo.at_test_time:discovery_curves",
    "success_rates": "sdpo_kit.sdpo.at_test_time:success_rates",
    "hard_rows": "sdpo_kit.sdpo.at_test_time:hard_rows",
    "build_sdpo_from_config": "sdpo_kit.sdpo.trl:build_sdpo_from_config",   # imports TRL: after load_policy
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
