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

from sdpo_kit.lab.model import build_tokenizer  # noqa: E402
from sdpo_kit.sdpo.reprompt import build_teacher_prompts, select_teachers, truncate_left  # noqa: E402


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
    assert truncate_left(range(10), 4) == ([6, 7, 8, 9], True)
    assert truncate_left([1, 2], 4) == ([1, 2], False)
