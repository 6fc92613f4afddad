"""Test-case feedback for code, in the form the SDPO authors' code uses.

``render_feedback(outcomes)`` follows ``format_test_feedback`` in lasgroup/SDPO
(``verl/utils/reward_score/feedback/code.py``): empty when every test passed; else the first
runtime error in test order alone (its trace, then the input that triggered it), else the first
time limit alone, else up to two failing tests, shortest first (input plus output length), as
``Test Case i: Wrong Answer`` with input, output and expected, each cut to 250 characters and
input to 8 lines; stderr as ``Debug Output`` (10 lines of 300). The whole text is cut to 2,000
characters, silently, as theirs is. ``format_feedback`` has their two format messages.

Ours on top (said so, not hidden): a memory failure is headed ``Memory Limit Exceeded`` and
ranks with runtime errors; empty output reads ``(no output)``; a wrong answer that printed past
the cap, or wrote its own result records, says so in its header; the trace carries the source
line (the program is a real ``Solution.py`` file, so the line is found; in SDPO's harness it
usually is not).
"""

from __future__ import annotations

import json

MAX_LENGTH, MAX_CHARS, MAX_INPUT_LINES, MAX_DEBUG_LINES, MAX_DEBUG_CHARS, MAX_TESTS = 2000, 250, 8, 10, 300, 2
FORMAT_MESSAGE = "Incorrect Format: Put your code inside a ```python ... ``` block."
TRUNCATED_MESSAGE = ("Truncated Attempt: Your previous response was too long and truncated because it reached the "
                     "maximum response length. Try again with a shorter response.")


def cut(text, n: int = MAX_CHARS) -> str:
    text = text if isinstance(text, str) else str(text)
    return text[:n] + "..." if len(text) > n else text


def short_trace(error: dict) -> str:
    """``Type: message`` then, for the last three frames in Solution.py, the source line and
    ``Line N in func (Solution.py)`` (the SDPO authors' ``_short_trace``)."""
    lines = [f"{error.get('type', 'Error')}: {error.get('message', '')}".rstrip(": ")]
    for lineno, name, source in error.get("frames", []):
        if source:
            lines.append(f"  {source}")
        lines.append(f"Line {lineno} in {name} (Solution.py)")
    return "\n".join(lines)


def input_lines(shown) -> list[str]:
    """A test's input as feedback lines: stdin text (8 lines of 250), or call arguments
    (``name = value`` for keyword arguments, one JSON value a line for positional ones)."""
    if isinstance(shown, dict):
        return [f"{k} = {cut(json.dumps(v))}" for k, v in shown.items()]
    if isinstance(shown, list):
        text = "\n".join(json.dumps(a) for a in shown)
    else:
        text = str(shown)
    lines = text.splitlines()
    out = [cut(line) for line in lines[:MAX_INPUT_LINES]]
    if len(lines) > MAX_INPUT_LINES:
        out.append(f"... ({len(lines) - MAX_INPUT_LINES} more lines)")
    return out


def debug_lines(stderr: str) -> list[str]:
    text = (stderr or "").strip()
    if not text:
        return []
    lines = text.split("\n")
    out = ["", "Debug Output", *(cut(line, MAX_DEBUG_CHARS) for line in lines[:MAX_DEBUG_LINES])]
    if len(lines) > MAX_DEBUG_LINES:
        out.append(f"... ({len(lines) - MAX_DEBUG_LINES} more lines)")
    return out


def select_failures(outcomes: list) -> list:
    """The cases the feedback shows (SDPO's rule, see the module docstring)."""
    for wanted in (("runtime_error", "memory"), ("time_limit",)):
        first = next((o for o in outcomes if o.status in wanted), None)
        if first is not None:
            return [first]
    wrong = [o for o in outcomes if o.status == "wrong_answer"]
    wrong.sort(key=lambda o: len(json.dumps(o.input) if not isinstance(o.input, str) else o.input) + len(o.output))
    return wrong[:MAX_TESTS]


def render_case(o) -> list[str]:
    if o.status in ("runtime_error", "memory"):
        head = "Runtime Error" if o.status == "runtime_error" else "Memory Limit Exceeded"
        return [head, o.error, "", "Last Executed Input", *input_lines(o.input), *debug_lines(o.debug)]
    if o.status == "time_limit":
        return ["Time Limit Exceeded", "", "Last Executed Input", *input_lines(o.input), *debug_lines(o.debug)]
    head = f"Test Case {o.index + 1}: Wrong Answer"
    if o.error:  # the output cap, or a forged report, said in the header
        head += f" ({o.error})"
    return [head, "", "Input", *input_lines(o.input), "", "Output", cut(o.output) if o.output else "(no output)",
            "", "Expected", cut(o.expected), *debug_lines(o.debug)]


def render_feedback(outcomes: list) -> str:
    """The feedback text for one program's test outcomes ("" when all passed), <= 2,000 characters."""
    if not outcomes:
        return "No test execution information available."
    parts = []
    for o in select_failures(outcomes):
        parts += [*render_case(o), ""]
    return "\n".join(parts).rstrip()[:MAX_LENGTH]


def format_feedback(truncated: bool) -> str:
    """No ```python block: the format message, or the truncation one when the block never closed
    (the completion ran into the length limit mid-code)."""
    return TRUNCATED_MESSAGE if truncated else FORMAT_MESSAGE
