"""Results to pages: ``render.py`` rewrites the README's, the docs' and the notebooks' number blocks from
``benchmarks/results/``, one module a family of results files: each turns a results file into the Markdown
of a block (a table and its provenance line) or the numbers of the prose (fields).

    render      the blocks and fields, and ``--check`` (python reports/render.py)
    staleness   which results files the last ``make bench-check`` found moved: the pages' Stale notes
    plot_*      the docs' figures (the dashboard from a run of configs/demo.yaml, the skill lab's from its results)

    format      tables, numbers, intervals and the provenance line every block ends with
    demo        the tiny lab's demo, its variants, step times, warm start, plateau
    algorithms  VAPOR, SDPO, teacher-student PPO and the export round trips on the tiny lab
    sdpo_lab    the SDPO lab's runs (sdpo_lab*.json); sdpo_room: its headroom and room-to-learn files
    code        the code lab and the code reward
    real        SmolLM2-135M-Instruct, the real CPU model: tasks, speed, decoding, learning, SDPO
    notebooks   the notebooks' reference figures and wall times, and CI on a fresh clone
    course      notebook 00's first run and the lab's held-out accuracy
    docs        the concept pages' and notebooks' prose numbers
    pins        the pinned versions and install line (from the repository's files)
    gpu         what has run on a GPU (benchmarks/results/gpu/)
"""

import sys
from pathlib import Path

# the pages read the experiments' declarations and fingerprints (benchmarks/experiments.py, fingerprint.py),
# imported flat, as the scripts beside them import each other; this room stands on benchmarks/, never the reverse
_BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")
if _BENCHMARKS not in sys.path:
    sys.path.insert(0, _BENCHMARKS)
