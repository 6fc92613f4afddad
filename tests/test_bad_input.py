"""Bad input around rewards fails loudly and names the culprit, never scores silently wrong.

Covers: a dataset without ``prompt`` or without the column a reward needs (the column and the
reward are named), a reward returning NaN / inf / None or the wrong number of values (the
function is named), a reward that raises (named, original exception chained), bad factory
configs, and completions that are empty or lack tags (scored 0, no crash).
"""

from __future__ import annotations

import math

import pytest

from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.rewards import (
    RewardError,
    answer_likelihood_reward,
    call_reward,
    check_columns,
    checked,
    compute_rewards,
    coverage_weighted_ce_reward,
    exact_match_reward,
    format_and_match_reward,
    inverse_loss_reward,
    make_reward,
    tag_format_reward,
)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return build_model(tok).eval()


def constant(value, name="my_reward"):
    def fn(prompts, completions, **columns):
        return [value] * len(completions)

    fn.__name__ = name
    return fn


KW = {"prompts": ["1+1="] * 3, "completions": ["2", "3", ""], "answer": ["2"] * 3}


# ---------------------------------------------------------------------------------------
# missing columns
# ---------------------------------------------------------------------------------------
def test_missing_answer_column_names_column_and_reward(model, tok):
    """A dataset without the column a reward declares fails naming both, for verifiable and
    model-scored rewards and for a custom answer_field."""
    cases = [(exact_match_reward(), "answer", "exact_match"),
             (format_and_match_reward("gold"), "gold", "format_and_match"),
             (coverage_weighted_ce_reward(model, tok, "target"), "target", "coverage_ce"),
             (answer_likelihood_reward(model, tok), "answer", "answer_likelihood")]
    for fn, col, name in cases:
        with pytest.raises(ValueError) as e:
            check_columns(["prompt", "question"], [fn])
        msg = str(e.value)
        assert repr(col) in msg and repr(name) in msg, msg


def test_missing_prompt_column_is_named():
    """A dataset without ``prompt`` fails naming it, whatever the rewards."""
    with pytest.raises(ValueError, match="'prompt'"):
        check_columns(["question", "answer"], [exact_match_reward()])


def test_columns_present_pass(model, tok):
    """The check is not over-eager: rewards without required columns, or with them present, pass."""
    check_columns(["prompt"], [tag_format_reward(), inverse_loss_reward(model, tok)])
    check_columns(["prompt", "answer"], [exact_match_reward(), coverage_weighted_ce_reward(model, tok)])


@pytest.mark.parametrize("drop", ["prompt", "answer"])
def test_grpo_loop_rejects_rows_without_prompt_or_answer(model, tok, drop):
    """GRPOScratchTrainer fails at construction, before any sampling, naming the missing column (and
    for the answer, the reward that needs it)."""
    rows = [{k: v for k, v in {"prompt": [{"role": "user", "content": "1+1="}], "answer": "2"}.items() if k != drop}]
    with pytest.raises(ValueError) as e:
        GRPOScratchTrainer(model, tok, [exact_match_reward()], rows, GRPOScratchConfig(max_steps=1, num_generations=2))
    assert repr(drop) in str(e.value)
    if drop == "answer":
        assert "'exact_match'" in str(e.value)


def test_model_scored_reward_called_without_its_column(model, tok):
    """Called directly without its column (skipping check_columns), a supervised reward still
    fails through call_reward naming itself, with the KeyError for the column chained."""
    with pytest.raises(RewardError, match="coverage_ce") as e:
        call_reward(coverage_weighted_ce_reward(model, tok), ["q"], ["12"])
    assert isinstance(e.value.__cause__, KeyError) and "answer" in str(e.value.__cause__)


# ---------------------------------------------------------------------------------------
# bad values from a reward function
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), None])
def test_non_finite_reward_names_the_function(bad):
    """NaN, +-inf or None from a reward is a RewardError naming the function and the value."""
    with pytest.raises(RewardError) as e:
        call_reward(constant(bad, "nan_maker"), **KW)
    msg = str(e.value)
    assert "'nan_maker'" in msg and ("nan" in msg or "inf" in msg)


def test_one_bad_value_among_good_ones_is_caught():
    """A single non-finite value in a batch is caught, and the message points at its completion."""
    def mostly_fine(prompts, completions, **columns):
        return [1.0, math.nan, 0.0]

    with pytest.raises(RewardError, match=r"'mostly_fine' returned nan for completion 1: '3'"):
        call_reward(mostly_fine, **KW)


@pytest.mark.parametrize("n", [0, 2, 4])
def test_wrong_number_of_values_names_the_function(n):
    """Too few or too many values is a RewardError naming the function and both counts."""
    def wrong_len(prompts, completions, **columns):
        return [0.0] * n

    with pytest.raises(RewardError, match=rf"'wrong_len' returned {n} values for 3 completions"):
        call_reward(wrong_len, **KW)


def test_raising_reward_is_named_and_chained():
    """A reward that raises becomes a RewardError naming it and the exception type, with the
    original exception as ``__cause__`` and its traceback kept."""
    def broken(prompts, completions, **columns):
        return [1.0 / 0 for _ in completions]

    with pytest.raises(RewardError, match="'broken' raised ZeroDivisionError") as e:
        call_reward(broken, **KW)
    cause = e.value.__cause__
    assert isinstance(cause, ZeroDivisionError) and cause.__traceback__ is not None
    frames = []
    tb = cause.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert "broken" in frames


def test_checked_wrapper_and_compute_rewards_raise_the_same_errors():
    """``checked`` (what the TRL path uses) keeps the function's name and raises the same
    named errors; ``compute_rewards`` names the bad function among good ones."""
    wrapped = checked(constant(float("inf"), "inf_maker"))
    assert wrapped.__name__ == "inf_maker"
    with pytest.raises(RewardError, match="'inf_maker'"):
        wrapped(**KW)
    with pytest.raises(RewardError, match="'inf_maker'"):
        compute_rewards([exact_match_reward(), constant(float("inf"), "inf_maker")],
                        KW["prompts"], KW["completions"], {"answer": KW["answer"]})


def test_good_rewards_pass_through_call_reward():
    """call_reward returns plain floats for a well-behaved reward (ints and bools converted)."""
    assert call_reward(constant(1), **KW) == [1.0, 1.0, 1.0]
    assert call_reward(exact_match_reward(), **KW) == [1.0, 0.0, 0.0]


# ---------------------------------------------------------------------------------------
# text without tags, empty text, text outside the vocabulary
# ---------------------------------------------------------------------------------------
def test_untagged_and_empty_completions_score_zero_not_crash(model, tok):
    """Completions without tags, with broken tags, empty, None or whitespace score 0 under the
    tagged rewards; model-scored rewards give finite scores (0.0 for empty) on the same
    batch, including characters the tokenizer does not know."""
    comps = ["9", "<answer>9", "", None, "   ", "\u00e9\U0001f600\x00"]
    n = len(comps)
    kw = {"prompts": ["1+8="] * n, "completions": comps, "answer": ["9"] * n}
    for fn in (exact_match_reward(tagged=True), tag_format_reward(), format_and_match_reward()):
        assert call_reward(fn, **kw) == [0.0] * n
    for fn in (inverse_loss_reward(model, tok), coverage_weighted_ce_reward(model, tok),
               answer_likelihood_reward(model, tok)):
        out = call_reward(fn, **kw)  # raises if anything is not finite
        assert len(out) == n
    assert call_reward(inverse_loss_reward(model, tok), **kw)[2:4] == [0.0, 0.0]


# ---------------------------------------------------------------------------------------
# factory and constructor arguments
# ---------------------------------------------------------------------------------------
def test_unknown_reward_type_lists_the_valid_ones():
    """An unknown type is a ValueError naming it and listing every valid type."""
    with pytest.raises(ValueError) as e:
        make_reward({"type": "perplexity"})
    msg = str(e.value)
    assert "'perplexity'" in msg
    for t in ("inverse_loss", "supervised", "coverage_ce", "answer_likelihood", "exact_match",
              "tagged_exact_match", "tag_format", "format_and_match"):
        assert t in msg


@pytest.mark.parametrize("rtype", ["inverse_loss", "supervised", "coverage_ce", "answer_likelihood"])
def test_model_scored_types_need_model_and_tokenizer(model, tok, rtype):
    """A model-scored type without model= or tokenizer= fails naming the type, instead of
    failing later inside the trainer."""
    for kwargs in ({}, {"model": model}, {"tokenizer": tok}):
        with pytest.raises(ValueError, match=rf"'{rtype}'.*model= and tokenizer="):
            make_reward({"type": rtype}, **kwargs)


def test_bad_factory_entries_and_options(model, tok):
    """Unknown options are named with the accepted ones (``weight`` points to where weights
    go); entries without a type, and an empty list, are errors."""
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['answer_feild'\].*answer_field"):
        make_reward({"type": "exact_match", "answer_feild": "answer"})
    with pytest.raises(ValueError, match="reward_weights"):
        make_reward({"type": "exact_match", "weight": 2.0})
    with pytest.raises(ValueError, match="'type'"):
        make_reward([{"answer_field": "answer"}])
    with pytest.raises(ValueError, match="empty"):
        make_reward([])


def test_bad_scorer_and_micro_batch_size(model, tok):
    """An unknown scorer or a non-positive micro_batch_size fails at construction, naming the argument."""
    with pytest.raises(ValueError, match="scorer"):
        inverse_loss_reward(model, tok, scorer="teacher")
    with pytest.raises(ValueError, match="scorer"):
        make_reward({"type": "answer_likelihood", "scorer": "ref"}, model=model, tokenizer=tok)
    for mb in (0, -1, 2.5):
        with pytest.raises(ValueError, match="micro_batch_size"):
            coverage_weighted_ce_reward(model, tok, micro_batch_size=mb)
