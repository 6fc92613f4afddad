"""The ``code`` reward: model-written Python scored against each row's test cases in the sandbox.

    code_reward(tests_field="tests", partial=False, ...)   TRL signature, ``{"score", "feedback"}`` per completion

The running and grading are ``sdpo_kit.sandbox`` (``runner.score_completions``: the last ```python block
of each completion, each test in a fresh locked-down child); this module turns them into a reward:
the score (all tests passed, or the share passed) and the SDPO authors' feedback text.

Left out on purpose: anything about running programs (the sandbox room holds it).
"""

from __future__ import annotations

from sdpo_kit.sandbox.runner import score_completions, split_tests
from sdpo_kit.text.answers import completion_text


def code_reward(tests_field: str = "tests", partial: bool = False, test_fraction: float = 1.0, split_seed: int = 0,
                timeout_s: float = 2.0, memory_mb: int = 1024, workers: int | None = None):
    """The ``code`` reward: ``{"score", "feedback"}`` per completion, scored on each row's
    ``split_tests(tests, test_fraction, split_seed)[0]``. The default, 1, scores the column as it
    is: ``load_code_problems(split="train")`` rows already hold the reward's half (halving them
    again would leave a quarter); ``test_fraction=0.5`` splits rows that hold every test.
    ``score``: 1.0 when every test passed, else 0.0 (the SDPO authors' choice); ``partial=True``:
    the share passed. The feedback is empty when all passed."""
    def code(prompts, completions, **columns) -> list[dict]:
        rows = [split_tests(t, test_fraction, split_seed)[0] for t in columns[tests_field]]
        results = score_completions([completion_text(c) for c in completions], rows, workers=workers,
                                    timeout_s=timeout_s, memory_mb=memory_mb)
        return [{"score": r.fraction if partial else r.score, "feedback": r.feedback} for r in results]

    code.required_columns = (tests_field,)
    code.__name__ = "code_partial" if partial else "code"
    return code
