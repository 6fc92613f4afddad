"""Notebook 02 (GRPO): the plumbing its checks stand on, on the tiny lab.

The notebook keeps the checks of the math (the hand-worked loss and its gradient, the clip's flat regions,
on-policy GRPO == REINFORCE, k1 / k3 unbiased and k2 biased, rho * k3's gradient, the aggregations' token
weights, a group's advantages summing to zero) and of its runs (the second pass is off-policy, the rise of
held-out accuracy for the profile that measured one). Here: its profiles; that the notebook's ``SHARED``
settings reach the scratch loop and TRL unchanged; that both backends log one row per step on the same
linear schedule from the same start; the clip-higher gradient, the KL term of ``grpo_loss`` and the
aggregations against a naive loop (checks the notebook had inline); and exercise 2's reference answer
(exercise 1's: ``tests/test_course_checks.py``).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
from pathlib import Path

import datasets
import pytest
import torch

from sdpo_kit import make_task
from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.course import profile_table, setup
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.trl import build_trl_grpo_trainer
from sdpo_kit.losses import LOSS_TYPES, aggregate_loss, grpo_loss, kl_k3
from sdpo_kit.models import load_policy
from sdpo_kit.rewards import make_reward

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02_grpo.ipynb"
PROFILES = profile_table("02")
SETTINGS = {"final_config", "final_overrides", "task", "max_new_tokens", "prompts", "group", "lr", "steps", "n_eval", "trl_preset", "num_threads",
            "min_lift"}


def solutions():
    spec = importlib.util.spec_from_file_location("ref_nb02", ROOT / "notebooks" / "solutions" / "nb02.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebook_shared(P) -> dict:
    """The notebook's ``SHARED = dict(...)`` (section 4), evaluated with the profile ``P``."""
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        if cell["cell_type"] != "code" or "SHARED = " not in "".join(cell["source"]):
            continue
        for node in ast.parse("".join(cell["source"])).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SHARED"]:
                return eval(compile(ast.Expression(node.value), "SHARED", "eval"), {"P": P, "dict": dict, "max": max,
                                                                                      "min": min})
    raise AssertionError("the notebook defines no SHARED = dict(...)")


def lab_setup(**sizes):
    """The tiny lab's smoke profile (with ``sizes`` changed), its SHARED settings, model, task and reward."""
    P = setup("02", env={"SDPO_KIT_MODEL": TINY_LAB, "SDPO_KIT_SMOKE": "1"}, cuda=False, verbose=False)
    P.update(sizes)
    model, tok = load_policy(P.model)
    task = make_task(**P.task, n_eval=16, seed=P.seed)
    (reward,) = make_reward(["exact_match"], task=task)
    return P, notebook_shared(P), model, tok, task, reward


@pytest.mark.parametrize("key", [TINY_LAB, REAL_CPU_MODEL, T4_MODEL])
def test_each_profile_holds_every_setting_the_notebook_reads(key):
    """Every profile names each setting the notebook reads; its smoke sizes are no larger than the full ones,
    keep whole groups of at least 2, and promise no rise in accuracy; only a measured profile promises one."""
    profile = dict(PROFILES[key])
    smoke = {**profile, **profile.pop("smoke", {})}
    for sizes in (profile, smoke):
        assert set(sizes) - {"smoke"} == SETTINGS, sorted(set(sizes) ^ SETTINGS)
        assert sizes["group"] >= 2 and sizes["prompts"] >= 1 and sizes["trl_preset"] in ("cpu", "t4", "auto")
    for k in ("steps", "prompts", "group", "max_new_tokens", "n_eval"):
        assert smoke[k] <= profile[k], k
    assert smoke["min_lift"] is None, "a smoke run is too short to promise a rise in accuracy"
    assert profile["min_lift"] is None or key == TINY_LAB, "only the tiny lab's full run was measured"


def test_the_notebook_settings_reach_both_backends_unchanged(tmp_path):
    """SHARED builds a GRPOScratchConfig with those values, and TRL's GRPOTrainer gets the same: prompts x G
    completions per optimizer step, mu x max_steps optimizer steps (TRL counts passes), the same rate,
    schedule, loss, clip, KL weight, temperature and completion budget, on the cpu preset in fp32."""
    P, shared, model, tok, task, reward = lab_setup()
    assert shared["num_iterations"] == 2 and shared["beta"] == 0.0 and shared["loss_type"] == "dapo"
    config = GRPOScratchConfig(**shared)
    for key, value in shared.items():
        assert getattr(config, key) == value, key
    train_rows, _ = task.splits()
    trainer = build_trl_grpo_trainer(model, tok, [reward], datasets.Dataset.from_list(train_rows), preset=P.trl_preset,
                                     output_dir=tmp_path, verbose=False, **shared)
    a = trainer.args
    assert a.per_device_train_batch_size == P.prompts * P.group and a.num_generations == P.group
    assert a.max_steps == P.steps * shared["num_iterations"] and a.num_iterations == shared["num_iterations"]
    assert a.learning_rate == P.lr and str(a.lr_scheduler_type).lower().endswith("linear")
    assert (a.loss_type, a.beta, a.epsilon, a.temperature) == ("dapo", 0.0, 0.2, shared["temperature"])
    assert a.max_completion_length == P.max_new_tokens and a.scale_rewards == "group"
    assert a.use_cpu and not a.fp16 and not a.bf16


def test_both_backends_log_one_row_per_step_on_the_same_schedule(tmp_path):
    """Three steps of each run as the notebook makes them: from the same weights both measure the same held-out
    accuracy at step 0 and evaluate at the same steps; one finite row per step, numbered 1..3; the clipped
    fraction is the sum of its two sides; beta = 0 logs no KL; the rate falls by lr / max_steps per step on both
    (each logs it one optimizer pass apart); the weights move."""
    P, shared, model, tok, task, reward = lab_setup(steps=3)
    shared = {**shared, "eval_every": 2}
    train_rows, heldout_rows = task.splits()
    start = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    def accuracy(m):
        return task.evaluate(m, tok, heldout_rows, max_new_tokens=P.max_new_tokens)

    scratch = GRPOScratchTrainer(model, tok, [reward], train_rows, GRPOScratchConfig(**shared, output_dir=str(tmp_path / "scratch")),
                       eval_fn=accuracy).train()
    assert any(not torch.equal(p, start[n]) for n, p in model.named_parameters() if n in start), "weights changed"
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in start:
                p.copy_(start[n])
    trainer = build_trl_grpo_trainer(model, tok, [reward], datasets.Dataset.from_list(train_rows), preset="cpu",
                                     eval_fn=accuracy, output_dir=tmp_path / "trl", verbose=False, **shared)
    trainer.train()
    trl = trainer.metrics_callback.history
    for hist in (scratch, trl):
        steps = [h for h in hist if "loss" in h]
        assert [h["step"] for h in steps] == [1, 2, 3]
        for h in steps:
            assert math.isfinite(h["loss"]) and h["loss/kl"] == 0.0
            assert abs(h["stats/clip_frac"] - h["stats/clip_frac_low"] - h["stats/clip_frac_high"]) < 1e-6
        lrs = torch.tensor([h["stats/learning_rate"] for h in steps], dtype=torch.float64)   # (3,)
        torch.testing.assert_close(lrs[:-1] - lrs[1:], torch.full((2,), P.lr / 3, dtype=torch.float64),
                                   rtol=1e-6, atol=1e-12)
    scratch_lrs = [h["stats/learning_rate"] for h in scratch if "loss" in h]
    assert scratch_lrs[-1] == pytest.approx(0.0, abs=1e-12), "the scratch loop's rate reaches 0 at the last step"
    accs = [[(h["step"], h["eval/accuracy"]) for h in hist if "eval/accuracy" in h] for hist in (scratch, trl)]
    assert [s for s, _ in accs[0]] == [s for s, _ in accs[1]] == [0, 2, 3], "evaluated at the same steps"
    assert accs[0][0][1] == accs[1][0][1], "the same start weights, the same accuracy"
    assert any(not torch.equal(p, start[n]) for n, p in model.named_parameters() if n in start), "TRL moved them"


def test_clip_higher_frees_an_upward_token_and_leaves_the_lower_clip():
    """rho = 1.25 with A > 0 is clipped at 1 + 0.2 (no gradient) but free under epsilon_high = 0.28, with the
    plain gradient -rho A / (2 tokens); rho = 0.75 with A < 0 stays clipped at 1 - 0.2 either way."""
    rho = torch.tensor([[1.25, 0.75]])                                           # (1, 2) one token each side
    grads = {}
    for A in (1.0, -1.0):
        for eps_high in (None, 0.28):
            logp = rho.log().requires_grad_()                                    # (1, 2)
            loss, _ = grpo_loss(logp, torch.zeros(1, 2), torch.tensor([A]), torch.ones(1, 2), epsilon=0.2,
                                epsilon_high=eps_high)
            grads[A, eps_high] = torch.autograd.grad(loss, logp)[0][0]           # (2,)
    assert grads[1.0, None][0] == 0 and grads[1.0, 0.28][0] < 0
    torch.testing.assert_close(grads[1.0, 0.28][0], torch.tensor(-1.25 / 2))
    assert grads[-1.0, None][1] == 0 and grads[-1.0, 0.28][1] == 0


def test_the_kl_term_of_grpo_loss_is_the_ratio_times_k3():
    """With A = 0 and beta = 1, grpo_loss is the token mean of rho * k3, with its gradient; the logged kl is the
    raw k3 (no ratio) and the policy term is 0 (float64, default tolerances)."""
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(3, 4, generator=g, dtype=torch.float64)).requires_grad_()   # (3, 4)
    old = logp.detach() + 0.1 * torch.randn(3, 4, generator=g, dtype=torch.float64)  # (3, 4)
    ref = -torch.rand(3, 4, generator=g, dtype=torch.float64)                         # (3, 4)
    lib, stats = grpo_loss(logp, old, torch.zeros(3, dtype=torch.float64), torch.ones(3, 4), ref_logp=ref, beta=1.0)
    mine = (torch.exp(logp - old) * kl_k3(logp, ref)).mean()
    torch.testing.assert_close(lib, mine)
    torch.testing.assert_close(stats["kl"], kl_k3(logp, ref).mean().detach())
    torch.testing.assert_close(stats["policy_loss"], torch.zeros((), dtype=torch.float64))
    torch.testing.assert_close(torch.autograd.grad(lib, logp)[0], torch.autograd.grad(mine, logp)[0])


def test_the_four_aggregations_equal_a_naive_loop():
    """aggregate_loss on random (B, T) losses and masks equals a loop over completions and tokens for each
    loss_type (fp32: rtol 1e-5, atol 1e-6)."""
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        x, m = torch.randn(5, 7, generator=g), (torch.rand(5, 7, generator=g) > 0.4).float()   # (5, 7)
        m[:, 0] = 1                                                               # every completion has a token
        sums = [sum(x[i, t].item() for t in range(7) if m[i, t]) for i in range(5)]
        lengths = [int(m[i].sum()) for i in range(5)]
        naive = {"grpo": sum(s / n for s, n in zip(sums, lengths)) / 5, "bnpo": sum(sums) / sum(lengths),
                 "dapo": sum(sums) / sum(lengths), "dr_grpo": sum(sums) / (5 * 9)}
        for lt in LOSS_TYPES:
            torch.testing.assert_close(aggregate_loss(x, m, lt, max_completion_length=9), torch.tensor(naive[lt]),
                                       rtol=1e-5, atol=1e-6)


def test_the_reference_gspo_ratio_is_the_geometric_mean_of_the_token_ratios():
    """Exercise 2's answer: per completion the geometric mean of its token ratios over the mask (a loop), and 1
    on-policy."""
    ratio = solutions().my_gspo_ratio
    g = torch.Generator().manual_seed(4)
    logp, old = -torch.rand(5, 6, generator=g) * 3, -torch.rand(5, 6, generator=g) * 3     # (5, 6)
    mask = (torch.rand(5, 6, generator=g) > 0.3).float()
    mask[:, 0] = 1
    naive = torch.tensor([math.prod((logp[i, t] - old[i, t]).exp().item() for t in range(6) if mask[i, t])
                          ** (1 / mask[i].sum().item()) for i in range(5)])
    torch.testing.assert_close(ratio(logp, old, mask), naive)
    torch.testing.assert_close(ratio(logp, logp, mask), torch.ones(5))
