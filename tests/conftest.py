"""Session settings for the whole suite: one torch thread per process, and the longest files first.

``make test`` runs two pytest-xdist workers on a 2-core machine; two workers of two threads each
would fight over the cores. Warm starts are shared through the on-disk cache
(``$SDPO_KIT_CACHE``, set by the Makefile), built once whichever worker asks first.

With ``--dist loadfile`` a file stays on one worker (its fixtures built once), so a long file started last
keeps one worker busy while the other waits: the files in ``SECONDS`` run first, longest first, the rest
after them in their usual order.
"""

from pathlib import Path

import torch

torch.set_num_threads(1)

# seconds a file's checks took on this 2-core machine (pytest --durations=0, summed by file, 2026-11-28): the unit
# tests' longest (make test, at 5585ed1), and every file of make test-real (tests/real and the notebooks on the real
# model, at 8df7d9f)
SECONDS = {"test_skill_lab.py": 94, "test_export_gguf.py": 61, "test_code_problems.py": 25,
           "test_real_configs.py": 297, "04_vapor.ipynb": 160, "test_real_export.py": 115, "03_rewards.ipynb": 104,
           "01_policy_gradient_from_scratch.ipynb": 102, "08_scale_out_and_export.ipynb": 100,
           "07_teacher_student_ppo.ipynb": 95, "02_grpo.ipynb": 79, "test_real_model.py": 77,
           "06_test_time_self_distillation.ipynb": 70, "05_sdpo.ipynb": 66, "00_first_run.ipynb": 49,
           "test_real_vapor_task.py": 3}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -SECONDS.get(Path(str(item.fspath)).name, 0))   # stable: a file's own order kept
