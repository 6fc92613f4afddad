"""sdpo_kit: a notebook-first toolkit for RL post-training of language models.

The library behind the notebooks: pure loss functions (``losses``), reward functions with
TRL's signature (``rewards``), synthetic verifiable tasks (``tasks``), the offline tiny lab
(``lab``), one loader for every model (``models.load_policy``), live plots (``plotting``)
and one readable trainer file per algorithm (``trainers``).
"""

__version__ = "0.1.0"
