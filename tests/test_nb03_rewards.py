"""Notebook 03's plumbing, checked here so the notebook keeps only the checks of its ideas: the answer rules
on tricky completions, chat-format completions scored like their text, the empty completion's score in
either format, the hacking runs' logs (one row per step, the monitors logged, the KL term really on) and
the notebook's profile table. All on the tiny lab, in seconds."""

from __future__ import annotations

import json
import math

import pytest

from sdpo_kit.core.profiles import REAL_CPU_MODEL, T4_MODEL, TINY_LAB
from sdpo_kit.course.profiles.nb03 import PROFILES
from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.rewards import (
    coverage_weighted_ce_reward,
    exact_match_reward,
    format_and_match_reward,
    inverse_loss_reward,
    make_reward,
    tag_format_reward,
)
from sdpo_kit.tasks import completion_text
from sdpo_kit.text.answers import extract_answer, is_correct

# (completion, right under first_line, under auto, under first_number), the answer 9 (notebook 03, section 1)
RULE_TABLE = [
    ("9", True, True, True),
    (" 9 \n", True, True, True),
    ("9.", True, True, True),
    ("09", False, True, True),                      # first_line compares text; the number rules read 9
    ("nine", False, False, False),
    ("", False, False, False),
    ("#@!~ ]]<<", False, False, False),
    ("3 + 5 + 1 = 9", False, True, False),          # a real model's answer: first_line reads the sum
    ("9\nbecause 3+5+1", True, False, True),        # the tiny lab's format read by auto: 1
    ("The sum is 9, not 8.", False, False, True),   # no mark: auto reads the last number, 8
    ("#### 9\nor is it 8?", False, True, True),     # a mark wins over a later number
    ("\\boxed{9}", False, True, True),
    ("<answer>9</answer><answer>8</answer>", False, True, True),   # the first tag names the answer
    ("<answer>8</answer><answer>9</answer>", False, False, False),
]
TAGGED = ["<answer>9</answer>", "<answer> 9 </answer>\nbecause 3+5+1", "<answer>8</answer>", "", "9",
          "<answer>9", "<answer></answer>", "<answer>9</answer><answer>8</answer>"]


def chat(text):
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize("completion,first_line,auto,first_number", RULE_TABLE, ids=[repr(r[0]) for r in RULE_TABLE])
def test_answer_rules_read_the_tricky_completions(completion, first_line, auto, first_number):
    """Each answer rule pays exactly the completions of notebook 03's table (the answer is 9), and the
    exact-match reward of that rule agrees with ``is_correct``; no rule raises on empty or garbage text."""
    for rule, want in (("first_line", first_line), ("auto", auto), ("first_number", first_number)):
        assert is_correct(completion, "9", rule) is want, (rule, completion, extract_answer(completion, rule))
        assert exact_match_reward(rule=rule)(None, [completion], answer=["9"]) == [float(want)]


def test_verifiable_rewards_score_chat_messages_like_their_text():
    """TRL's conversational format (a list of messages) scores as the message's text, for every
    verifiable reward of the notebook; the hedge (two tags, the right one first) gets 0.8 from format+match."""
    answers = ["9"] * len(TAGGED)
    fns = [exact_match_reward(), exact_match_reward(tagged=True), exact_match_reward(rule="auto"),
           tag_format_reward(), format_and_match_reward()]
    for fn in fns:
        assert fn(None, [chat(t) for t in TAGGED], answer=answers) == fn(None, TAGGED, answer=answers), fn.__name__
    assert format_and_match_reward()(None, TAGGED[-1:], answer=["9"]) == pytest.approx([0.8], abs=1e-12)


@pytest.fixture(scope="module")
def lab():
    tok = build_tokenizer()
    return build_model(tok, seed=0).float().eval(), tok


def test_model_scored_rewards_give_the_empty_completion_zero(lab):
    """The inverse loss and the coverage-weighted CE score an empty completion 0 (their maximum) as a
    string and as an empty chat message; a non-empty completion scores below 0."""
    model, tok = lab
    empty = ["", chat(""), "9"]
    inverse = inverse_loss_reward(model, tok)(["3+5+1="] * 3, empty)
    assert inverse[:2] == [0.0, 0.0] and inverse[2] < 0
    coverage = coverage_weighted_ce_reward(model, tok)(["3+5+1="] * 3, empty, answer=["9"] * 3)
    assert coverage[:2] == [0.0, 0.0]


def distinct_in_group(G):
    def distinct_in_group(prompts, completions, **columns):
        texts = [completion_text(c) for c in completions]
        return [float(len(set(texts[i - i % G:i - i % G + G]))) for i in range(len(texts))]
    return distinct_in_group


TRAIN = [{"prompt": [{"role": "user", "content": f"{a}+{b}+1="}], "answer": str(a + b + 1)}
         for a in range(4) for b in range(3)]


def hack_loop(model, tok, tmp_path, beta=0.0, steps=3, G=4):
    """Notebook 03's hack_run without the dashboard: GRPO on the self-scored inverse loss with exact match
    and distinct-in-group as monitors (weight 0)."""
    rewards = make_reward([{"type": "inverse_loss", "scorer": "policy"}, "exact_match"], model, tok)
    cfg = GRPOScratchConfig(max_steps=steps, prompts_per_step=2, num_generations=G, learning_rate=3e-4,
                     max_completion_length=4, eval_every=0, seed=0, beta=beta, log_completions_every=1,
                     output_dir=str(tmp_path))
    return GRPOScratchTrainer(model, tok, rewards + [distinct_in_group(G)], TRAIN, cfg, reward_weights=[1.0, 0.0, 0.0])


def test_hack_run_logs_one_row_per_step_with_its_monitors(tmp_path):
    """The self-scored run logs one row per step: a reward that is a mean log-probability (<= 0), both
    monitors (exact match in [0, 1], distinct completions in [1, G]), and every sampled completion."""
    tok = build_tokenizer()
    model = build_model(tok, seed=0).float()
    history = hack_loop(model, tok, tmp_path).train()
    steps = [h for h in history if "reward/mean" in h]
    assert [h["step"] for h in steps] == [1, 2, 3]
    for h in steps:
        assert math.isfinite(h["reward/mean"]) and h["reward/mean"] <= 0
        assert 0 <= h["reward/exact_match"] <= 1 and 1 <= h["reward/distinct_in_group"] <= 4
    logged = [json.loads(x) for x in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert sorted({r["step"] for r in logged}) == [1, 2, 3] and len(logged) == 3 * 2 * 4


def test_kl_anchor_is_on_when_beta_is_positive(tmp_path):
    """With beta > 0 the KL to the frozen start is 0 at step 1 (the policy has not moved yet) and every
    step's loss is the policy loss plus beta times it (on-policy the ratio is 1; both are token means)."""
    tok = build_tokenizer()
    model = build_model(tok, seed=0).float()
    beta = 0.04
    steps = [h for h in hack_loop(model, tok, tmp_path, beta=beta).train() if "loss/kl" in h]
    assert len(steps) == 3 and steps[0]["loss/kl"] < 1e-6
    for h in steps:
        assert math.isclose(h["loss"], h["loss/policy"] + beta * h["loss/kl"], rel_tol=1e-4, abs_tol=1e-6), h


def test_the_notebook_profiles():
    """Every profile holds the settings notebook 03 reads; the smoke sizes only shrink them; the collapse's
    usual range is given on the tiny lab alone (where it was measured), as (low, high) per scorer and metric."""
    keys = {"task", "max_new_tokens", "group", "n_probe", "hack_steps", "prompts", "lr", "temperature", "n_eval",
            "eval_every", "collapse"}
    assert set(PROFILES) == {TINY_LAB, REAL_CPU_MODEL, T4_MODEL}
    for name, profile in PROFILES.items():
        assert keys <= set(profile), (name, keys - set(profile))
        for k, v in profile.get("smoke", {}).items():
            assert k in keys and v <= profile[k], (name, k)
        assert profile["n_probe"] <= profile["n_eval"], "the probe prompts are held-out problems"
    assert set(PROFILES[TINY_LAB]["collapse"]) == {"policy", "frozen"}
    for ranges in PROFILES[TINY_LAB]["collapse"].values():
        assert all(len(r) == 2 and r != (None, None) for r in ranges.values()), ranges
    assert PROFILES[REAL_CPU_MODEL]["collapse"] is None and PROFILES[T4_MODEL]["collapse"] is None
