"""Multi-turn reprompting (no training): the reprompting loop on one question, best-of-N's
first-success stream, and the comparison with best-of-N at the same sample budget."""

from __future__ import annotations

import pytest
import torch

from sdpo_kit.core.sampling import generate_completions
from sdpo_kit.models import load_policy
from sdpo_kit.rewards import exact_match_reward, feedback_reward
from sdpo_kit.sdpo import multi_turn as mt
from sdpo_kit.tasks import ArithmeticTask


@pytest.fixture(scope="module")
def lab():
    model, tok = load_policy("tiny-lab")
    task = ArithmeticTask()
    return model, tok, task, task.splits()[1]


def succeeds_at(k: int):
    """A reward that fails every completion it is shown until the k-th (1-based, counted over
    calls), which succeeds: where a method's first success lands, whatever it sampled."""
    seen = [0]

    def reward(prompts, completions, answer, **columns):
        out = []
        for _ in completions:
            seen[0] += 1
            out.append({"score": float(seen[0] == k), "feedback": "" if seen[0] == k else "Try again."})
        return out
    return reward


def test_the_loop_reprompts_with_feedback_and_stops_at_success(lab):
    """A wrong first round leads to a reprompt that carries the checker's feedback; a success
    stops the loop, and the samples counted are rounds x n; the policy is never changed."""
    model, tok, task, heldout = lab
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(0)
    results = [mt.multi_turn_reprompting(model, tok, r["prompt"], feedback_reward(), columns={"answer": r["answer"]},
                                         n=2, rounds=3, max_new_tokens=4) for r in heldout[:30]]
    assert all(x.samples == x.rounds * 2 and len(x.prompts) == x.rounds for x in results)
    assert all(x.solved == (x.answer is not None) for x in results)
    assert all(task.is_correct(x.answer, r["answer"]) for x, r in zip(results, heldout) if x.solved)
    assert all((x.rounds - 1) * 2 < x.attempts <= x.samples if x.solved else x.attempts == x.samples for x in results)
    later = [x for x in results if x.rounds > 1]
    assert later, "every question solved in round 1: the reprompt was never exercised"
    assert all("feedback" in x.prompts[1][-1]["content"] and x.prompts[0] == r["prompt"]
               for x, r in zip(results, heldout) if x.rounds > 1)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items()), "multi-turn never trains"


def test_without_feedback_the_reprompt_is_the_template_only(lab):
    """A float reward gives no feedback: later rounds' prompts carry no feedback text."""
    model, tok, task, heldout = lab
    row = heldout[0]
    res = mt.multi_turn_reprompting(model, tok, row["prompt"], exact_match_reward(), columns={"answer": "-1"},
                                    n=2, rounds=2, max_new_tokens=4)
    assert not res.solved and res.samples == res.attempts == 4 and "feedback" not in res.prompts[1][-1]["content"]


def test_attempts_count_in_sampling_order(lab):
    """attempts = (round - 1) x n + the success's 1-based index in its round; first_success the
    same in best-of-N's stream, in one call or in batches; bad arguments raise."""
    model, tok, task, heldout = lab
    row = heldout[0]
    for k in (1, 3, 7):
        res = mt.multi_turn_reprompting(model, tok, row["prompt"], succeeds_at(k), columns={"answer": row["answer"]},
                                        n=3, rounds=3, max_new_tokens=4)
        assert (res.solved, res.attempts, res.rounds, res.samples) == (True, k, (k - 1) // 3 + 1, ((k - 1) // 3 + 1) * 3)
        for batch_size in (None, 2, 3):
            assert mt.first_success(model, tok, row["prompt"], succeeds_at(k), columns={"answer": row["answer"]},
                                    n=9, batch_size=batch_size, max_new_tokens=4) == k
    assert mt.first_success(model, tok, row["prompt"], succeeds_at(10), columns={"answer": "1"}, n=9,
                            max_new_tokens=4) is None
    assert not mt.best_of_n(model, tok, row["prompt"], succeeds_at(10), columns={"answer": "1"}, n=9, max_new_tokens=4)
    assert mt.best_of_n(model, tok, row["prompt"], succeeds_at(9), columns={"answer": "1"}, n=9, max_new_tokens=4)
    for bad in (dict(n=0), dict(rounds=0)):
        with pytest.raises(ValueError):
            mt.multi_turn_reprompting(model, tok, row["prompt"], feedback_reward(), columns={"answer": "1"}, **bad)
    with pytest.raises(ValueError):
        mt.first_success(model, tok, row["prompt"], feedback_reward(), columns={"answer": "1"}, n=4, batch_size=0)


def test_compare_with_best_of_n_counts_the_greedy_failures(lab):
    """Only rows the greedy policy fails are attempted; best-of-N draws n x rounds samples; the
    reprompting loop never more; solved-after-round is cumulative."""
    model, tok, task, heldout = lab
    rows = heldout[:20]
    out = mt.compare_multi_turn_with_best_of_n(model, tok, task, rows, feedback_reward(), n=2, rounds=2)
    greedy_fails = sum(not task.is_correct(g, r["answer"]) for g, r in zip(
        generate_completions(model, tok, [r["prompt"] for r in rows], max_new_tokens=task.max_completion_tokens()), rows))
    assert out["greedy_failed"] == greedy_fails > 0
    assert out["multi_turn_mean_samples"] <= out["best_of_n_samples"] == 4
    after = out["multi_turn_solved_after_round"]
    assert after == sorted(after) and after[-1] == pytest.approx(out["multi_turn_solved"])
    assert 0.0 <= out["best_of_n_solved"] <= 1.0
