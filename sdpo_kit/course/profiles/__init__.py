"""One module per notebook, ``nbNN.py``, each with ``PROFILES``: that notebook's settings per model
(``sdpo_kit.course.setup`` picks one). A module may name ``DEFAULT_MODEL = {"cpu": ..., "cuda": ...}``
when the notebook opens on another model than the tiny lab on a CPU and the T4 model on a GPU."""
