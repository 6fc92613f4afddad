"""GRPO's pieces a learner may write: the group-relative advantage (notebook 01) and the clipped loss (02).

    advantage_fn(rewards, num_generations) -> advantages        (B,) in, (B,) out, as ``loss.group_advantages``
    loss_fn(logp, old_logp, advantages, mask, epsilon) -> loss  a scalar, as ``loss.grpo_loss`` with
                                                                loss_type "dapo" and no KL term

``sdpo_kit.train(cfg, advantage_fn=..., loss_fn=...)`` trains scratch GRPO with them (``core.pieces``
checks every call). A config they cannot express is refused before the model loads: the advantage has no
``scale_rewards`` knob (it is the group's, yours decides), and the loss has no KL term, one clip range,
the token mean over the batch and no correction for samples another policy drew.
"""

from __future__ import annotations

from sdpo_kit.core.pieces import Piece, tensor_problem


def _advantage_problem(result, rewards, num_generations) -> str | None:
    return tensor_problem(result, rewards.shape, "one advantage per completion, like the rewards")


def _loss_problem(result, logp, old_logp, advantages, mask, epsilon) -> str | None:
    return tensor_problem(result, (), "the loss is one number, a 0-d tensor", needs_grad=logp.requires_grad)


def _refuse_advantage(config) -> str | None:
    if config.scale_rewards != "group":
        return (f"advantage_fn takes the place of trainer.scale_rewards ({config.scale_rewards!r}): your function "
                "decides how a group's rewards are scaled; leave scale_rewards at 'group'")
    return None


def _refuse_loss(config) -> str | None:
    if config.beta != 0.0:
        return (f"trainer.beta={config.beta}: loss_fn(logp, old_logp, advantages, mask, epsilon) has no KL term "
                "and no reference log-probs; set trainer.beta: 0")
    if config.loss_type != "dapo":
        return (f"trainer.loss_type={config.loss_type!r}: loss_fn averages over the batch's completion tokens "
                "(loss_type 'dapo'); set trainer.loss_type: dapo")
    if config.epsilon_high is not None and config.epsilon_high != config.epsilon:
        return (f"trainer.epsilon_high={config.epsilon_high}: loss_fn gets one clip range, epsilon={config.epsilon}; "
                "leave epsilon_high unset")
    if config.sampling_dtype == "bfloat16":
        return ("trainer.sampling_dtype='bfloat16': loss_fn has no correction for samples a bf16 copy drew; "
                "set float32 or auto (auto samples with the policy under loss_fn)")
    return None


ADVANTAGE = Piece("advantage_fn", "advantage_fn(rewards (B,), num_generations) -> advantages (B,)",
                  "sdpo_kit.losses.group_advantages", _advantage_problem, _refuse_advantage)
LOSS = Piece("loss_fn", "loss_fn(logp (B, T), old_logp (B, T), advantages (B,), mask (B, T), epsilon) -> loss ()",
             "sdpo_kit.losses.grpo_loss with loss_type='dapo', beta=0", _loss_problem, _refuse_loss)
PIECES = {p.name: p for p in (ADVANTAGE, LOSS)}
