"""SDPO's teacher prompts: the same selection and templates as TRL's
SuccessfulRolloutTeacherContextBuilder, which serves as the oracle on the same rows."""

from __future__ import annotations

import os
import random
from types import SimpleNamespace

import pytest
import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
from trl.experimental.sdpo.sdpo_config import SDPOConfig  # noqa: E402
from trl.experimental.sdpo.sdpo_trainer import SuccessfulRolloutTeacherContextBuilder  # noqa: E402

from sdpo_kit.core.sampling import encode_prompts  # noqa: E402
from sdpo_kit.lab.model import build_tokenizer  # noqa: E402
from sdpo_kit.sdpo.config import SDPOScratchConfig  # noqa: E402
from sdpo_kit.sdpo.teacher import teacher_prompt_batch  # noqa: E402
from sdpo_kit.text.reprompt import (  # noqa: E402
    SOLUTION_TEMPLATE,
    build_teacher_prompts,
    fit_teacher_prompts,
    select_teachers,
    truncate_left,
)


class RecordingBuilder(SuccessfulRolloutTeacherContextBuilder):
    """TRL's builder with tokenisation replaced by recording the teacher messages."""

    def _tokenize_teacher_messages(self, messages):
        self.messages = messages
        n = len(messages)
        return {"prompt_ids": torch.zeros(n, 1, dtype=torch.long), "prompt_mask": torch.ones(n, 1, dtype=torch.long)}


def trl_teacher_prompts(tok, prompts, completions, rewards, G, feedbacks, **args):
    """Run TRL's builder on a stand-in trainer (one process) and return (messages, mask)."""
    ids = [tok(c, add_special_tokens=False)["input_ids"] for c in completions]
    T = max(len(i) for i in ids)
    completion_ids = torch.tensor([i + [tok.pad_token_id] * (T - len(i)) for i in ids])
    accel = SimpleNamespace(device="cpu", process_index=0, gather=lambda x: x,
                            pad_across_processes=lambda x, dim, pad_index: x)
    config = SDPOConfig(output_dir="/tmp/unused", use_cpu=True, bf16=False, report_to="none", **args)
    trainer = SimpleNamespace(args=config, accelerator=accel, num_generations=G, model=SimpleNamespace(training=True),
                              _tokenizer=tok, processing_class=tok)
    builder = RecordingBuilder(trainer)
    out = builder.build({"completion_ids": completion_ids, "completion_mask": (completion_ids != tok.pad_token_id).long()},
                        list(prompts), torch.tensor(rewards), feedbacks)
    return builder.messages, out["self_distillation_mask"]


def rows(seed, G=4, groups=3, chat=True):
    rng = random.Random(seed)
    prompts, completions, rewards, feedbacks = [], [], [], []
    for g in range(groups):
        q = f"{g}+{g + 1}="
        prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": q}] if chat else q
        for _ in range(G):
            prompts.append(prompt)
            completions.append(rng.choice(["<think>hmm</think>7", "8", "x", "12"]))
            rewards.append(rng.choice([0.0, 0.0, 1.0, 0.5]))
            feedbacks.append(rng.choice([None, "", "  ", "too large", "too small"]))
    return prompts, completions, rewards, feedbacks


@pytest.mark.parametrize("chat", [True, False])
@pytest.mark.parametrize("options", [
    {},
    {"dont_reprompt_on_self_success": False},
    {"include_environment_feedback": True},
    {"include_environment_feedback": True, "environment_feedback_only_without_solution": True},
    {"include_environment_feedback": True, "success_reward_threshold": 0.5, "remove_thinking_from_demonstration": True},
    {"use_successful_as_teacher": False, "include_environment_feedback": True},
])
def test_teacher_prompts_equal_trls_builder(chat, options):
    """Same teacher prompt and mask as TRL's builder on random groups (successes, partial
    rewards, empty and blank feedback), for chat and plain prompts and every option."""
    tok = build_tokenizer()
    ours_names = {"include_environment_feedback": "include_feedback", "success_reward_threshold": "success_threshold",
                  "environment_feedback_only_without_solution": "feedback_only_without_solution"}
    for seed in range(5):
        prompts, completions, rewards, feedbacks = rows(seed, chat=chat)
        expected, mask = trl_teacher_prompts(tok, prompts, completions, rewards, 4, feedbacks, **options)
        kwargs = {ours_names.get(k, k): v for k, v in options.items()}
        kwargs.setdefault("include_feedback", False)  # TRL's default is off; ours on
        got, got_mask = build_teacher_prompts(prompts, completions, rewards, 4, feedbacks, **kwargs)
        assert got == expected
        torch.testing.assert_close(got_mask, mask.float())


def test_selection_rules_by_hand():
    """G = 3: row 0 succeeded alone (no other success: no teacher), rows 1-2 take row 0; feedback
    only where it is non-empty; without solution or feedback the teacher prompt is the original."""
    sel = select_teachers([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], 3, [None, "", "too big", None, None, None])
    assert sel.demo == [None, 0, 0, None, None, None]
    assert sel.use_feedback == [False, False, True, False, False, False]
    assert sel.mask.tolist() == [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert sel.metrics()["sdpo/teacher_coverage"] == pytest.approx(2 / 6)
    prompts, mask = build_teacher_prompts(["q1"] * 3 + ["q2"] * 3, ["9", "8", "7", "1", "2", "3"],
                                          [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], 3)
    assert prompts[0] == "q1" and prompts[3] == "q2" and "Correct solution:\n\n9" in prompts[1]
    with pytest.raises(ValueError, match="last user message"):
        build_teacher_prompts([[{"role": "assistant", "content": "x"}]] * 2, ["a", "b"], [1.0, 1.0], 2)
    with pytest.raises(ValueError, match="whole groups"):
        select_teachers([1.0, 0.0, 1.0], 2)


def test_truncate_left():
    """The last max_len ids, and whether anything was cut (TRL's cut, the last resort)."""
    assert truncate_left(range(10), 4) == ([6, 7, 8, 9], True)
    assert truncate_left([1, 2], 4) == ([1, 2], False)


# ---------------------------------------------------------------------------------------
# teacher prompts over max_reprompt_len: the demonstration's head goes, the question stays
# ---------------------------------------------------------------------------------------
def contains(ids: list[int], part: list[int]) -> bool:
    return any(ids[i:i + len(part)] == part for i in range(len(ids) - len(part) + 1))


def test_fit_cuts_the_demonstrations_head_by_hand():
    """Characters as tokens (count_tokens = each prompt's len), max_len = 60: the row with a 100-character
    demonstration keeps the question, the instruction and exactly the demonstration's last
    characters that fit (60 with one more character would be 61); the row without a teacher is
    untouched; then feedback: with no room for any demonstration, its section goes and the
    feedback's head is cut."""
    prompts, attempt = ["Q: 2+2=?", "Q: 2+2=?"], "x" * 96 + "= 4."

    def lengths(batch):
        return [len(p) for p in batch]

    sel = select_teachers([1.0, 0.0], 2)
    fitted, over = fit_teacher_prompts(prompts, [attempt, "5"], None, sel, lengths, 60)
    assert over == [False, True] and fitted[0] == "Q: 2+2=?"
    fixed = len("Q: 2+2=?") + len(SOLUTION_TEMPLATE.format(successful_previous_attempt="")) + len(
        "\n\nCorrectly solve the original question.\n")                     # 8 + 21 + 42 = 71 > 60
    assert fixed == 71 and fitted[1] == "Q: 2+2=?\n\nCorrectly solve the original question.\n"  # no room: section gone
    fitted, over = fit_teacher_prompts(prompts, [attempt, "5"], None, sel, lengths, 100)
    tail = attempt[-(100 - 71):]                                                  # 29 characters fit
    assert fitted[1] == "Q: 2+2=?" + SOLUTION_TEMPLATE.format(successful_previous_attempt=tail) + \
        "\n\nCorrectly solve the original question.\n" and len(fitted[1]) == 100
    sel = select_teachers([0.0, 0.0], 2, ["", "f" * 200 + " wrong"], include_feedback=True)
    fitted, over = fit_teacher_prompts(prompts, ["1", "2"], ["", "f" * 200 + " wrong"], sel, lengths, 160)
    assert over == [False, True] and len(fitted[1]) == 160
    assert fitted[1].startswith("Q: 2+2=?") and "f wrong" in fitted[1] and fitted[1].endswith("question.\n")


@pytest.mark.parametrize("chat", [True, False])
def test_a_long_teacher_prompt_keeps_the_question(chat):
    """The tiny lab's tokenizer, max_reprompt_len = 120, a sibling's 300-character solution:
    ``teacher_batch`` (what both backends feed the teacher) keeps every token of the question, the
    instruction and the solution's end, in at most 120 tokens, and counts the row as cut. The
    control: TRL's left cut of the same prompt (``teacher_prompt_batch``) loses the question."""
    tok = build_tokenizer()
    question = "123+456="
    prompt = [{"role": "user", "content": question}] if chat else question
    solution = "7" * 300 + " so 579"
    completions = [[{"role": "assistant", "content": c}] for c in (solution, "9")] if chat else [solution, "9"]
    cfg = SDPOScratchConfig(num_generations=2, prompts_per_step=1, max_reprompt_len=120)
    with pytest.warns(UserWarning, match="head of their demonstration"):  # row 1 learns from row 0's solution
        ids, mask, selection, truncated = cfg.teacher_batch(tok, [prompt] * 2, completions, [1.0, 0.0], None)
    kept = ids[1][mask[1].bool()].tolist()
    assert selection.mask.tolist() == [0.0, 1.0] and truncated == 0.5
    assert len(kept) <= 120 and ids.size(1) <= 120
    for part in (question, "Correctly solve the original question.", "7 so 579"):
        assert contains(kept, tok(part, add_special_tokens=False)["input_ids"]), part
    full, _ = cfg.teacher_prompts([prompt] * 2, completions, [1.0, 0.0], None)
    assert len(encode_prompts(tok, [full[1]])["input_ids"][0]) > 120
    with pytest.warns(UserWarning, match="cut from the left"):
        left, left_mask, _ = teacher_prompt_batch(tok, full, 120)
    assert not contains(left[1][left_mask[1].bool()].tolist(), tok(question, add_special_tokens=False)["input_ids"])


def test_a_question_too_long_for_max_reprompt_len_is_cut_from_the_left():
    """The last resort: a question that alone is over max_reprompt_len loses its demonstration
    section and then its head (TRL's left cut); the result is still at most max_reprompt_len, and
    both rows count as cut (the one without a teacher keeps its original, too long, prompt)."""
    tok = build_tokenizer()
    cfg = SDPOScratchConfig(num_generations=2, prompts_per_step=1, max_reprompt_len=40)
    prompts = ["1+" * 40 + "1=", "1+" * 40 + "1="]
    with pytest.warns(UserWarning, match="cut from the left"):
        ids, mask, selection, truncated = cfg.teacher_batch(tok, prompts, ["80", "81"], [1.0, 0.0], None)
    assert selection.mask.tolist() == [0.0, 1.0] and ids.size(1) == 40 and truncated == 1.0
    kept = tok.decode(ids[1][mask[1].bool()])
    assert "Correct solution" not in kept and kept.endswith("Correctly solve the original question.\n")
