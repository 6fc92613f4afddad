"""SDPO's piece a learner may write: the per-token distillation loss (notebook 05).

    distill_fn(student_logits, teacher_logits, completion_ids) -> per-token loss    (B, T, V), (B, T, V), (B, T)
                                                                                    in; (B, T) out

It stands in for ``loss.sdpo_per_token_loss`` of the config's ``distillation_mode`` (the top-k with a tail
bucket: ``distillation_mode: topk_logits``, ``distillation_add_tail: true``); the importance correction, the
masking and the mean over each sequence's tokens stay the library's. ``sdpo_kit.train(cfg, distill_fn=...)``
trains scratch SDPO with it (``core.pieces`` checks every call). Refused before the model loads: the
``sequence`` mode, whose weight sums each completion's log-ratios over its mask, which the function is not given.
"""

from __future__ import annotations

from sdpo_kit.core.pieces import Piece, tensor_problem


def _distill_problem(result, student_logits, teacher_logits, completion_ids) -> str | None:
    return tensor_problem(result, completion_ids.shape, "one loss per completion token, (B, T)",
                          needs_grad=student_logits.requires_grad)


def _refuse_distill(config) -> str | None:
    if config.distillation_mode == "sequence":
        return ("trainer.distillation_mode='sequence' weighs each token by its completion's summed log-ratio, which "
                "needs the mask distill_fn is not given; use sampled_token, topk_logits or full_logits")
    return None


DISTILL = Piece("distill_fn", "distill_fn(student_logits (B, T, V), teacher_logits (B, T, V), completion_ids (B, T)) "
                "-> per-token loss (B, T)", "sdpo_kit.losses.sdpo_per_token_loss of the config's distillation_mode",
                _distill_problem, _refuse_distill)
PIECES = {DISTILL.name: DISTILL}
