"""An answer reader of one's own: held-out evaluation and the exact-match reward read answers with it.

For "Which number is larger, 35 or 39?" the reply "35 is larger than 39" is wrong, though its last number is
right: read the first number instead."""

import re


def first_number(text: str) -> str | None:
    """The first whole number in the reply, or None when it has none."""
    found = re.search(r"-?\d+", text)
    return found.group() if found else None
