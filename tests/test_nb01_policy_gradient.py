"""Notebook 01 (policy gradient from scratch): the plumbing its checks stand on, on the tiny lab.

The notebook keeps the checks of the math (inline == library, the score function's mean zero, on-policy GRPO
== REINFORCE with the group baseline, one GRPOScratchTrainer step == one inline step) and of its run (the rise of
held-out accuracy, for the profile that measured one). Here: its profiles, the held-out split, the warm
start's room to improve, GRPOScratchTrainer's metrics rows and schedule, the variance-optimal baseline that
``docs/concepts/policy_gradient.md`` describes, and the reference answers of exercises 2 and 3 (exercise
1's: ``tests/test_course_checks.py``).
"""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

import pytest
import torch

from sdpo_kit import make_task
from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.core.sampling import completion_logprobs, sample
from sdpo_kit.course import profile_table
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import LabConfig
from sdpo_kit.losses import group_advantages, grpo_loss
from sdpo_kit.models import load_policy
from sdpo_kit.rewards import exact_match_reward
from sdpo_kit.tasks import ArithmeticTask, prompt_text

ROOT = Path(__file__).resolve().parents[1]
PROFILES = profile_table("01")
LAB = PROFILES[TINY_LAB]
SETTINGS = {"task", "max_new_tokens", "temperature", "group", "prompts", "lr", "steps", "n_var_batches",
            "var_prompts", "n_eval", "min_lift"}


def solutions():
    spec = importlib.util.spec_from_file_location("ref_nb01", ROOT / "notebooks" / "solutions" / "nb01.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def questions(rows) -> set[str]:
    return {prompt_text(r["prompt"]) for r in rows}


@pytest.mark.parametrize("key", [TINY_LAB, REAL_CPU_MODEL, T4_MODEL])
def test_each_profile_holds_every_setting_the_notebook_reads(key):
    """Every profile names each setting the notebook reads; its smoke sizes are no larger than the full ones,
    keep a group of at least 2 and at least 2 batches for the variance, and promise no rise in accuracy."""
    profile = dict(PROFILES[key])
    smoke = {**profile, **profile.pop("smoke", {})}
    for sizes in (profile, smoke):
        assert set(sizes) - {"smoke"} == SETTINGS, sorted(set(sizes) ^ SETTINGS)
        assert sizes["group"] >= 2 and sizes["n_var_batches"] >= 2 and 0 < sizes["temperature"] <= 1
    for k in ("steps", "n_var_batches", "var_prompts", "prompts", "max_new_tokens", "n_eval"):
        assert smoke[k] <= profile[k], k
    assert smoke["min_lift"] is None, "a smoke run is too short to promise a rise in accuracy"


def test_heldout_questions_are_never_trained_on():
    """The tiny-lab profile's held-out questions are in neither its train split nor the warm start's."""
    task = make_task(**LAB["task"], n_eval=LAB["n_eval"], seed=0)
    train_rows, heldout_rows = task.splits()
    lab = LabConfig()
    lab_train, _ = ArithmeticTask(digits=lab.digits, terms=lab.terms, n_eval=lab.n_eval, seed=lab.seed).splits()
    assert len(questions(heldout_rows)) == LAB["n_eval"]
    assert not questions(train_rows) & questions(heldout_rows), "train and held-out share a question"
    assert not questions(lab_train) & questions(heldout_rows), "the warm start trained on a held-out question"


@pytest.fixture(scope="module")
def lab_task():
    task = make_task(**LAB["task"], n_eval=LAB["n_eval"], seed=0)
    return task, *task.splits()


def test_the_warm_start_is_sometimes_right_with_room_to_improve(lab_task):
    """RL needs a policy that is right on some held-out problems and wrong on others: 0 < accuracy < 1."""
    task, _, heldout_rows = lab_task
    policy, tok = load_policy(TINY_LAB)
    acc = task.evaluate(policy, tok, heldout_rows, max_new_tokens=LAB["max_new_tokens"])
    assert 0.0 < acc < 1.0, acc


def test_grpo_loop_logs_one_row_per_step_on_the_inline_schedule(lab_task):
    """GRPOScratchTrainer as notebook 01 runs it (on-policy, no KL, linear decay): an evaluation of the start weights
    at step 0, one row per step with a finite loss equal to the policy loss, an idle clip, the learning rate
    LR * (1 - step / S) after each step, an evaluation at the end, and weights that moved when some group
    had mixed rewards (unmoved otherwise)."""
    task, train_rows, heldout_rows = lab_task
    policy, tok = load_policy(TINY_LAB)
    start = {n: p.detach().clone() for n, p in policy.named_parameters()}
    steps, lr = 4, LAB["lr"]

    def evaluate(model):
        return task.evaluate(model, tok, heldout_rows[:32], max_new_tokens=LAB["max_new_tokens"])

    acc_start = evaluate(policy)
    cfg = GRPOScratchConfig(max_steps=steps, prompts_per_step=4, num_generations=LAB["group"], learning_rate=lr,
                     max_grad_norm=1.0, temperature=LAB["temperature"], max_completion_length=LAB["max_new_tokens"],
                     loss_type="dapo", beta=0.0, num_iterations=1, eval_every=2, seed=0, lr_scheduler_type="linear")
    hist = GRPOScratchTrainer(policy, tok, [exact_match_reward(rule=task.rule)], train_rows, cfg, eval_fn=evaluate).train()
    logged = [h for h in hist if "loss" in h]
    assert [h["step"] for h in logged] == list(range(1, steps + 1)), "one row per step"
    assert hist[0]["step"] == 0 and hist[0]["eval/accuracy"] == acc_start, "step 0 evaluates the start weights"
    assert "eval/accuracy" in hist[-1], "the last step is evaluated"
    for h in logged:
        assert math.isfinite(h["loss"]) and h["loss"] == h["loss/policy"], "beta = 0: the loss is the policy loss"
        assert h["stats/clip_frac"] == 0.0, "on-policy the clip never acts"
        assert math.isclose(h["stats/learning_rate"], lr * (1 - h["step"] / steps), rel_tol=1e-6, abs_tol=1e-12)
    moved = any(not torch.equal(p, start[n]) for n, p in policy.named_parameters())
    assert moved == any(h["stats/frac_zero_std"] < 1.0 for h in logged), "weights move iff some group had signal"


def test_the_variance_optimal_baseline_sits_below_the_mean_reward_on_the_tiny_lab(lab_task):
    """On one batch of the notebook's variance experiment (the tiny lab's start weights, seed 0), the wrong
    completions carry larger gradients ||grad log pi(o)||^2 than the right ones, so the variance-optimal
    constant baseline b* = sum R ||g||^2 / sum ||g||^2 sits below the mean reward."""
    task, train_rows, _ = lab_task
    policy, tok = load_policy(TINY_LAB)
    params = [p for p in policy.parameters() if p.requires_grad]
    G = LAB["group"]
    rows = random.Random(0).sample(train_rows, LAB["var_prompts"])
    torch.manual_seed(0)
    ro = sample(policy, tok, [r["prompt"] for r in rows], max_new_tokens=LAB["max_new_tokens"],
                temperature=LAB["temperature"], num_return_sequences=G)
    answers = [r["answer"] for r in rows for _ in range(G)]
    rewards = torch.tensor(exact_match_reward(rule=task.rule)(prompts=None, completions=ro.texts, answer=answers))
    logp = completion_logprobs(policy, ro.prompt_ids, ro.prompt_mask, ro.completion_ids, ro.completion_mask,
                               LAB["temperature"])                              # (B, T)
    seq = (logp * ro.completion_mask).sum(1)                                    # (B,)
    def sq_norm(x):   # ||d x / d theta||^2
        grads = torch.autograd.grad(x, params, retain_graph=True, allow_unused=True)
        return sum(g.pow(2).sum() for g in grads if g is not None)

    sq_norms = torch.stack([sq_norm(seq[i]) for i in range(len(rewards))])       # (B,)
    b_star = float((rewards * sq_norms).sum() / sq_norms.sum())
    assert 0 < rewards.mean() < 1, "the batch needs right and wrong completions"
    assert sq_norms[rewards == 0].mean() > sq_norms[rewards == 1].mean(), "wrong completions: larger gradients"
    assert b_star < float(rewards.mean()), (b_star, float(rewards.mean()))


def test_rloo_reference_is_the_leave_one_out_advantage():
    """Exercise 2's reference: R_i minus the mean of the other G - 1 rewards of its group (a naive loop),
    which is G / (G - 1) times the unscaled group-mean advantage."""
    rloo = solutions().my_rloo_advantages
    G = 4
    r = torch.rand(3 * G, generator=torch.Generator().manual_seed(0))
    naive = torch.tensor([r[i] - torch.cat([r[i // G * G:i], r[i + 1:(i // G + 1) * G]]).mean() for i in range(len(r))])
    torch.testing.assert_close(rloo(r, G), naive)
    torch.testing.assert_close(rloo(r, G), G / (G - 1) * group_advantages(r, G, scale_rewards="none"))


def test_dr_grpo_reference_normaliser_gives_the_dr_grpo_gradient():
    """Exercise 3's reference Z = B * T: -(1/Z) sum_i A_i sum_t m_it logp_it has the gradient of
    grpo_loss(loss_type="dr_grpo", max_completion_length=T) on-policy (fp32: rtol 1e-5, atol 1e-6)."""
    normaliser = solutions().dr_grpo_normaliser
    g = torch.Generator().manual_seed(0)
    B, T = 6, 5
    logp = (-torch.rand(B, T, generator=g) * 3).requires_grad_(True)            # (B, T)
    mask = (torch.arange(T)[None] < torch.randint(1, T + 1, (B,), generator=g)[:, None]).float()  # (B, T)
    A = torch.randn(B, generator=g)                                              # (B,)
    loss, _ = grpo_loss(logp, logp.detach(), A, mask, loss_type="dr_grpo", max_completion_length=T)
    (want,) = torch.autograd.grad(loss, logp)
    (got,) = torch.autograd.grad(-(A * (logp * mask).sum(1)).sum() / normaliser(mask), logp)
    assert normaliser(mask) == B * T
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
