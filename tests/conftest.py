"""Session settings for the whole suite: one torch thread per process.

``make test`` runs two pytest-xdist workers on a 2-core machine; two workers of two threads each
would fight over the cores. Warm starts are shared through the on-disk cache
(``$SDPO_KIT_CACHE``, set by the Makefile), built once whichever worker asks first.
"""

import torch

torch.set_num_threads(1)
