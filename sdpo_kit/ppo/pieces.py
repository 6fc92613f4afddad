"""PPO's piece a learner may write: generalised advantage estimation (notebook 07).

    gae_fn(rewards, values, gamma, lam) -> advantages      (B, T), (B, T) in (already masked), (B, T) out

It stands in for ``loss.gae_advantages``, the recursion delta_t = r_t + gamma V_{t+1} - V_t,
A_t = delta_t + gamma lam A_{t+1}; the masking before it, the returns R = A + V and the whitening after it stay
the library's (``loss.gae``). ``sdpo_kit.train(cfg, gae_fn=...)`` trains teacher-student PPO with it
(``core.pieces`` checks every call); every PPO setting can train with it.
"""

from __future__ import annotations

from sdpo_kit.core.pieces import Piece, tensor_problem


def _gae_problem(result, rewards, values, gamma, lam) -> str | None:
    return tensor_problem(result, rewards.shape, "one advantage per response token, like the rewards (B, T)")


GAE = Piece("gae_fn", "gae_fn(rewards (B, T), values (B, T), gamma, lam) -> advantages (B, T)",
            "sdpo_kit.losses.gae_advantages", _gae_problem)
PIECES = {GAE.name: GAE}
