"""Test-time self-distillation: the reprompting loop on one question, and the comparison with
best-of-N at the same sample budget."""

from __future__ import annotations

import pytest
import torch

from sdpo_kit.lab.tasks import ArithmeticTask
from sdpo_kit.models import load_policy
from sdpo_kit.rewards import exact_match_reward, feedback_reward
from sdpo_kit.sdpo import test_time as tt


@pytest.fixture(scope="module")
def lab():
    model, tok = load_policy("tiny-lab")
    task = ArithmeticTask()
    return model, tok, task, task.splits()[1]


def test_the_loop_reprompts_with_feedback_and_stops_at_success(lab):
    """A wrong first round leads to a reprompt that carries the checker's feedback; a success
    stops the loop, and the samples counted are rounds x n."""
    model, tok, task, heldout = lab
    torch.manual_seed(0)
    results = [tt.test_time_self_distillation(model, tok, r["prompt"], feedback_reward(), columns={"answer": r["answer"]},
                                              n=2, rounds=3, max_new_tokens=4) for r in heldout[:30]]
    assert all(x.samples == x.rounds * 2 and len(x.prompts) == x.rounds for x in results)
    assert all(x.solved == (x.answer is not None) for x in results)
    assert all(task.is_correct(x.answer, r["answer"]) for x, r in zip(results, heldout) if x.solved)
    later = [x for x in results if x.rounds > 1]
    assert later, "every question solved in round 1: the reprompt was never exercised"
    assert all("feedback" in x.prompts[1][-1]["content"] and x.prompts[0] == r["prompt"]
               for x, r in zip(results, heldout) if x.rounds > 1)


def test_without_feedback_the_reprompt_is_the_template_only(lab):
    """A float reward gives no feedback: later rounds' prompts carry no feedback text."""
    model, tok, task, heldout = lab
    row = heldout[0]
    res = tt.test_time_self_distillation(model, tok, row["prompt"], exact_match_reward(), columns={"answer": "-1"},
                                         n=2, rounds=2, max_new_tokens=4)
    assert not res.solved and res.samples == 4 and "feedback" not in res.prompts[1][-1]["content"]


def test_compare_with_best_of_n_counts_the_greedy_failures(lab):
    """Only rows the greedy policy fails are attempted; best-of-N draws n x rounds samples; the
    reprompting loop never more; solved-after-round is cumulative."""
    model, tok, task, heldout = lab
    rows = heldout[:20]
    out = tt.compare_with_best_of_n(model, tok, task, rows, feedback_reward(), n=2, rounds=2)
    greedy_fails = sum(not task.is_correct(g, r["answer"]) for g, r in zip(
        tt.generate_completions(model, tok, [r["prompt"] for r in rows], max_new_tokens=task.max_completion_tokens()), rows))
    assert out["greedy_failed"] == greedy_fails > 0
    assert out["ttsd_mean_samples"] <= out["best_of_n_samples"] == 4
    after = out["ttsd_solved_after_round"]
    assert after == sorted(after) and after[-1] == pytest.approx(out["ttsd_solved"])


def test_test_time_training_moves_a_copy_towards_the_reprompted_teacher(lab):
    """train_steps > 0: SDPO steps on a copy of the policy, never on the policy; each step lowers
    the student's log s - log t on the round's candidates (towards the teacher shown the feedback)."""
    model, tok, task, heldout = lab
    from sdpo_kit.core.sampling import completion_logits, encode_prompts
    from sdpo_kit.losses import token_logprobs

    before = {k: v.clone() for k, v in model.state_dict().items()}
    row = heldout[0]
    torch.manual_seed(0)
    ro = tt.sample(model, tok, [row["prompt"]], max_new_tokens=4, temperature=1.0, num_return_sequences=4)
    fb = task.feedback("99", row["answer"])
    teacher_prompt = tt._reprompt(row["prompt"], None, fb, tt.REPROMPT_TEMPLATE, tt.SOLUTION_TEMPLATE, tt.FEEDBACK_TEMPLATE)

    def gap(m):  # mean over the candidates' tokens of log s - log t (the sampled-token KL estimate)
        with torch.no_grad():
            lp = []
            for p in (row["prompt"], teacher_prompt):
                enc = encode_prompts(tok, [p] * 4)
                net = m if p is row["prompt"] else model
                lp.append(token_logprobs(completion_logits(net, enc["input_ids"], enc["attention_mask"],
                                                           ro.completion_ids, ro.completion_mask), ro.completion_ids))
            return ((lp[0] - lp[1]) * ro.completion_mask).sum() / ro.completion_mask.sum()

    import copy
    LR, STEPS = 1e-4, 10   # test_time_self_distillation's default lr (at 3e-4 the fixed-sample loss overshoots)
    student = copy.deepcopy(model).requires_grad_(True)
    opt = torch.optim.AdamW(student.parameters(), lr=LR)
    gaps = [gap(student)]
    for _ in range(STEPS):
        tt.test_time_step(student, opt, model, tok, row["prompt"], teacher_prompt, ro, temperature=1.0)
        gaps.append(gap(student))
    assert gaps[0] > 0.05, f"the teacher shown the feedback should disagree with the student first: {gaps}"
    assert all(b < a for a, b in zip(gaps, gaps[1:])) and gaps[-1] < 0.9 * gaps[0], gaps

    torch.manual_seed(0)
    failed = [r for r in heldout[:40] if not task.is_correct(tt.generate_completions(model, tok, [r["prompt"]],
                                                                                       max_new_tokens=4)[0], r["answer"])]
    results = [tt.test_time_self_distillation(model, tok, r["prompt"], feedback_reward(), columns={"answer": r["answer"]},
                                              n=2, rounds=3, max_new_tokens=4, train_steps=2) for r in failed[:10]]
    for x in results:   # two steps after every failed round but the last (every failure has feedback here)
        assert len(x.distill_losses) == 2 * (x.rounds - 1) and all(map(lambda v: v == v, x.distill_losses))
    assert any(x.distill_losses for x in results), "no question needed a second round: training never ran"
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items()), "the policy itself is never trained"
    with pytest.raises(ValueError):
        tt.test_time_self_distillation(model, tok, heldout[0]["prompt"], feedback_reward(),
                                       columns={"answer": heldout[0]["answer"]}, train_steps=-1)
