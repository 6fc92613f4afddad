"""The exercises' checks: run a learner's code against the library's on random inputs and say what differs.

    check_group_advantages (notebook 01), check_grpo_loss (02), check_sampled_token_loss (05), check_gae (07):
    the pieces ``sdpo_kit.train`` takes as advantage_fn, loss_fn, distill_fn and gae_fn

    with exercise("exercise 1") as ex1:          # a stub (NotImplementedError) is "not written yet", not a crash
        check_group_advantages(my_group_advantages)
    advantage_fn = ex1.pick(my_group_advantages, group_advantages)   # yours once it passed, else the library's
    check_grpo_loss(my_grpo_loss)                # the same, for the GRPO loss of notebook 02

A check raises ``ExerciseFailed`` (an ``AssertionError``) naming the first input where the learner's answer
and the library's part, both values and, when it can tell, the usual mistake that gives the learner's value
(the population std, a missing eps, the padding counted, the clip on the wrong side, ...). It returns a
short report on success.

``exercise`` lets a notebook run top to bottom before the learner has written anything: inside it, a
``NotImplementedError`` prints "not written yet" and the notebook goes on. It yields an ``Exercise`` whose
``pick(yours, library)`` is what the notebook's next run trains with: the learner's function once its check
passed, the library's while the exercise is blank; it prints which. With ``SDPO_KIT_SOLUTIONS=1``
(CI, which loads the reference answers from ``notebooks/solutions`` into the notebook) a stub is an error:
the answer was not loaded, and the check would otherwise prove nothing.

Left out on purpose: grading. A check compares with the library and explains; it keeps no score.
"""

from __future__ import annotations

import contextlib
import os

import torch

SOLUTIONS_ENV = "SDPO_KIT_SOLUTIONS"


class ExerciseFailed(AssertionError):
    """The learner's answer differs from the library's (the message says where and how)."""


class Exercise:
    """An exercise's outcome: ``passed`` once its check ran to the end."""

    def __init__(self, name: str):
        self.name, self.passed = name, False

    def pick(self, yours, library=None, what: str = "trains with"):
        """``yours`` once the check passed, else ``library`` (None: the library's own, as ``sdpo_kit.train``
        takes it); prints which."""
        if self.passed:
            print(f"{what}: yours, {getattr(yours, '__name__', yours)} ({self.name} passed its check)")
            return yours
        theirs = f" {library.__name__}" if library is not None and hasattr(library, "__name__") else ""
        print(f"{what}: the library's{theirs} ({self.name} is not written yet: write it and run its check)")
        return library


@contextlib.contextmanager
def exercise(name: str):
    """Run an exercise's check; a stub's ``NotImplementedError`` prints that ``name`` is not written yet
    (an error with ``SDPO_KIT_SOLUTIONS=1``, where the reference answer should have been loaded). Yields the
    ``Exercise``: ``passed`` is set when the block ends without an error."""
    ex = Exercise(name)
    try:
        yield ex
        ex.passed = True
    except NotImplementedError as e:
        if os.environ.get(SOLUTIONS_ENV) == "1":
            raise AssertionError(f"{name}: the reference answer was not loaded (notebooks/solutions), "
                                 f"the stub ran: {e}") from e
        print(f"{name}: not written yet ({e or 'NotImplementedError'}). Write it in the cell above and run "
              "this cell again; the notebook goes on without it.")


def _close(a, b, atol=1e-5, rtol=1e-4) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=rtol,
                                                                                  equal_nan=False)


def _first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    bad = ~torch.isclose(got, want, atol=1e-5, rtol=1e-4)
    i = int(bad.flatten().nonzero()[0]) if bad.any() else 0
    return (f"first difference at flat index {i}: yours {got.flatten()[i].item():.6g}, "
            f"the library's {want.flatten()[i].item():.6g} (max |difference| {(got - want).abs().max().item():.3g})")


def _diagnose(got, want, variants: dict) -> str:
    """Which known mistake gives ``got`` (the first variant it matches), else where it differs."""
    if not isinstance(got, torch.Tensor):
        return f"it returned a {type(got).__name__}, not a torch.Tensor"
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)}, the library's is {tuple(want.shape)}"
    if not torch.isfinite(got).all():
        where = (~torch.isfinite(got)).flatten().nonzero()[0].item()
        return f"it returned nan or inf (first at flat index {where}): a division by zero?"
    for mistake, value in variants.items():
        if _close(got, value):
            return mistake
    return _first_difference(got, want)


# --- notebook 01: the group-relative advantage --------------------------------------------------
def advantage_cases(seed: int = 0) -> list[tuple[str, torch.Tensor, int]]:
    """(description, rewards (B,), G): random rewards, 0/1 rewards, and a group whose rewards are all equal."""
    g = torch.Generator().manual_seed(seed)
    return [
        ("random rewards, 3 groups of 4", torch.randn(12, generator=g), 4),
        ("0/1 rewards, 4 groups of 8", torch.randint(0, 2, (32,), generator=g).float(), 8),
        ("a group whose 4 rewards are all 1 (and one mixed group)", torch.tensor([1.0, 1, 1, 1, 0, 1, 0, 0]), 4),
        ("2 groups of 2", torch.tensor([0.5, -1.0, 2.0, 2.5]), 2),
    ]


def check_group_advantages(fn, eps: float = 1e-4) -> str:
    """``fn(rewards (B,), G) -> (B,)`` against ``grpo.loss.group_advantages`` (the group's unbiased std,
    plus ``eps``) on ``advantage_cases``; raises ``ExerciseFailed`` saying what differs."""
    from sdpo_kit.grpo.loss import group_advantages

    for what, rewards, G in advantage_cases():
        want = group_advantages(rewards, G, eps=eps)                                  # (B,)
        got = fn(rewards.clone(), G)
        if _close(got, want):
            continue
        grouped = rewards.view(-1, G)                                                 # (B/G, G)
        centred = (grouped - grouped.mean(1, keepdim=True))                           # (B/G, G)
        variants = {
            "you divide by the population std (unbiased=False, divides by G); the library uses the unbiased "
            "one (divides by G - 1), as TRL does": (centred / (grouped.std(1, unbiased=False, keepdim=True) + eps)).flatten(),
            "you do not divide by the group's std (that is scale_rewards='none', Dr. GRPO's choice)": centred.flatten(),
            "you subtract the mean of the whole batch, not of each prompt's group":
                ((rewards - rewards.mean()).view(-1, G) / (grouped.std(1, keepdim=True) + eps)).flatten(),
            "you divide by the std of the whole batch, not of each group (scale_rewards='batch')":
                (centred / (rewards.std() + eps)).flatten(),
            "the eps goes outside the division or is missing where the std is not 0": (
                centred / grouped.std(1, keepdim=True).clamp_min(eps)).flatten(),
        }
        raise ExerciseFailed(f"on {what} (G={G}): {_diagnose(got, want, variants)}.\n"
                             f"  rewards:  {[round(x, 3) for x in rewards.tolist()]}\n"
                             f"  library:  {[round(x, 3) for x in want.tolist()]}\n"
                             f"  yours:    {[round(x, 3) for x in got.flatten().tolist()] if isinstance(got, torch.Tensor) else got}")
    return f"your advantages equal the library's on {len(advantage_cases())} batches (tolerance 1e-5)"


# --- notebook 02: the GRPO loss ------------------------------------------------------------------
def loss_cases(seed: int = 0) -> list[tuple[str, dict]]:
    """(description, inputs of ``grpo_loss``): ratios near 1 and far from it, padding, negative advantages."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for what, B, T, spread in (("ratios near 1 (the clip inactive)", 4, 5, 0.05),
                               ("ratios far from 1 (the clip active on both sides)", 6, 7, 0.6),
                               ("8 completions of different lengths", 8, 6, 0.3)):
        old = -torch.rand(B, T, generator=g) * 3                                      # (B, T)
        logp = old + torch.randn(B, T, generator=g) * spread                          # (B, T)
        lengths = torch.randint(1, T + 1, (B,), generator=g)                          # (B,)
        mask = (torch.arange(T)[None] < lengths[:, None]).float()                     # (B, T)
        advantages = torch.randn(B, generator=g)                                      # (B,)
        out.append((what, dict(logp=logp, old_logp=old, advantages=advantages, mask=mask)))
    return out


def check_grpo_loss(fn, epsilon: float = 0.2) -> str:
    """``fn(logp, old_logp, advantages, mask, epsilon) -> scalar`` against ``grpo.loss.grpo_loss`` with
    ``loss_type="dapo"`` (the token mean over the batch) and no KL: the value and its gradient with respect
    to ``logp``, on ``loss_cases``. Raises ``ExerciseFailed`` saying what differs."""
    from sdpo_kit.grpo.loss import aggregate_loss, grpo_loss

    for what, case in loss_cases():
        logp_ref = case["logp"].clone().requires_grad_(True)
        want, _ = grpo_loss(logp_ref, case["old_logp"], case["advantages"], case["mask"], epsilon=epsilon,
                            loss_type="dapo")                                          # scalar
        want.backward()
        logp = case["logp"].clone().requires_grad_(True)
        got = fn(logp, case["old_logp"].clone(), case["advantages"].clone(), case["mask"].clone(), epsilon)
        if not isinstance(got, torch.Tensor) or got.dim() != 0:
            raise ExerciseFailed(f"on {what}: return one number (a 0-d tensor), got "
                                 f"{tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}")
        if _close(got.detach(), want.detach()):
            if not got.requires_grad:
                raise ExerciseFailed(f"on {what}: the value is right but it carries no gradient (a .detach(), "
                                     ".item() or torch.no_grad() in the way?)")
            got.backward()
            if logp.grad is None or not _close(logp.grad, logp_ref.grad):
                raise ExerciseFailed(f"on {what}: the value is right, the gradient with respect to logp is not: "
                                     f"{_first_difference(logp.grad if logp.grad is not None else torch.zeros_like(logp_ref.grad), logp_ref.grad)}. "
                                     "Did old_logp carry a gradient, or a mask multiply after a detach?")
            continue
        ratio = torch.exp(case["logp"] - case["old_logp"])                           # (B, T)
        A, m = case["advantages"][:, None], case["mask"]
        unclipped = -(ratio * A)                                                      # (B, T)
        clipped = -torch.min(ratio * A, ratio.clamp(1 - epsilon, 1 + epsilon) * A)   # (B, T)
        variants = {
            "the sign: the loss is the negative surrogate, -min(ratio A, clip(ratio) A), so that minimising it "
            "raises the advantage-weighted ratio": -aggregate_loss(clipped, m, "dapo"),
            "no clip: the ratio is used as it is": aggregate_loss(unclipped, m, "dapo"),
            "max instead of min: the pessimistic bound is the min of the two surrogates":
                aggregate_loss(-torch.max(ratio * A, ratio.clamp(1 - epsilon, 1 + epsilon) * A), m, "dapo"),
            "the padding counts: the mean is over every position, not only the mask's": clipped.mean(),
            "a mean per completion, then over completions (loss_type='grpo'); this loss is the token mean over "
            "the whole batch (loss_type='dapo')": aggregate_loss(clipped, m, "grpo"),
            "the masked sum is not divided by the number of completion tokens": (clipped * m).sum(),
        }
        raise ExerciseFailed(f"on {what}: {_diagnose(got.detach(), want.detach(), variants)}. "
                             f"Yours {got.item():.6g}, the library's {want.item():.6g}.")
    return f"your loss and its gradient equal the library's on {len(loss_cases())} batches (tolerance 1e-5)"


# --- notebook 05: SDPO's per-token distillation loss ---------------------------------------------
def distill_cases(seed: int = 0) -> list[tuple[str, dict]]:
    """(description, inputs): student and teacher logits (B, T, V) and the sampled tokens (B, T)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for what, B, T, V, spread in (("a teacher close to the student", 2, 3, 5, 0.1),
                                  ("a teacher far from the student", 3, 4, 7, 2.0)):
        student = torch.randn(B, T, V, generator=g)                                    # (B, T, V)
        teacher = student + torch.randn(B, T, V, generator=g) * spread                  # (B, T, V)
        ids = torch.randint(0, V, (B, T), generator=g)                                 # (B, T)
        out.append((what, dict(student_logits=student, teacher_logits=teacher, completion_ids=ids)))
    return out


def check_sampled_token_loss(fn) -> str:
    """``fn(student_logits, teacher_logits, completion_ids) -> (B, T)`` against ``sdpo.loss.sdpo_per_token_loss``
    in the ``sampled_token`` mode, sg(log s - log t) * log s: the value and its gradient with respect to the
    student's logits, on ``distill_cases``. Raises ``ExerciseFailed`` saying what differs."""
    from sdpo_kit.core.logprobs import token_logprobs
    from sdpo_kit.sdpo.loss import sdpo_per_token_loss

    for what, case in distill_cases():
        ids, teacher = case["completion_ids"], case["teacher_logits"]
        ref = case["student_logits"].clone().requires_grad_(True)
        want = sdpo_per_token_loss(ref, teacher, ids, mode="sampled_token")           # (B, T)
        want.sum().backward()
        mine = case["student_logits"].clone().requires_grad_(True)
        got = fn(mine, teacher.clone(), ids.clone())
        s, t = token_logprobs(case["student_logits"], ids), token_logprobs(teacher, ids)  # (B, T) each
        variants = {
            "the sign: the log-ratio is log s - log t (student minus teacher), so a token the student likes more "
            "than the teacher is pushed down": (t - s) * s,
            "the full KL over the vocabulary (the full_logits mode); this mode looks at the sampled token only":
                (torch.softmax(case["student_logits"], -1) * (torch.log_softmax(case["student_logits"], -1)
                                                              - torch.log_softmax(teacher, -1))).sum(-1),
            "log s - log t alone: that is the per-token KL estimate, not a loss whose gradient moves log s towards "
            "log t; multiply it, detached, by log s": s - t,
        }
        value = got.detach() if isinstance(got, torch.Tensor) else got
        if not _close(value, want.detach()):
            raise ExerciseFailed(f"on {what}: {_diagnose(value, want.detach(), variants)}.")
        if not got.requires_grad:
            raise ExerciseFailed(f"on {what}: the value is right but it carries no gradient (a .detach() on log s?)")
        got.sum().backward()
        if not _close(mine.grad, ref.grad):
            raise ExerciseFailed(f"on {what}: the value is right, the gradient is not: "
                                 f"{_first_difference(mine.grad, ref.grad)}. The log-ratio is a weight: detach it "
                                 "(sg), so that only the last log s carries the gradient")
    return f"your loss and its gradient equal the library's on {len(distill_cases())} batches (tolerance 1e-5)"


# --- notebook 07: generalised advantage estimation -------------------------------------------------
def gae_cases(seed: int = 0) -> list[tuple[str, dict]]:
    """(description, inputs of ``ppo.loss.gae_advantages``): masked rewards and values, gamma and lambda."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for what, B, T, gamma, lam in (("gamma 0.9, lambda 0.95", 3, 5, 0.9, 0.95), ("gamma 1, lambda 1", 2, 4, 1.0, 1.0),
                                   ("gamma 1, lambda 0.5", 2, 6, 1.0, 0.5)):
        lengths = torch.randint(1, T + 1, (B,), generator=g)                           # (B,)
        mask = (torch.arange(T)[None] < lengths[:, None]).float()                     # (B, T)
        rewards = torch.randn(B, T, generator=g) * mask                               # (B, T)
        values = torch.randn(B, T, generator=g) * mask                                # (B, T)
        out.append((what, dict(rewards=rewards, values=values, gamma=gamma, lam=lam)))
    return out


def check_gae(fn) -> str:
    """``fn(rewards, values, gamma, lam) -> advantages (B, T)`` against ``ppo.loss.gae_advantages`` on
    ``gae_cases``. Raises ``ExerciseFailed`` naming the usual mistake that gives the learner's value."""
    from sdpo_kit.ppo.loss import gae_advantages

    for what, c in gae_cases():
        r, v, gamma, lam = c["rewards"], c["values"], c["gamma"], c["lam"]
        want = gae_advantages(r, v, gamma, lam)                                        # (B, T)
        got = fn(r.clone(), v.clone(), gamma, lam)
        if _close(got, want):
            continue
        T = r.size(1)
        next_v = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], 1)                 # (B, T) V_{t+1}, 0 at the end
        delta = r + gamma * next_v - v                                                 # (B, T)
        forward = torch.zeros_like(delta)
        for t in range(T):
            forward[:, t] = delta[:, t] + (gamma * lam * forward[:, t - 1] if t else 0)
        variants = {
            "the returns A + V: GAE's output is the advantage, the value is added back for the critic's target":
                want + v,
            "no lambda: the recursion is A_t = delta_t + gamma * lambda * A_{t+1}": gae_advantages(r, v, gamma, 1.0),
            "the one-step delta alone, r_t + gamma V_{t+1} - V_t, without the sum over later steps": delta,
            "the recursion runs forwards; it runs from the last token back (A_t needs A_{t+1})": forward,
            "no bootstrap: delta_t = r_t + gamma * V_{t+1} - V_t needs the next value":
                gae_advantages(r - v, torch.zeros_like(v), gamma, lam),
        }
        raise ExerciseFailed(f"on {what}: {_diagnose(got, want, variants)}.")
    return f"your GAE equals the library's on {len(gae_cases())} batches (tolerance 1e-5)"
