"""Tasks: what a run trains on and is measured on, each a ``Task`` with a name a config's ``task:`` section uses.

    base.py           the ``Task`` protocol, ``TASKS`` (name -> factory), ``make_task``, greedy accuracy, the
                      answer helpers every task shares (``extract_answer``, ``is_correct``, ``prompt_text``)
    arithmetic.py     the tiny lab's sums (arithmetic, tagged answers, VAPOR's preference pairs, long addition)
    word_problems.py  sums and short word problems in words, graded by difficulty, for a real model
    dataset.py        your own questions and answers from a file (JSONL, JSON, CSV, Parquet, save_to_disk)
    code.py           the code task (``lab_code``): an expression in x, run in the sandbox (``sdpo_kit.sandbox``)
    feedback.py       checkers' feedback on a number: too large / too small, or which digits are wrong
    environments.py   the Environment protocol (a step returns score and feedback), ArithmeticEnvironment

Importing this room registers every task in it. An algorithm's own tasks register from its package (VAPOR's
``vapor_word_problems``); ``sdpo_kit.make_task(name, **options)`` builds any of them.
"""

from sdpo_kit.tasks import arithmetic, code, dataset, word_problems  # noqa: F401 (each registers its tasks in TASKS)
from sdpo_kit.tasks.arithmetic import ArithmeticTask
from sdpo_kit.tasks.base import HINT_TEMPLATE, TASKS, Task, extract_answer, is_correct, prompt_text
from sdpo_kit.tasks.dataset import DatasetTask
from sdpo_kit.tasks.environments import ArithmeticEnvironment
from sdpo_kit.tasks.word_problems import WordProblemTask
from sdpo_kit.text.answers import completion_text

__all__ = ["ArithmeticEnvironment", "ArithmeticTask", "DatasetTask", "HINT_TEMPLATE", "TASKS", "Task",
           "WordProblemTask", "completion_text", "extract_answer", "is_correct", "prompt_text"]
