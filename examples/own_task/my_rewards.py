"""A reward of one's own for the "which number is larger" questions, with TRL's signature: every dataset
column arrives as a keyword (here ``a``, ``b`` and ``answer``, one value per completion), and the function
returns one score per completion."""

import re


def larger(prompts, completions, a, b, **kwargs) -> list[float]:
    """1.0 when the first number the reply writes is the larger of the two, else 0.0."""
    scores = []
    for completion, x, y in zip(completions, a, b):
        text = completion[-1]["content"] if isinstance(completion, list) else completion   # chat or plain text
        found = re.search(r"-?\d+", text)
        scores.append(float(found is not None and int(found.group()) == max(x, y)))
    return scores
