"""VAPOR: GRPO plus a preference term on tagged spans (notebook 04).

    loss.py   ``preference_log_term``, ``vapor_loss``, ``preference_dpo_loss`` (pure math)
    spans.py  finding tagged character spans and the tokens that cover them
    parts.py  the pieces both backends share: preference batches, span masks, span log-probs
    config.py VAPORFields (VAPOR's knobs), VAPORScratchConfig, VAPORTRLConfig; no TRL import
    loop.py   VAPOR from scratch (VAPORScratchTrainer)
    trl.py    VAPOR on TRL (VAPORTRLArgs(trl.GRPOConfig), VAPORTRLTrainer(trl.GRPOTrainer))
    tasks.py  VAPOR's data for a real instruct model: tagged word problems with a chosen / rejected pair,
              registered as ``vapor_word_problems`` in ``tasks.base.TASKS`` when VAPOR is registered
    algorithm.py  VAPOR as the library sees it (backends, panels, metric keys, its tasks): ``VAPOR``
"""

from sdpo_kit.core.lazy import lazy_exports

EXPORTS = {   # VAPOR's public pieces: sk.vapor.preference_batch, ...
    "vapor_objective": "sdpo_kit.vapor.loop:vapor_objective",
    "completion_span_mask": "sdpo_kit.vapor.parts:completion_span_mask",
    "preference_batch": "sdpo_kit.vapor.parts:preference_batch",
    "preference_span_logps": "sdpo_kit.vapor.parts:preference_span_logps",
    "reference_span_logps": "sdpo_kit.vapor.parts:reference_span_logps",
    "preference_margin": "sdpo_kit.vapor.parts:preference_margin",
    "find_span_token_indices": "sdpo_kit.vapor.spans:find_span_token_indices",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
