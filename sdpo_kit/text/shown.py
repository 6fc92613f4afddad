"""Text as a console shows it: what ``sdpo-kit eval --show`` and ``sdpo-kit train --show`` print.

    question_text(prompt) -> str     a chat prompt's last user message, else the text
    one_line(text, width) -> str     whitespace folded to single spaces, cut at ``width`` with "..."
"""

from __future__ import annotations


def question_text(prompt) -> str:
    """A prompt as the learner wrote it: a chat prompt's last user message, else the text."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if m.get("role") == "user"]
    return users[-1] if users else str(prompt)


def one_line(text, width: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."
