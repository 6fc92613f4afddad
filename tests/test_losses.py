"""Tests for sdpo_kit.losses: naive-loop references, a hand-computed case, properties.

Agreement with TRL's own GRPOTrainer lives in test_losses_trl.py.
fp32 comparisons use rtol=1e-5, atol=1e-6 unless a test says otherwise.
"""

from __future__ import annotations

import math

import pytest
import reference as ref  # tests/reference.py; pytest puts tests/ on sys.path (no __init__.py)
import torch

from sdpo_kit import losses as L

FP32 = {"rtol": 1e-5, "atol": 1e-6}


def close(actual, expected, **tol):
    """assert_close of a tensor against float(s) from the reference, in the tensor's dtype."""
    tol = tol or FP32
    expected = torch.as_tensor(expected, dtype=actual.dtype)
    torch.testing.assert_close(actual, expected, **tol)


def make_batch(B=6, T=7, seed=0, dtype=torch.float32, spread=0.6):
    """Random per-token log-probs, an off-policy old/ref copy, ragged right-padded masks."""
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g, dtype=dtype) * 3 - 0.05                       # (B, T)
    old_logp = logp + (torch.rand(B, T, generator=g, dtype=dtype) - 0.5) * spread        # (B, T)
    ref_logp = logp + (torch.rand(B, T, generator=g, dtype=dtype) - 0.5) * spread        # (B, T)
    lengths = torch.randint(1, T + 1, (B,), generator=g)                                # (B,)
    lengths[0] = T  # at least one full row
    mask = (torch.arange(T)[None] < lengths[:, None]).to(dtype)                          # (B, T)
    advantages = torch.randn(B, generator=g, dtype=dtype)                                # (B,)
    return logp, old_logp, ref_logp, mask, advantages


# ---------------------------------------------------------------------------------------
# 1. naive-loop references
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_matches_loop(temperature):
    """token_logprobs equals a per-token log-softmax-then-pick loop, at temperature 1 and 0.7."""
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 11, generator=g) * 3                                    # (B, T, V)
    labels = torch.randint(0, 11, (3, 5), generator=g)                                 # (B, T)
    expected = ref.token_logprobs(logits, labels, temperature)
    close(L.token_logprobs(logits, labels, temperature), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tempered_is_the_division_every_trainer_did(dtype):
    """``tempered(z, tau)`` is ``z / tau`` bit for bit, in z's dtype, tau = 1 included (the trainers divided
    inline before it existed, so their losses and samples are unchanged); the temperature token_logprobs
    applies is the same function's: token_logprobs(z, y, tau) == token_logprobs(tempered(z, tau), y) in fp32."""
    g = torch.Generator().manual_seed(5)
    z = (torch.randn(2, 4, 7, generator=g) * 3).to(dtype)                              # (B, T, V)
    y = torch.randint(0, 7, (2, 4), generator=g)                                       # (B, T)
    for tau in (1.0, 0.7, 2.0):
        out = L.tempered(z, tau)                                                       # (B, T, V)
        assert out.dtype == dtype and torch.equal(out, z / tau)
    z32 = z.float()                                                                    # (B, T, V)
    assert torch.equal(L.token_logprobs(z32, y, 0.7), L.token_logprobs(L.tempered(z32, 0.7), y))


def test_no_trainer_divides_logits_by_a_temperature_itself():
    """The sampling temperature meets the logits in ``core.logprobs.tempered`` only: no other module of
    sdpo_kit divides anything by a name ending in ``temperature`` (``x / cfg.temperature``, ``/ self.temperature``,
    ...); read from the code with ``ast``, so docstrings and comments do not count."""
    import ast
    from pathlib import Path

    def name(node) -> str:
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""

    pkg = Path(L.__file__).resolve().parents[1]
    found = [f"{p.relative_to(pkg.parent)}:{n.lineno}" for p in sorted(pkg.rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and name(n.right).endswith("temperature")]
    assert found == ["sdpo_kit/core/logprobs.py:" + str(_tempered_line())], found


def _tempered_line() -> int:
    """The line of ``tempered``'s own division."""
    import inspect

    lines, start = inspect.getsourcelines(L.tempered)
    return start + next(i for i, line in enumerate(lines) if line.lstrip().startswith("return"))


@pytest.mark.parametrize("chunk_rows", [None, 1, 2, 4, 5, 7, 100])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_token_logprobs_chunks_equal_log_softmax(chunk_rows, dtype):
    """Chunked logsumexp + gather equals log_softmax + gather (values and gradients) for any
    chunk size (whole sequences, pieces of one, one token), on a sliced, non-contiguous
    logits[:, :-1] as completion_logprobs passes it, in fp32 / fp64 / bf16 (bf16 is computed
    in fp32, as the full log_softmax of the upcast logits)."""
    g = torch.Generator().manual_seed(3)
    full = (torch.randn(3, 6, 11, generator=g) * 3).to(dtype).requires_grad_(True)    # (B, T+1, V)
    labels = torch.randint(0, 11, (3, 5), generator=g)                                 # (B, T)
    out = L.token_logprobs(full[:, :-1], labels, 0.7, chunk_rows=chunk_rows)           # (B, T)
    (g_out,) = torch.autograd.grad(out.square().sum(), full)
    upcast = full[:, :-1].to(torch.promote_types(dtype, torch.float32)) / 0.7          # (B, T, V)
    expected = torch.log_softmax(upcast, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # (B, T)
    (g_expected,) = torch.autograd.grad(expected.square().sum(), full)
    assert out.dtype == expected.dtype and out.shape == (3, 5)
    tol = FP32 if dtype != torch.bfloat16 else {"rtol": 1e-2, "atol": 1e-2}  # bf16 gradients are bf16
    torch.testing.assert_close(out, expected, **FP32)
    torch.testing.assert_close(g_out, g_expected, **tol)


def test_token_logprobs_never_allocates_a_full_fp32_copy():
    """With bf16 logits (B, T, V) = (4, 64, 1000) in chunks of 16 rows, the largest single
    allocation is one chunk's fp32 temporaries, not the 1 MB (B, T, V) fp32 copy log_softmax
    of the upcast logits makes (measured with torch's CPU memory profiler)."""
    from torch.profiler import ProfilerActivity, profile

    logits = torch.randn(4, 64, 1000, dtype=torch.bfloat16)                            # (B, T, V)
    labels = torch.randint(0, 1000, (4, 64))                                           # (B, T)
    full_copy = 4 * 64 * 1000 * 4                                                      # bytes of (B, T, V) fp32

    def peak(fn) -> int:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        return max(e.cpu_memory_usage for e in prof.events())

    chunked = peak(lambda: L.token_logprobs(logits, labels, 0.7, chunk_rows=16))
    naive = peak(lambda: torch.log_softmax(logits.float() / 0.7, -1))
    assert naive >= full_copy  # the profiler sees the full copy when there is one
    assert chunked <= 16 * 1000 * 4, f"largest allocation {chunked} B, one chunk is {16 * 1000 * 4} B"


def test_token_logprobs_empty_and_bad_shapes():
    """An empty batch gives an empty (B, T); mismatched logits / labels raise ValueError."""
    assert L.token_logprobs(torch.zeros(0, 3, 5), torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3)
    assert L.token_logprobs(torch.zeros(2, 0, 5), torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0)
    with pytest.raises(ValueError, match="labels"):
        L.token_logprobs(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


def test_masked_sum_and_mean_match_loop():
    """masked_sum/masked_mean equal loops over unmasked entries; an empty row's mean is 0, not NaN."""
    x, _, _, mask, _ = make_batch(seed=2)
    mask[-1] = 0  # an empty row
    rows = zip(x.tolist(), mask.tolist())
    close(L.masked_sum(x, mask), sum(v * m for r, mr in rows for v, m in zip(r, mr)))
    close(L.masked_mean(x, mask), ref.masked_mean(x, mask))
    close(L.masked_mean(x, mask, dim=1), ref.masked_mean(x, mask, dim=1))
    assert L.masked_mean(x, mask, dim=1)[-1].item() == 0.0


@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_kl_estimators_match_loop(kind):
    """kl_k1/k2/k3 equal the per-token formulas with r = pi_ref / pi."""
    logp, _, ref_logp, _, _ = make_batch(seed=3, spread=2.0)
    fn = {"k1": L.kl_k1, "k2": L.kl_k2, "k3": L.kl_k3}[kind]
    close(fn(logp, ref_logp), ref.kl(kind, logp, ref_logp))


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
@pytest.mark.parametrize("G", [1, 2, 4])
def test_group_advantages_matches_loop(scale_rewards, G):
    """group_advantages equals the loop: group mean baseline, unbiased std (group or batch) + eps."""
    g = torch.Generator().manual_seed(4)
    rewards = torch.randint(0, 3, (3 * G,), generator=g).float()                       # (B,)
    rewards[:G] = 1.0  # a group whose rewards are all equal: std 0, advantages 0
    expected = ref.group_advantages(rewards, G, scale_rewards)
    close(L.group_advantages(rewards, G, scale_rewards), expected)
    close(L.group_advantages(rewards, G, scale_rewards, eps=0.5),
          ref.group_advantages(rewards, G, scale_rewards, eps=0.5))


@pytest.mark.parametrize("loss_type", L.LOSS_TYPES)
@pytest.mark.parametrize("max_completion_length", [None, 12])
def test_aggregate_loss_matches_loop(loss_type, max_completion_length):
    """aggregate_loss equals the loop for each loss_type; only dr_grpo reads max_completion_length."""
    x, _, _, mask, _ = make_batch(seed=5)
    close(L.aggregate_loss(x, mask, loss_type, max_completion_length),
          ref.aggregate_loss(x, mask, loss_type, max_completion_length))


def test_only_dr_grpo_depends_on_max_completion_length():
    """dr_grpo divides by B * max_completion_length; grpo, bnpo and dapo ignore it."""
    x, _, _, mask, _ = make_batch(seed=6)
    for loss_type in L.LOSS_TYPES:
        a = L.aggregate_loss(x, mask, loss_type, None)
        b = L.aggregate_loss(x, mask, loss_type, 2 * x.size(1))
        if loss_type == "dr_grpo":
            close(b, a / 2)
        else:
            assert a.item() == b.item()


GRPO_CASES = [
    # (loss_type, beta, use_bias_correction_kl, epsilon_high, per_token_adv, max_completion_length)
    ("grpo", 0.0, True, None, False, None),
    ("bnpo", 0.0, True, 0.28, False, None),
    ("dr_grpo", 0.0, True, 0.28, False, 10),
    ("dapo", 0.0, True, 0.28, False, None),
    ("grpo", 0.04, True, 0.28, False, None),
    ("bnpo", 0.04, False, 0.28, False, None),
    ("dr_grpo", 0.1, False, None, True, None),
    ("dapo", 0.04, True, 0.28, True, None),
    ("dapo", 0.04, False, 0.28, True, 10),
    ("grpo", 0.1, False, 0.28, True, None),
]


@pytest.mark.parametrize("loss_type,beta,bias_corr,epsilon_high,per_token_adv,max_len", GRPO_CASES)
def test_grpo_loss_matches_loop(loss_type, beta, bias_corr, epsilon_high, per_token_adv, max_len):
    """grpo_loss and its stats (clip fractions, ratio mean, raw kl, policy loss without the KL
    term) equal the per-token loop,
    for every loss_type, beta 0 or > 0, with/without the KL bias correction,
    epsilon_high != epsilon, and advantages of shape (B,) or (B, T)."""
    logp, old_logp, ref_logp, mask, advantages = make_batch(seed=7, spread=1.0)
    if per_token_adv:
        advantages = torch.randn(logp.shape, generator=torch.Generator().manual_seed(8))  # (B, T)
    kwargs = {"ref_logp": ref_logp, "beta": beta, "epsilon": 0.2, "epsilon_high": epsilon_high,
              "loss_type": loss_type, "max_completion_length": max_len,
              "use_bias_correction_kl": bias_corr}
    loss, stats = L.grpo_loss(logp, old_logp, advantages, mask, **kwargs)
    expected, expected_stats = ref.grpo_loss(logp, old_logp, advantages, mask, **kwargs)
    close(loss, expected)
    # the random batch must exercise both clip sides, or the stats comparison proves little
    assert 0 < expected_stats["clip_frac_low"] and 0 < expected_stats["clip_frac_high"]
    for key, value in expected_stats.items():
        close(stats[key], value)


# ---------------------------------------------------------------------------------------
# 2. hand-computed example, B=2, T=3
# ---------------------------------------------------------------------------------------
def hand_batch():
    # old_logp = log 0.5 everywhere; logp = old_logp + log(ratio), so the ratios are exact:
    #   seq 0 (A = +1):   ratios 1.5, 0.9, 1.0      mask 1 1 1
    #   seq 1 (A = -0.5): ratios 0.5, 1.2, 2.0      mask 1 1 0   (last token is padding)
    ratios = torch.tensor([[1.5, 0.9, 1.0], [0.5, 1.2, 2.0]])                           # (B, T)
    old_logp = torch.full((2, 3), math.log(0.5))                                       # (B, T)
    logp = old_logp + ratios.log()                                                      # (B, T)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])                             # (B, T)
    advantages = torch.tensor([1.0, -0.5])                                              # (B,)
    return logp, old_logp, advantages, mask


def test_hand_computed_example():
    """B=2, T=3 with epsilon=0.2, epsilon_high=0.28 (clip range [0.8, 1.28]), worked by hand."""
    logp, old_logp, advantages, mask = hand_batch()
    # per-token l = -min(ratio * A, clip(ratio) * A):
    #   seq 0, A=+1:   1.5 -> clip 1.28, min(1.5, 1.28) = 1.28 -> -1.28   (high side clips)
    #                  0.9 -> inside,    min(0.9, 0.9)  = 0.9  -> -0.9
    #                  1.0 -> inside                           -> -1.0     sum -3.18 over 3 tokens
    #   seq 1, A=-0.5: 0.5 -> clip 0.8,  min(-0.25, -0.4) = -0.4 -> +0.4  (low side clips)
    #                  1.2 -> inside,    min(-0.6, -0.6)  = -0.6 -> +0.6  sum +1.0 over 2 tokens
    #                  2.0 -> masked, ignored
    # grpo:    mean(-3.18/3, 1.0/2) = mean(-1.06, 0.5)        = -0.28
    # bnpo:    (-3.18 + 1.0) / 5 tokens                       = -0.436   (dapo: the same)
    # dr_grpo: -2.18 / (B=2 * L=3)                            = -0.363333...
    #          -2.18 / (B=2 * max_completion_length=4)        = -0.2725
    expected = {"grpo": -0.28, "bnpo": -0.436, "dapo": -0.436, "dr_grpo": -2.18 / 6}
    for loss_type, value in expected.items():
        loss, stats = L.grpo_loss(logp, old_logp, advantages, mask, epsilon=0.2, epsilon_high=0.28,
                                  loss_type=loss_type)
        close(loss, value)
    loss, _ = L.grpo_loss(logp, old_logp, advantages, mask, epsilon=0.2, epsilon_high=0.28,
                          loss_type="dr_grpo", max_completion_length=4)
    close(loss, -0.2725)
    # stats over the 5 real tokens: low clip at (1, 0), high clip at (0, 0);
    # ratio mean (1.5 + 0.9 + 1.0 + 0.5 + 1.2) / 5 = 5.1 / 5 = 1.02; no ref_logp -> kl 0
    close(stats["clip_frac_low"], 0.2)
    close(stats["clip_frac_high"], 0.2)
    close(stats["clip_frac"], 0.4)
    close(stats["ratio_mean"], 1.02)
    close(stats["kl"], 0.0)
    # with symmetric epsilon=0.2 the high clip is at 1.2: token (0, 0) gives -1.2, not -1.28,
    # and token (1, 1) sits exactly on the boundary (A < 0, so it does not count as clipped):
    # bnpo = (-1.2 - 0.9 - 1.0 + 0.4 + 0.6) / 5 = -2.1 / 5 = -0.42
    loss, _ = L.grpo_loss(logp, old_logp, advantages, mask, epsilon=0.2, loss_type="bnpo")
    close(loss, -0.42)


def test_hand_computed_kl_term():
    """The k3 KL term of the hand example, with and without the ratio (bias) correction."""
    logp, old_logp, advantages, mask = hand_batch()
    # ref_logp = logp except at token (1, 1), where pi_ref / pi = r = 2:
    #   k3 = r - 1 - log r = 2 - 1 - log 2 = 0.3068528...
    #   bias-corrected: k3 * ratio(1, 1) = 0.3068528 * 1.2 = 0.3682234...
    # bnpo with beta=0.1: (-2.18 + 0.1 * 0.3682234) / 5 = -0.4286355...
    #   without correction: (-2.18 + 0.1 * 0.3068528) / 5 = -0.4298629...
    ref_logp = logp.clone()
    ref_logp[1, 1] += math.log(2.0)
    k3 = 1.0 - math.log(2.0)
    for corr, k in [(True, k3 * 1.2), (False, k3)]:
        loss, stats = L.grpo_loss(logp, old_logp, advantages, mask, ref_logp=ref_logp, beta=0.1,
                                  epsilon=0.2, epsilon_high=0.28, loss_type="bnpo",
                                  use_bias_correction_kl=corr)
        close(loss, (-2.18 + 0.1 * k) / 5)
        close(stats["kl"], k3 / 5)  # the raw k3 (no ratio), token mean over the 5 real tokens
        close(stats["policy_loss"], -2.18 / 5)  # the surrogate alone: loss without beta * KL


# ---------------------------------------------------------------------------------------
# 3. properties
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss_type", L.LOSS_TYPES)
def test_masked_positions_change_nothing(loss_type):
    """Changing logp, old_logp and ref_logp where mask == 0 leaves the loss, the stats and the
    gradient unchanged (and the gradient there is exactly 0)."""
    logp, old_logp, ref_logp, mask, advantages = make_batch(seed=9, spread=1.0)
    assert (mask == 0).any()
    g = torch.Generator().manual_seed(10)
    noise = torch.randn(logp.shape, generator=g) * 5 * (1 - mask)                      # (B, T)

    def run(lp, olp, rlp):
        lp = lp.clone().requires_grad_(True)
        loss, stats = L.grpo_loss(lp, olp, advantages, mask, ref_logp=rlp, beta=0.04,
                                  epsilon_high=0.28, loss_type=loss_type)
        loss.backward()
        return loss, stats, lp.grad

    loss_a, stats_a, grad_a = run(logp, old_logp, ref_logp)
    loss_b, stats_b, grad_b = run(logp + noise, old_logp - noise, ref_logp + 2 * noise)
    close(loss_b, loss_a.item())
    for key in stats_a:
        close(stats_b[key], stats_a[key].item())
    torch.testing.assert_close(grad_b, grad_a, **FP32)
    assert (grad_a[mask == 0] == 0).all()


@pytest.mark.parametrize("loss_type", L.LOSS_TYPES)
def test_zero_advantages_give_zero_loss_and_gradient(loss_type):
    """With A = 0 and beta = 0 the loss is 0 and its gradient is 0, off-policy or not."""
    logp, old_logp, _, mask, advantages = make_batch(seed=11, spread=1.0)
    logp.requires_grad_(True)
    loss, _ = L.grpo_loss(logp, old_logp, torch.zeros_like(advantages), mask, loss_type=loss_type)
    loss.backward()
    assert loss.item() == 0.0
    assert (logp.grad == 0).all()


@pytest.mark.parametrize("loss_type", L.LOSS_TYPES)
@pytest.mark.parametrize("per_token_adv", [False, True])
def test_on_policy_gradient_is_reinforce(loss_type, per_token_adv):
    """On-policy (old_logp = logp.detach(), ratio 1, clip inactive) the gradient of grpo_loss with
    respect to the logits equals that of the REINFORCE surrogate -sum_it A_it logp_it mask_it / Z,
    Z = B * |o_i| (grpo), sum |o_i| (bnpo, dapo), B * L_max (dr_grpo)."""
    g = torch.Generator().manual_seed(12)
    B, T, V = 4, 5, 7
    logits = torch.randn(B, T, V, generator=g).requires_grad_(True)                    # (B, T, V)
    labels = torch.randint(0, V, (B, T), generator=g)                                  # (B, T)
    lengths = torch.tensor([5, 2, 3, 1])                                                # (B,)
    mask = (torch.arange(T)[None] < lengths[:, None]).float()                          # (B, T)
    if per_token_adv:
        A = torch.randn(B, T, generator=g)                                             # (B, T)
    else:
        A = torch.randn(B, generator=g)[:, None].expand(B, T)                          # (B, T)
    L_max = 8

    logp = L.token_logprobs(logits, labels)                                             # (B, T)
    loss, stats = L.grpo_loss(logp, logp.detach(), A if per_token_adv else A[:, 0], mask,
                              loss_type=loss_type, max_completion_length=L_max, epsilon_high=0.28)
    (grad,) = torch.autograd.grad(loss, logits)
    assert stats["clip_frac"].item() == 0.0 and stats["ratio_mean"].item() == 1.0

    logp = L.token_logprobs(logits, labels)                                             # (B, T)
    Z = {"grpo": B * mask.sum(1, keepdim=True), "bnpo": mask.sum(), "dapo": mask.sum(),
         "dr_grpo": torch.tensor(float(B * L_max))}[loss_type]
    reinforce = -(A * logp * mask / Z).sum()                                            # scalar
    (expected,) = torch.autograd.grad(reinforce, logits)
    torch.testing.assert_close(grad, expected, **FP32)
    assert expected.abs().max() > 1e-3  # the comparison is not between two zeros


@pytest.mark.parametrize("loss_type", L.LOSS_TYPES)
@pytest.mark.parametrize("bias_corr", [True, False])
def test_grpo_loss_gradcheck(loss_type, bias_corr):
    """Autograd's gradient of grpo_loss w.r.t. logp matches finite differences (float64), with
    off-policy ratios kept away from the clip boundaries (where the loss has a kink), beta > 0."""
    batch = make_batch(B=4, T=5, seed=13, dtype=torch.float64, spread=0.8)
    logp, old_logp, ref_logp, mask, _ = batch
    ratio = (logp - old_logp).exp()
    # move ratios within 0.02 of a boundary (0.8 or 1.28) out of the finite-difference window
    for edge in (0.8, 1.28):
        near = (ratio - edge).abs() < 0.02
        old_logp = torch.where(near, logp - math.log(edge + 0.05), old_logp)
    ratio = (logp - old_logp).exp()
    assert ((ratio < 0.8) | (ratio > 1.28)).any() and ((ratio > 0.8) & (ratio < 1.28)).any()
    advantages = torch.tensor([1.0, -0.7, 0.3, -1.5], dtype=torch.float64)

    def f(lp):
        return L.grpo_loss(lp, old_logp, advantages, mask, ref_logp=ref_logp, beta=0.1, epsilon=0.2,
                           epsilon_high=0.28, loss_type=loss_type, max_completion_length=6,
                           use_bias_correction_kl=bias_corr)[0]

    assert torch.autograd.gradcheck(f, (logp.clone().requires_grad_(True),), eps=1e-6, atol=1e-7)


def test_token_logprobs_and_kl_gradcheck():
    """token_logprobs (w.r.t. logits) and k1/k2/k3 (w.r.t. logp) pass gradcheck in float64."""
    g = torch.Generator().manual_seed(14)
    logits = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)                   # (B, T, V)
    logits.requires_grad_(True)
    labels = torch.randint(0, 5, (2, 3), generator=g)                                    # (B, T)
    assert torch.autograd.gradcheck(lambda z: L.token_logprobs(z, labels, 0.8), (logits,))
    logp, _, ref_logp, _, _ = make_batch(B=2, T=3, seed=15, dtype=torch.float64)
    for fn in (L.kl_k1, L.kl_k2, L.kl_k3):
        lp = logp.clone().requires_grad_(True)
        assert torch.autograd.gradcheck(lambda x, fn=fn: fn(x, ref_logp), (lp,))


def test_kl_estimators_signs_and_zero():
    """k2 and k3 are >= 0 everywhere; k1, k2 and k3 are all exactly 0 when logp == ref_logp;
    k1 takes negative values (so it is not a pointwise bound)."""
    logp, _, ref_logp, _, _ = make_batch(B=8, T=16, seed=16, spread=4.0)
    assert (L.kl_k2(logp, ref_logp) >= 0).all()
    assert (L.kl_k3(logp, ref_logp) >= 0).all()
    assert (L.kl_k1(logp, ref_logp) < 0).any()
    for fn in (L.kl_k1, L.kl_k2, L.kl_k3):
        assert (fn(logp, logp.clone()) == 0).all()


def test_kl_estimators_expectation_on_categorical():
    """Exact expectation under y ~ pi on a 6-outcome categorical: E[k1] = E[k3] = KL(pi || pi_ref)
    (unbiased), while E[k2] differs from it (biased). float64, rtol=1e-10."""
    g = torch.Generator().manual_seed(17)
    logp = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64) * 1.5, 0)      # (K,)
    ref_logp = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64) * 1.5, 0)  # (K,)
    p = logp.exp()                                                                            # (K,)
    kl_exact = (p * (logp - ref_logp)).sum()                                           # scalar
    assert kl_exact > 0.1

    def expect(fn):
        return (p * fn(logp[None], ref_logp[None])[0]).sum()                           # scalar

    torch.testing.assert_close(expect(L.kl_k1), kl_exact, rtol=1e-10, atol=0)
    torch.testing.assert_close(expect(L.kl_k3), kl_exact, rtol=1e-10, atol=0)
    assert abs(expect(L.kl_k2) - kl_exact) > 1e-3


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_group_advantages_sum_to_zero_per_group(scale_rewards):
    """Within every group the advantages sum to ~0 (the group mean is the baseline)."""
    rewards = torch.randn(5 * 4, generator=torch.Generator().manual_seed(18)) * 3 + 1    # (B,)
    adv = L.group_advantages(rewards, 4, scale_rewards)                                  # (B,)
    torch.testing.assert_close(adv.view(5, 4).sum(1), torch.zeros(5), rtol=0, atol=1e-5)
    assert adv.abs().max() > 0.1


def test_invalid_arguments_raise_value_error():
    """Unknown loss_type / scale_rewards, beta without ref_logp, and mismatched shapes raise
    ValueError (instead of broadcasting silently)."""
    logp, old_logp, ref_logp, mask, advantages = make_batch(B=4, T=5, seed=19)
    B, T = logp.shape
    bad_calls = [
        lambda: L.grpo_loss(logp, old_logp, advantages, mask, loss_type="ppo"),
        lambda: L.aggregate_loss(logp, mask, "token_mean"),
        lambda: L.group_advantages(torch.rand(8), 4, scale_rewards="std"),
        lambda: L.group_advantages(torch.rand(7), 4),
        lambda: L.group_advantages(torch.rand(2, 4), 4),
        lambda: L.group_advantages(torch.rand(8), 0),
        lambda: L.grpo_loss(logp, old_logp, advantages, mask, beta=0.1),
        lambda: L.grpo_loss(logp, old_logp[:, :1], advantages, mask),
        lambda: L.grpo_loss(logp, old_logp, advantages, mask[:, :-1]),
        lambda: L.grpo_loss(logp, old_logp, advantages, mask, ref_logp=ref_logp[:1], beta=0.1),
        lambda: L.grpo_loss(logp, old_logp, advantages[:1], mask),
        lambda: L.grpo_loss(logp, old_logp, advantages[:, None], mask),
        lambda: L.grpo_loss(logp, old_logp, torch.zeros(B, T + 1), mask),
        lambda: L.grpo_loss(logp[0], old_logp[0], advantages[:1], mask[0]),
        lambda: L.aggregate_loss(logp, mask.T, "bnpo"),
    ]
    for i, call in enumerate(bad_calls):
        with pytest.raises(ValueError):
            call()
            pytest.fail(f"bad call {i} did not raise")
