"""Notebook 04 (VAPOR)'s plumbing, checked here so the notebook's asserts stay about the math: the sampled
ids decode back to their text, the tagged-sum pairs the notebook trains on all have both spans, its profiles
hold what it reads, its ``grpo_span`` variant is VAPOR's surrogate with log P = 0, and the reference answers
to its exercises agree with the library. All on the tiny lab's tokenizer, no model: seconds."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from sdpo_kit import make_task
from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.course import profile_table
from sdpo_kit.lab.model import build_tokenizer
from sdpo_kit.losses import group_advantages, vapor_loss
from sdpo_kit.vapor.config import VAPORScratchConfig
from sdpo_kit.vapor.loop import vapor_objective
from sdpo_kit.vapor.parts import preference_batch
from sdpo_kit.vapor.spans import find_span_token_indices, token_char_offsets

ROOT = Path(__file__).resolve().parents[1]
TAGS = ("<answer>", "</answer>")
# what the notebook reads from its profile (P.<key>)
KEYS = {"load_kw", "task", "max_new_tokens", "prompts", "group", "lr", "steps", "eval_every", "probe_steps",
        "probe_prompts", "seeds", "n_eval", "num_threads", "min_pushed_out", "every_run_moves"}
SIZES = ("max_new_tokens", "prompts", "group", "steps", "probe_steps", "probe_prompts", "n_eval")


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def solutions():
    spec = importlib.util.spec_from_file_location("solutions_nb04", ROOT / "notebooks" / "solutions" / "nb04.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sampled_ids_decode_to_their_text_and_character_offsets(tok):
    """``token_char_offsets`` rebuilds the text and each token's characters from ids alone (as sampled), the
    same offsets the tokenizer gives for that text, so a span found on them is the tokenizer's."""
    ids = tok("x<answer>12</answer>", add_special_tokens=False)["input_ids"]
    text, offsets = token_char_offsets(tok, ids)
    want = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert text == "x<answer>12</answer>" and offsets == [tuple(o) for o in want]
    assert find_span_token_indices(text, *TAGS, offsets=offsets) == range(9, 11)


def test_every_tagged_sum_pair_has_both_spans_and_the_chosen_span_holds_the_answer(tok):
    """The tiny lab's rows (notebook 04's section 3): a preference batch of P rows is 2P sequences, chosen
    first; every pair's spans are found; the chosen span decodes to the answer, the rejected one to another."""
    rows = make_task("vapor_arithmetic", digits=1, terms=3, n_eval=20, seed=0).splits()[0][:16]
    batch = preference_batch(tok, [r["prompt"] for r in rows], [r["chosen"] for r in rows],
                             [r["rejected"] for r in rows], TAGS)
    P = len(rows)
    assert batch.completion_ids.shape[0] == 2 * P and batch.found.tolist() == [1] * P
    spans = [tok.decode(batch.completion_ids[k][batch.span_mask[k].bool()]) for k in range(2 * P)]
    assert spans[:P] == [r["answer"] for r in rows]
    assert all(spans[P + k] != r["answer"] and spans[P + k].isdigit() for k, r in enumerate(rows))


def test_profiles_hold_what_the_notebook_reads():
    """A profile per model, each with every key the notebook reads; smoke sizes no larger than the full ones;
    the claims about a run (section 4's pushed-out margins, section 5's moved weights) only where measured,
    on the tiny lab."""
    table = profile_table("04")
    assert {TINY_LAB, REAL_CPU_MODEL, T4_MODEL} <= set(table)
    for name, profile in table.items():
        assert KEYS <= set(profile), (name, sorted(KEYS - set(profile)))
        smoke = {**profile, **profile.get("smoke", {})}
        for key in SIZES:
            assert smoke[key] <= profile[key], (name, key)
        assert set(smoke["seeds"]) <= set(profile["seeds"]) and smoke["probe_prompts"] <= smoke["prompts"] * 8
    assert table[TINY_LAB]["min_pushed_out"] and table[TINY_LAB]["every_run_moves"]
    assert all(table[m]["min_pushed_out"] is None and not table[m]["every_run_moves"] for m in (REAL_CPU_MODEL, T4_MODEL))


def test_grpo_span_is_vapor_loss_with_log_p_zero():
    """Section 5's baseline, ``vapor_variant="additive"`` with ``preference_weight=0``: whatever the pairs'
    log P, the loss and its gradient are VAPOR's surrogate with log P = 0, and log P gets no gradient."""
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(8, 5, generator=g, dtype=torch.float64) * 2                         # (8, 5) 2 prompts, G = 4
    logp = (old + 0.3 * torch.randn(8, 5, generator=g, dtype=torch.float64)).requires_grad_()
    span = (torch.rand(8, 5, generator=g) < 0.6).double()
    A = group_advantages(torch.tensor([1.0, 0, 0, 1, 1, 1, 0, 1], dtype=torch.float64), 4, scale_rewards="none")
    log_P = torch.tensor([0.9, -1.5], dtype=torch.float64, requires_grad=True)
    cfg = VAPORScratchConfig(vapor_variant="additive", preference_weight=0.0, epsilon=0.2)
    got, _, _ = vapor_objective(logp, old, span, A, log_P, torch.ones(2, dtype=torch.float64), cfg, 4)
    want, _ = vapor_loss(logp, old, span, A, torch.zeros(2, dtype=torch.float64), num_generations=4, epsilon=0.2)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    g_logp, g_log_P = torch.autograd.grad(got, (logp, log_P))
    torch.testing.assert_close(g_logp, torch.autograd.grad(want, logp)[0], rtol=1e-12, atol=1e-12)
    assert (g_log_P == 0).all()


def test_reference_answers_agree_with_the_library(tok):
    """``notebooks/solutions/nb04.py``: the zero-gradient range is the clip range in log P, the additive loss is
    ``vapor_objective``'s, and the strict span equals the library's span on character tokens (nothing straddles)."""
    ref = solutions()
    low, high = ref.my_zero_gradient_range(0.2, 0.28)
    assert math.isclose(low, math.log(0.8)) and math.isclose(high, math.log(1.28))
    g = torch.Generator().manual_seed(1)
    old = -torch.rand(8, 4, generator=g, dtype=torch.float64)                             # (8, 4)
    logp = old + 0.2 * torch.randn(8, 4, generator=g, dtype=torch.float64)
    span = torch.ones(8, 4, dtype=torch.float64)
    A = group_advantages(torch.tensor([1.0, 0, 1, 0, 0, 0, 1, 1], dtype=torch.float64), 4, scale_rewards="none")
    log_P, found = torch.tensor([0.3, -0.7], dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64)
    cfg = VAPORScratchConfig(vapor_variant="additive", preference_weight=0.5, epsilon=0.2)
    torch.testing.assert_close(ref.my_additive_loss(logp, old, span, A, log_P, found, 4, 0.5),
                               vapor_objective(logp, old, span, A, log_P, found, cfg, 4)[0])
    for text in ("<answer>12</answer>", "x <answer>7</answer><answer>8</answer>", "<answer></answer>", "12"):
        offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        assert ref.my_strict_span(text, *TAGS, offsets) == find_span_token_indices(text, *TAGS, tok), text
